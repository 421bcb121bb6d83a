package launcher

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// ErrHelp is returned by ParseArgs for -h or --help.
var ErrHelp = pflag.ErrHelp

// flagValues holds the flags whose text needs more than pflag's parsing.
type flagValues struct {
	etcd     string
	cellSize string
	help     bool
	newToken bool
}

// ErrNewToken is returned by ParseArgs for --new-token: the caller prints
// a fresh join token (NewToken) and exits.
var ErrNewToken = errors.New("new token requested")

// NewToken is a fresh join token, as --new-token prints.
func NewToken() string { return newToken().String() }

// newFlagSet defines cellrun's flags, writing into cfg and raw.
func newFlagSet(cfg *Config, raw *flagValues) *pflag.FlagSet {
	fs := pflag.NewFlagSet("cellrun", pflag.ContinueOnError)
	fs.SortFlags = false
	fs.SetOutput(io.Discard) // errors are returned, help is printed by the caller
	// Everything after PROGRAM belongs to PROGRAM.
	fs.SetInterspersed(false)

	fs.IntVarP(&cfg.ProcsPerNode, "nproc-per-node", "n", 1, "`N` ranks to start on this node")
	fs.IntVar(&cfg.Nodes, "nnodes", 1, "`N` nodes in the job, each running its own cellrun")
	fs.IntVar(&cfg.NodeRank, "node-rank", 0, "index `K` of this node, 0..nnodes-1; its ranks are node-rank*n .. node-rank*n+n-1")
	fs.StringVar(&cfg.Job, "job", "", "`ID` of the job, the same on every node (letters, digits, '.', '_', '-'); required with --nnodes > 1, random otherwise")
	fs.StringVar(&raw.etcd, "etcd", "", "use the existing etcd cluster at `ENDPOINTS`, host:port[,host:port...]; default: an embedded etcd")
	fs.StringVar(&cfg.EtcdServe, "etcd-serve", "", "on node 0: serve the embedded etcd on `ADDR` (e.g. 0.0.0.0:2379) for the other nodes")
	fs.StringVar(&cfg.RdzvEndpoint, "rdzv-endpoint", "", "node 0's etcd as every node names it, `HOST:PORT`, the same on every node: node 0 serves it, the others join it (instead of --etcd-serve/--etcd)")
	fs.StringVar(&cfg.JoinToken, "join", "", "the job's `TOKEN`, the same on every node: node 0 prints one, or make one with --new-token; @FILE reads it from FILE (a token on the command line is visible in the process list)")
	fs.BoolVar(&raw.newToken, "new-token", false, "print a fresh join token and exit")
	fs.StringVar(&cfg.EtcdCA, "etcd-ca", "", "PEM `FILE` of the CA that signed the --etcd cluster's certificate")
	fs.StringVar(&cfg.EtcdCert, "etcd-cert", "", "PEM `FILE` of the client certificate for the --etcd cluster (with --etcd-key)")
	fs.StringVar(&cfg.EtcdKey, "etcd-key", "", "PEM `FILE` of the key of --etcd-cert")
	fs.StringVar(&cfg.EtcdUser, "etcd-user", "", "`USER` name for the --etcd cluster")
	fs.StringVar(&cfg.EtcdPassword, "etcd-password", "", "`PASSWORD` of --etcd-user (visible to other users in the process list)")
	fs.StringVar(&cfg.Transport, "transport", "", "`NAME` of the transport between ranks: auto, shm, tcp or ibv (sets RDMACELL_TRANSPORT)")
	fs.IntVar(&cfg.Paths, "paths", 0, "`N` paths (QPs) per peer, at least 1 (sets RDMACELL_PATHS)")
	fs.StringVar(&raw.cellSize, "cell-size", "", "flowcell `SIZE` in bytes, e.g. 65536 or 64KiB (sets RDMACELL_CELL_SIZE)")
	fs.StringVar(&cfg.Policy, "policy", "", "path scheduling `POLICY`: adaptive, ecmp or spray (sets RDMACELL_POLICY)")
	fs.StringVar(&cfg.Debug, "debug", "", "debug logs, of cellrun and the ranks: alone for all, or =`COMPONENTS`, e.g. --debug=cell,bootstrap (sets RDMACELL_DEBUG)")
	fs.Lookup("debug").NoOptDefVal = "1"
	fs.BoolVar(&cfg.Reproducible, "reproducible", false, "reductions give the same bits whatever the algorithm, transport and layout (sets RDMACELL_REPRODUCIBLE=1)")
	fs.DurationVar(&cfg.RendezvousTimeout, "rendezvous-timeout", 0,
		"how long ranks (and nodes) wait for each other at start, e.g. 2m (sets RDMACELL_RENDEZVOUS_TIMEOUT)")
	fs.DurationVar(&cfg.Timeout, "timeout", 0,
		"fail a collective or message that has waited this long, e.g. 30m; 0 for never (default 10m; sets RDMACELL_TIMEOUT)")
	fs.DurationVar(&cfg.StallReport, "stall-report", 0,
		"print what every rank does once a wait has lasted this long, then at doubling intervals; 0 for never (default 1m; sets RDMACELL_STALL_REPORT)")
	fs.StringVar(&cfg.TraceDir, "trace-dir", "",
		"ranks write their last operations to `DIR`/rank-N.json on failure, timeout, SIGUSR1 and exit; cellrun merges them into DIR/timeline.json (Perfetto) and DIR/timeline.svg")
	fs.BoolVar(&cfg.Elastic, "elastic", false, "a rank that dies (killed by a signal) does not stop the others, which may go on without it (comm.Comm.Shrink)")
	fs.IntVar(&cfg.MetricsPort, "metrics-port", 0, "local rank i serves Prometheus metrics on :`BASE`+i (sets RDMACELL_METRICS_ADDR)")
	fs.StringVar(&cfg.LogDir, "log-dir", "", "also write each rank's output to `DIR`/rank.N.log")
	fs.BoolVar(&cfg.NoPrefix, "no-prefix", false, "do not prefix output lines with \"[rank] \"")
	fs.DurationVar(&cfg.Grace, "grace", DefaultGrace, "how long ranks get to exit after SIGTERM before SIGKILL")
	fs.DurationVar(&cfg.NodeTimeout, "node-timeout", DefaultNodeTimeout,
		"with --nnodes > 1: how long a silent node's cellrun is given before the job is stopped")
	fs.IntVar(&cfg.MaxRestarts, "max-restarts", 0,
		"when a rank fails, stop the others and start the whole job again, at most `N` times, as a new generation (sets RDMACELL_RESTART_COUNT); the same on every node")
	fs.DurationVar(&cfg.RestartDelay, "restart-delay", 0, "with --max-restarts: wait this long between a failed generation and the next")
	fs.BoolVarP(&raw.help, "help", "h", false, "show this help")
	return fs
}

