package launcher

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/rdmacell/rdmacell/bootstrap"
	"github.com/rdmacell/rdmacell/cell"
)

// Defaults of the Config fields whose zero value means "the default".
const (
	// DefaultGrace is how long ranks get to exit after SIGTERM.
	DefaultGrace = 10 * time.Second
	// DefaultNodeTimeout is how long a silent cellrun of a multi-node job
	// is given before the other nodes declare it dead (its lease TTL).
	DefaultNodeTimeout = 5 * time.Second
	// DefaultNodeRendezvous bounds the wait for the other nodes' cellrun
	// when RendezvousTimeout is not set: nodes of a cluster are often
	// started by hand or by a scheduler, minutes apart.
	DefaultNodeRendezvous = 5 * time.Minute
)

// Config is one node's share of a job. Fields documented as optional are
// left out of the ranks' environment while zero.
type Config struct {
	// Program is what each rank runs: an executable (looked up in PATH
	// when it has no slash) or a directory holding a Go main package, which
	// is built once. Args are its arguments.
	Program string
	Args    []string

	// ProcsPerNode (-n) is the number of ranks on this node, at least 1.
	ProcsPerNode int
	// Nodes (--nnodes) is the number of nodes, at least 1, and NodeRank
	// (--node-rank) this node's index among them.
	Nodes    int
	NodeRank int
	// Job (--job) is the job id; empty means a random one, which only a
	// single-node job can use.
	Job string

	// EtcdEndpoints (--etcd) is an existing etcd cluster. Empty means an
	// embedded etcd served by this cellrun, on EtcdServe if set, else on a
	// free loopback port (single node only).
	EtcdEndpoints []string
	EtcdServe     string
	// RdzvEndpoint (--rdzv-endpoint) is node 0's embedded etcd as every
	// node names it, host:port, the same on every node (torchrun's
	// --rdzv-endpoint): node 0 serves on that port on every interface,
	// the others use it as --etcd. It replaces EtcdServe and
	// EtcdEndpoints, and needs JoinToken on every node.
	RdzvEndpoint string
	// serveName is the name the other nodes reach node 0's etcd by, put
	// in its certificate.
	serveName string
	// TLS files and credentials for EtcdEndpoints; optional.
	EtcdCA, EtcdCert, EtcdKey string
	EtcdUser, EtcdPassword    string
	// JoinToken (--join) is the token the nodes of a job share (see
	// token.go): the job secret and, with an embedded etcd served by node
	// 0, the TLS credentials to reach it. Required on every node of a
	// multi-node job but node 0, which prints a fresh one when it has
	// none; with --etcd and no --etcd-ca/--etcd-cert it means node 0's
	// etcd, reached with the credentials it derives.
	JoinToken string

	// Knobs for the ranks; optional. Transport is auto, shm, tcp or ibv; Paths
	// the QPs per peer; CellSize the flowcell size in bytes; Policy
	// adaptive, ecmp or spray; Debug "1" or a comma-separated list of
	// components; RendezvousTimeout bounds the ranks' rendezvous (and this
	// cellrun's wait for the other nodes).
	Transport string
	Paths     int
	CellSize  int64
	Policy    string
	Debug     string
	// Reproducible makes every reduction of the ranks' collectives fold in
	// rank order (RDMACELL_REPRODUCIBLE=1).
	Reproducible      bool
	RendezvousTimeout time.Duration
	// Timeout is the ranks' watchdog bound on a wait and StallReport how
	// long a wait lasts before the ranks report what they do, which this
	// cellrun prints (node 0's, in a multi-node job); 0 leaves the ranks'
	// defaults, NoTimeout turns either off.
	Timeout, StallReport time.Duration
	// TraceDir, if set, is where the ranks write their flight recorders
	// (on failure, watchdog timeout, SIGUSR1 to cellrun, and exit) and
	// where cellrun merges them into timeline.json and timeline.svg.
	TraceDir string
	// MetricsPort, if set, makes local rank i serve Prometheus metrics on
	// port MetricsPort+i.
	MetricsPort int
	// Elastic keeps the job going when a rank dies (is killed by a
	// signal): the others may go on without it (comm.Comm.Shrink). Each
	// death is said in one line. The job succeeds when every rank that did
	// not die exits 0, and one at least did.
	Elastic bool

	// CPUs is how many processors the ranks of this node share; zero means
	// this process's runtime.GOMAXPROCS. With transport tcp or ibv the
	// ranks get GOMAXPROCS = CPUs / ProcsPerNode, at least 1, unless the
	// environment sets GOMAXPROCS (see the package documentation).
	CPUs int

	// LogDir, if set, also receives each rank's output in rank.N.log.
	LogDir string
	// NoPrefix leaves the "[rank] " prefix off the output lines.
	NoPrefix bool
	// Grace is how long ranks get between SIGTERM and SIGKILL; zero means
	// DefaultGrace.
	Grace time.Duration
	// NodeTimeout is the lease TTL of this cellrun in a multi-node job;
	// zero means DefaultNodeTimeout. etcd counts whole seconds.
	NodeTimeout time.Duration
	// MaxRestarts (--max-restarts) is how many times a job whose rank
	// failed is started again, as a new generation (see restart.go),
	// before it fails; 0 never restarts. Every node must give the same.
	// RestartDelay is the pause between the end of one generation and the
	// start of the next.
	MaxRestarts  int
	RestartDelay time.Duration

	// Signals, if set, delivers the signals to forward to the ranks (SIGINT
	// and SIGTERM); the first one stops the job, the next one kills it.
	Signals <-chan os.Signal
	// Env is the environment the ranks inherit; nil means os.Environ().
	Env []string
	// Logger receives cellrun's own diagnostics; nil means warnings and
	// errors on stderr.
	Logger *slog.Logger
}

