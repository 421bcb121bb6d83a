package launcher

import (
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Names of the environment variables cellrun sets for each rank: the
// contract between the launcher and the communicator. See the package
// documentation for their values.
const (
	EnvRank              = "RDMACELL_RANK"
	EnvWorldSize         = "RDMACELL_WORLD_SIZE"
	EnvLocalRank         = "RDMACELL_LOCAL_RANK"
	EnvLocalWorldSize    = "RDMACELL_LOCAL_WORLD_SIZE"
	EnvJob               = "RDMACELL_JOB"
	EnvEtcdEndpoints     = "RDMACELL_ETCD_ENDPOINTS"
	EnvTransport         = "RDMACELL_TRANSPORT"
	EnvPaths             = "RDMACELL_PATHS"
	EnvCellSize          = "RDMACELL_CELL_SIZE"
	EnvPolicy            = "RDMACELL_POLICY"
	EnvDebug             = "RDMACELL_DEBUG"
	EnvRendezvousTimeout = "RDMACELL_RENDEZVOUS_TIMEOUT"
	EnvEtcdCA            = "RDMACELL_ETCD_CA"
	EnvEtcdCert          = "RDMACELL_ETCD_CERT"
	EnvEtcdKey           = "RDMACELL_ETCD_KEY"
	EnvEtcdUser          = "RDMACELL_ETCD_USER"
	EnvEtcdPassword      = "RDMACELL_ETCD_PASSWORD"
	EnvSecret            = "RDMACELL_SECRET"
	EnvReproducible      = "RDMACELL_REPRODUCIBLE"
	EnvTimeout           = "RDMACELL_TIMEOUT"
	EnvStallReport       = "RDMACELL_STALL_REPORT"
	EnvTraceDir          = "RDMACELL_TRACE_DIR"
	EnvMetricsAddr       = "RDMACELL_METRICS_ADDR"
	EnvRestartCount      = "RDMACELL_RESTART_COUNT"
)

// ownedVars are never inherited from cellrun's environment: a stale rank
// number or etcd credential from an enclosing job would silently mislead
// the ranks.
var ownedVars = []string{
	EnvRank, EnvWorldSize, EnvLocalRank, EnvLocalWorldSize, EnvJob, EnvEtcdEndpoints,
	EnvEtcdCA, EnvEtcdCert, EnvEtcdKey, EnvEtcdUser, EnvEtcdPassword, EnvSecret,
	EnvRestartCount,
}

// access is how the ranks of this node reach the job: the etcd endpoints,
// the TLS files cellrun made for them (nil when it made none) and the job
// secret.
type access struct {
	endpoints []string
	tls       *tlsDir
	secret    []byte
	token     *jobToken // the job's join token, if it has one: later generations' secrets derive from it
}

// jobEnv is the part of the ranks' environment that is the same for every
// rank of this node in generation gen: the inherited environment minus
// what cellrun owns or overrides, plus the job-wide variables.
func jobEnv(base []string, cfg *Config, acc access, gen int) []string {
	var set []string
	add := func(name, value string) { set = append(set, name+"="+value) }
	add(EnvWorldSize, strconv.Itoa(cfg.Nodes*cfg.ProcsPerNode))
	add(EnvLocalWorldSize, strconv.Itoa(cfg.ProcsPerNode))
	add(EnvJob, generationJob(cfg.Job, gen))
	add(EnvRestartCount, strconv.Itoa(gen))
	add(EnvEtcdEndpoints, strings.Join(acc.endpoints, ","))
	if acc.secret != nil {
		add(EnvSecret, secretEnv(acc.secret))
	}
	if acc.tls != nil {
		add(EnvEtcdCA, acc.tls.caFile)
		add(EnvEtcdCert, acc.tls.certFile)
		add(EnvEtcdKey, acc.tls.keyFile)
	}
	if cfg.Transport != "" {
		add(EnvTransport, cfg.Transport)
	}
	if cfg.Paths != 0 {
		add(EnvPaths, strconv.Itoa(cfg.Paths))
	}
	if cfg.CellSize != 0 {
		add(EnvCellSize, strconv.FormatInt(cfg.CellSize, 10))
	}
	if cfg.Policy != "" {
		add(EnvPolicy, cfg.Policy)
	}
	if cfg.Debug != "" {
		add(EnvDebug, cfg.Debug)
	}
	if cfg.Reproducible {
		add(EnvReproducible, "1")
	}
	if cfg.RendezvousTimeout != 0 {
		add(EnvRendezvousTimeout, cfg.RendezvousTimeout.String())
	}
	for _, b := range []struct {
		name string
		d    time.Duration
	}{{EnvTimeout, cfg.Timeout}, {EnvStallReport, cfg.StallReport}} {
		switch {
		case b.d == NoTimeout:
			add(b.name, "0")
		case b.d > 0:
			add(b.name, b.d.String())
		}
	}
	if cfg.TraceDir != "" {
		add(EnvTraceDir, generationDir(cfg.TraceDir, gen))
	}
	if cfg.EtcdCA != "" {
		add(EnvEtcdCA, cfg.EtcdCA)
	}
	if cfg.EtcdCert != "" {
		add(EnvEtcdCert, cfg.EtcdCert)
	}
	if cfg.EtcdKey != "" {
		add(EnvEtcdKey, cfg.EtcdKey)
	}
	if cfg.EtcdUser != "" {
		add(EnvEtcdUser, cfg.EtcdUser)
	}
	if cfg.EtcdPassword != "" {
		add(EnvEtcdPassword, cfg.EtcdPassword)
	}
	if n := goMaxProcs(base, cfg); n > 0 {
		add(EnvGoMaxProcs, strconv.Itoa(n))
	}

	drop := make(map[string]bool, len(ownedVars)+len(set))
	for _, name := range ownedVars {
		drop[name] = true
	}
	for _, kv := range set {
		name, _, _ := strings.Cut(kv, "=")
		drop[name] = true
	}
	env := make([]string, 0, len(base)+len(set)+2)
	for _, kv := range base {
		if name, _, _ := strings.Cut(kv, "="); !drop[name] {
			env = append(env, kv)
		}
	}
	return append(env, set...)
}

// EnvGoMaxProcs is the Go runtime's own variable, which cellrun sets for
// the ranks of a node that runs several and talks over network cells
// only (see goMaxProcs).
const EnvGoMaxProcs = "GOMAXPROCS"

// goMaxProcs is the GOMAXPROCS each rank of the node gets, or 0 to leave
// the runtime's default. Ranks whose every message goes through network
// cell connections (transport tcp or ibv) share the node's processors, as
// torchrun's ranks share them through OMP_NUM_THREADS: a rank's runtime
// that thinks it owns every processor wakes a thread for an idle one at
// each hand-off between goroutines, and the ranks' threads then take
// turns on the cores (two tcp ranks on two cores ran their AllReduces
// 1.6–2× faster with one processor each, bench/RESULTS.md). Ranks that
// also talk through host memory keep the default: there a one-node job's
// 8-byte AllReduce lost 1.5–3× with one processor, and a two-node job's
// hierarchical 64 MiB AllReduce 1.25×. A user's GOMAXPROCS, or one rank
// per node, is left alone.
func goMaxProcs(base []string, cfg *Config) int {
	if cfg.ProcsPerNode < 2 {
		return 0
	}
	transport := cfg.Transport
	for _, kv := range base {
		name, value, _ := strings.Cut(kv, "=")
		switch {
		case name == EnvGoMaxProcs:
			return 0
		case name == EnvTransport && transport == "":
			transport = value
		}
	}
	if transport != "tcp" && transport != "ibv" {
		return 0
	}
	cpus := cfg.CPUs
	if cpus <= 0 {
		cpus = runtime.GOMAXPROCS(0)
	}
	return max(1, cpus/cfg.ProcsPerNode)
}

// rankEnv adds one rank's own variables to the node's jobEnv.
func rankEnv(job []string, rank, localRank, metricsPort int) []string {
	env := make([]string, 0, len(job)+3)
	env = append(env, job...)
	env = append(env,
		EnvRank+"="+strconv.Itoa(rank),
		EnvLocalRank+"="+strconv.Itoa(localRank),
	)
	if metricsPort != 0 {
		env = append(env, EnvMetricsAddr+"=:"+strconv.Itoa(metricsPort+localRank))
	}
	return env
}