// ParseArgs reads cellrun's command line, args without the program name,
// into a Config. It returns ErrHelp for -h or --help, and an error matching
// ErrUsage, naming the flag and its value, for a bad command line.
func ParseArgs(args []string) (Config, error) { return ParseArgsEnv(args, nil) }

// ParseArgsEnv is ParseArgs that also takes, from the environment lookup
// reads, what the command line leaves out when cellrun runs as a task of
// a Slurm step (--nnodes, --node-rank, --job, node 0's etcd and the join
// token, see slurm.go) or as a pod of a Kubernetes Indexed Job
// (--node-rank, see kubernetes.go). Main passes os.LookupEnv; nil reads
// nothing.
func ParseArgsEnv(args []string, lookup func(string) (string, bool)) (Config, error) {
	var cfg Config
	var raw flagValues
	fs := newFlagSet(&cfg, &raw)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return Config{}, ErrHelp
		}
		return Config{}, usageError{err}
	}
	if raw.help {
		return Config{}, ErrHelp
	}
	if raw.newToken {
		return Config{}, ErrNewToken
	}
	rest := fs.Args()
	if len(rest) == 0 {
		return Config{}, usageError{errors.New("missing PROGRAM: cellrun [flags] PROGRAM [ARGS...]")}
	}
	cfg.Program, cfg.Args = rest[0], rest[1:]

	if fs.Changed("etcd") {
		cfg.EtcdEndpoints = splitList(raw.etcd)
		if len(cfg.EtcdEndpoints) == 0 {
			return Config{}, &FlagError{Flag: "--etcd", Value: raw.etcd, Want: "want host:port[,host:port...]"}
		}
	}
	if name, ok := strings.CutPrefix(cfg.JoinToken, "@"); ok {
		b, err := os.ReadFile(name)
		if err != nil {
			return Config{}, &FlagError{Flag: "--join", Value: cfg.JoinToken, Want: "a readable file holding the token: " + err.Error()}
		}
		cfg.JoinToken = strings.TrimSpace(string(b))
	}
	if fs.Changed("cell-size") {
		n, err := parseSize(raw.cellSize)
		if err != nil {
			return Config{}, &FlagError{Flag: "--cell-size", Value: raw.cellSize, Want: err.Error()}
		}
		cfg.CellSize = n
	}
	// Zero means "not set" in Config; on the command line it is a mistake.
	if fs.Changed("paths") && cfg.Paths < 1 {
		return Config{}, &FlagError{Flag: "--paths", Value: strconv.Itoa(cfg.Paths), Want: fmt.Sprintf("want 1 to %d paths per peer", MaxPaths)}
	}
	for _, d := range []struct {
		name  string
		value time.Duration
	}{{"rendezvous-timeout", cfg.RendezvousTimeout}, {"grace", cfg.Grace}, {"node-timeout", cfg.NodeTimeout}} {
		if fs.Changed(d.name) && d.value <= 0 {
			return Config{}, &FlagError{Flag: "--" + d.name, Value: d.value.String(), Want: "want a positive duration"}
		}
	}
	// On the command line 0 turns the bound off.
	for _, b := range []struct {
		name string
		d    *time.Duration
	}{{"timeout", &cfg.Timeout}, {"stall-report", &cfg.StallReport}} {
		switch {
		case *b.d < 0:
			return Config{}, &FlagError{Flag: "--" + b.name, Value: b.d.String(), Want: "want a positive duration, or 0 for none"}
		case fs.Changed(b.name) && *b.d == 0:
			*b.d = NoTimeout
		}
	}
	if fs.Changed("metrics-port") && (cfg.MetricsPort < 1 || cfg.MetricsPort+cfg.ProcsPerNode-1 > 65535) {
		return Config{}, &FlagError{Flag: "--metrics-port", Value: strconv.Itoa(cfg.MetricsPort), Want: "want a port such that BASE+n-1 <= 65535"}
	}
	if fs.Changed("debug") && cfg.Debug == "" {
		return Config{}, &FlagError{Flag: "--debug", Value: "", Want: "want 1, or a comma-separated list of components"}
	}
	if lookup != nil {
		if err := cfg.fromSlurm(fs.Changed, lookup); err != nil {
			return Config{}, err
		}
		if err := cfg.fromKubernetes(fs.Changed, lookup); err != nil {
			return Config{}, err
		}
	}
	return cfg, nil
}