// Bounds of the Config fields: beyond them a value is a mistake (a typo,
// a unit forgotten), not a choice, and is refused before anything starts.
const (
	// MaxProcsPerNode bounds -n; the machine's own limits (see
	// checkMachineLimits) usually bind first.
	MaxProcsPerNode = 4096
	// MaxNodes bounds --nnodes.
	MaxNodes = 4096
	// MinCellSize and MaxCellSize bound --cell-size: below a page a cell is
	// all overhead (two work requests and a token per few bytes); the
	// communicator takes at most 2 GiB.
	MinCellSize = 4 << 10
	MaxCellSize = 2 << 30
	// NoTimeout, as Timeout or StallReport, turns the watchdog or the
	// stall reports of the ranks off.
	NoTimeout time.Duration = -1
	// MaxPaths bounds --paths, as the cell engine does.
	MaxPaths = cell.MaxPaths
	// maxWait bounds --grace and --rendezvous-timeout; maxNodeTimeout
	// bounds --node-timeout, which etcd counts in whole seconds.
	maxWait        = 24 * time.Hour
	maxNodeTimeout = time.Hour
	// MaxRestarts bounds --max-restarts: each generation is a job id
	// of its own in etcd, and a job that fails this often does not
	// recover by trying again.
	MaxRestarts = 1000
)

// jobIDPattern is the job ids etcd keys are built from (as bootstrap).
var jobIDPattern = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

// debugPattern is a list of component names, or "1".
var debugPattern = regexp.MustCompile(`^[a-z0-9_]+(,[a-z0-9_]+)*$`)

// validate checks the configuration and fills in defaults. Every error is a
// *FlagError naming the flag.
func (c *Config) validate() error {
	if c.Program == "" {
		return &FlagError{Flag: "PROGRAM", Value: "", Want: "the program each rank runs, e.g. cellrun -n 4 ./train"}
	}
	if c.ProcsPerNode < 1 {
		return &FlagError{Flag: "-n/--nproc-per-node", Value: strconv.Itoa(c.ProcsPerNode), Want: "want at least 1 rank per node"}
	}
	if c.ProcsPerNode > MaxProcsPerNode {
		return &FlagError{Flag: "-n/--nproc-per-node", Value: strconv.Itoa(c.ProcsPerNode),
			Want: fmt.Sprintf("want at most %d ranks per node", MaxProcsPerNode)}
	}
	if c.Nodes < 1 {
		return &FlagError{Flag: "--nnodes", Value: strconv.Itoa(c.Nodes), Want: "want at least 1 node"}
	}
	if c.Nodes > MaxNodes {
		return &FlagError{Flag: "--nnodes", Value: strconv.Itoa(c.Nodes), Want: fmt.Sprintf("want at most %d nodes", MaxNodes)}
	}
	if c.NodeRank < 0 || c.NodeRank >= c.Nodes {
		return &FlagError{Flag: "--node-rank", Value: strconv.Itoa(c.NodeRank),
			Want: fmt.Sprintf("want 0 <= node rank < --nnodes %d", c.Nodes)}
	}
	if err := c.validateJob(); err != nil {
		return err
	}
	if err := c.validateEtcd(); err != nil {
		return err
	}
	if err := c.validateKnobs(); err != nil {
		return err
	}
	if c.Grace < 0 || c.Grace > maxWait {
		return &FlagError{Flag: "--grace", Value: c.Grace.String(), Want: "want a positive duration of at most " + maxWait.String()}
	}
	if c.Grace == 0 {
		c.Grace = DefaultGrace
	}
	if c.NodeTimeout != 0 && (c.NodeTimeout < time.Second || c.NodeTimeout > maxNodeTimeout) {
		return &FlagError{Flag: "--node-timeout", Value: c.NodeTimeout.String(),
			Want: "want 1s to " + maxNodeTimeout.String() + " (etcd leases count whole seconds)"}
	}
	if c.NodeTimeout == 0 {
		c.NodeTimeout = DefaultNodeTimeout
	}
	if c.MaxRestarts < 0 || c.MaxRestarts > MaxRestarts {
		return &FlagError{Flag: "--max-restarts", Value: strconv.Itoa(c.MaxRestarts), Want: fmt.Sprintf("want 0 to %d restarts", MaxRestarts)}
	}
	if c.RestartDelay < 0 || c.RestartDelay > maxWait {
		return &FlagError{Flag: "--restart-delay", Value: c.RestartDelay.String(), Want: "want 0 or a positive duration of at most " + maxWait.String()}
	}
	if c.Env == nil {
		c.Env = os.Environ()
	}
	return nil
}

func (c *Config) validateJob() error {
	if c.Job == "" {
		if c.Nodes > 1 {
			return &FlagError{Flag: "--job", Value: "",
				Want: fmt.Sprintf("a job of --nnodes %d needs the same --job id on every node", c.Nodes)}
		}
		var b [6]byte
		_, _ = rand.Read(b[:]) // crypto/rand does not fail on Linux
		c.Job = "cellrun-" + hex.EncodeToString(b[:])
	}
	if !jobIDPattern.MatchString(c.Job) {
		return &FlagError{Flag: "--job", Value: c.Job, Want: "want letters, digits, '.', '_' or '-'"}
	}
	return nil
}

func (c *Config) validateEtcd() error {
	if err := c.resolveRdzv(); err != nil {
		return err
	}
	if c.JoinToken != "" {
		if _, err := parseToken(c.JoinToken); err != nil {
			return &FlagError{Flag: "--join", Value: "***", Want: err.Error()}
		}
		if len(c.EtcdEndpoints) == 0 && c.EtcdServe == "" {
			return &FlagError{Flag: "--join", Value: "***", Want: "joins a job whose etcd is given with --etcd or served with --etcd-serve"}
		}
	}
	if c.Nodes > 1 && c.JoinToken == "" && c.EtcdServe == "" && len(c.EtcdEndpoints) > 0 {
		return &FlagError{Flag: "--join", Value: "",
			Want: fmt.Sprintf("node %d of --nnodes %d needs the job's token: the one node 0 printed, or one from cellrun --new-token given to every node", c.NodeRank, c.Nodes)}
	}
	joined := strings.Join(c.EtcdEndpoints, ",")
	if len(c.EtcdEndpoints) > 0 {
		if _, err := bootstrap.ParseEndpoints(joined); err != nil {
			return &FlagError{Flag: "--etcd", Value: joined, Want: "want host:port[,host:port...]: " + err.Error()}
		}
		if c.EtcdServe != "" {
			return &FlagError{Flag: "--etcd-serve", Value: c.EtcdServe,
				Want: "serve an embedded etcd or use --etcd " + joined + ", not both"}
		}
	}
	if c.EtcdServe != "" && c.NodeRank != 0 {
		return &FlagError{Flag: "--etcd-serve", Value: c.EtcdServe,
			Want: fmt.Sprintf("only node 0 serves etcd (this is --node-rank %d; give it --etcd)", c.NodeRank)}
	}
	if c.Nodes > 1 && len(c.EtcdEndpoints) == 0 && c.EtcdServe == "" {
		if c.NodeRank == 0 {
			return &FlagError{Flag: "--etcd", Value: "",
				Want: fmt.Sprintf("a job of --nnodes %d needs --etcd host:port, or --etcd-serve ADDR on node 0", c.Nodes)}
		}
		return &FlagError{Flag: "--etcd", Value: "",
			Want: fmt.Sprintf("node %d of --nnodes %d needs --etcd host:port (node 0's --etcd-serve address, or a cluster)", c.NodeRank, c.Nodes)}
	}
	creds := []struct{ flag, value string }{
		{"--etcd-ca", c.EtcdCA}, {"--etcd-cert", c.EtcdCert}, {"--etcd-key", c.EtcdKey},
		{"--etcd-user", c.EtcdUser}, {"--etcd-password", c.EtcdPassword},
	}
	for _, cr := range creds {
		if cr.value != "" && len(c.EtcdEndpoints) == 0 {
			value := cr.value
			if cr.flag == "--etcd-password" {
				value = "***"
			}
			return &FlagError{Flag: cr.flag, Value: value, Want: "only applies to an external cluster given with --etcd"}
		}
	}
	if (c.EtcdCert == "") != (c.EtcdKey == "") {
		return &FlagError{Flag: "--etcd-cert/--etcd-key", Value: c.EtcdCert + "/" + c.EtcdKey, Want: "give both or neither"}
	}
	if c.EtcdPassword != "" && c.EtcdUser == "" {
		return &FlagError{Flag: "--etcd-user", Value: "", Want: "--etcd-password needs --etcd-user"}
	}
	return nil
}