// splitList splits a comma-separated list, dropping blanks.
func splitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

// Usage is cellrun's help text: synopsis, flags, and the environment the
// ranks receive.
func Usage() string {
	var b strings.Builder
	b.WriteString(`Usage: cellrun [flags] PROGRAM [ARGS...]

Starts the ranks of an RDMACell job on this node and supervises them: output
lines are prefixed with the rank, SIGINT/SIGTERM are forwarded, and when a
rank fails the others are stopped and cellrun exits with that rank's code.
PROGRAM may be a directory holding a Go main package; it is built once.

  cellrun -n 4 ./train
  TOKEN=$(cellrun --new-token)   # the job's secret: hand it to each node as a password
  cellrun --nnodes 2 --node-rank 0 --job j1 --etcd-serve 0.0.0.0:2379 --join $TOKEN -n 8 ./train   # on node 0
  cellrun --nnodes 2 --node-rank 1 --job j1 --etcd node0:2379 --join $TOKEN -n 8 ./train           # on node 1
  srun --ntasks-per-node 1 cellrun -n 8 ./train   # one cellrun per Slurm task: nodes, job, rendezvous and token from Slurm

Flags:
`)
	var cfg Config
	b.WriteString(newFlagSet(&cfg, &flagValues{}).FlagUsages())
	b.WriteString(`
Each rank gets RDMACELL_RANK, RDMACELL_WORLD_SIZE, RDMACELL_LOCAL_RANK,
RDMACELL_LOCAL_WORLD_SIZE, RDMACELL_JOB, RDMACELL_ETCD_ENDPOINTS and
RDMACELL_SECRET (the job secret, which never enters etcd), plus the variables
of the knob and --etcd-* flags that were given.
`)
	return b.String()
}