func (c *Config) validateKnobs() error {
	switch c.Transport {
	case "", "auto", "shm", "tcp", "ibv":
	default:
		return &FlagError{Flag: "--transport", Value: c.Transport, Want: "want auto, shm, tcp or ibv"}
	}
	switch c.Policy {
	case "", "adaptive", "ecmp", "spray":
	default:
		return &FlagError{Flag: "--policy", Value: c.Policy, Want: "want adaptive, ecmp or spray"}
	}
	if c.Paths < 0 || c.Paths > MaxPaths {
		return &FlagError{Flag: "--paths", Value: strconv.Itoa(c.Paths), Want: fmt.Sprintf("want 1 to %d paths per peer", MaxPaths)}
	}
	if c.CellSize != 0 && (c.CellSize < MinCellSize || c.CellSize > MaxCellSize) {
		return &FlagError{Flag: "--cell-size", Value: strconv.FormatInt(c.CellSize, 10), Want: "want 4KiB to 2GiB"}
	}
	if c.Debug != "" && !debugPattern.MatchString(c.Debug) {
		return &FlagError{Flag: "--debug", Value: c.Debug, Want: "want 1, or a comma-separated list of components such as cell,bootstrap"}
	}
	if c.RendezvousTimeout < 0 || c.RendezvousTimeout > maxWait {
		return &FlagError{Flag: "--rendezvous-timeout", Value: c.RendezvousTimeout.String(),
			Want: "want a positive duration of at most " + maxWait.String()}
	}
	return nil
}

// etcdClient is how this cellrun reaches an external cluster.
func (c *Config) etcdClient() bootstrap.ClientConfig {
	cc := bootstrap.ClientConfig{Endpoints: c.EtcdEndpoints, Username: c.EtcdUser, Password: c.EtcdPassword}
	if c.EtcdCA != "" || c.EtcdCert != "" {
		cc.TLS = &bootstrap.TLSFiles{CAFile: c.EtcdCA, CertFile: c.EtcdCert, KeyFile: c.EtcdKey}
	}
	return cc
}

// resolveRdzv turns RdzvEndpoint into this node's EtcdServe or
// EtcdEndpoints.
func (c *Config) resolveRdzv() error {
	if c.RdzvEndpoint == "" {
		return nil
	}
	host, port, err := net.SplitHostPort(c.RdzvEndpoint)
	if n, perr := strconv.Atoi(port); err != nil || perr != nil || n < 1 || n > 65535 || host == "" {
		return &FlagError{Flag: "--rdzv-endpoint", Value: c.RdzvEndpoint, Want: "want node 0's host:port, e.g. train-0.train:29400"}
	}
	if c.EtcdServe != "" || len(c.EtcdEndpoints) > 0 {
		return &FlagError{Flag: "--rdzv-endpoint", Value: c.RdzvEndpoint, Want: "replaces --etcd and --etcd-serve: give one or the other"}
	}
	if c.JoinToken == "" {
		return &FlagError{Flag: "--join", Value: "", Want: "--rdzv-endpoint needs the job's token on every node (--join TOKEN or @FILE)"}
	}
	if c.NodeRank == 0 {
		c.EtcdServe, c.serveName = net.JoinHostPort("0.0.0.0", port), host
	} else {
		c.EtcdEndpoints = []string{c.RdzvEndpoint}
	}
	c.RdzvEndpoint = ""
	return nil
}
