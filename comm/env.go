package comm

import (
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/rdmacell/rdmacell/bootstrap"
	"github.com/rdmacell/rdmacell/cell"
	"github.com/rdmacell/rdmacell/verbs/ibv"
)

// The environment a launcher such as cellrun gives each rank. RANK,
// WORLD_SIZE, JOB and ETCD_ENDPOINTS are required; the others are
// optional and an empty value counts as unset.
const (
	EnvRank              = "RDMACELL_RANK"
	EnvWorldSize         = "RDMACELL_WORLD_SIZE"
	EnvLocalRank         = "RDMACELL_LOCAL_RANK"
	EnvLocalWorldSize    = "RDMACELL_LOCAL_WORLD_SIZE"
	EnvJob               = "RDMACELL_JOB"
	EnvEtcdEndpoints     = "RDMACELL_ETCD_ENDPOINTS"
	EnvEtcdCA            = "RDMACELL_ETCD_CA"
	EnvEtcdCert          = "RDMACELL_ETCD_CERT"
	EnvEtcdKey           = "RDMACELL_ETCD_KEY"
	EnvEtcdUser          = "RDMACELL_ETCD_USER"
	EnvEtcdPassword      = "RDMACELL_ETCD_PASSWORD"
	EnvRendezvousTimeout = "RDMACELL_RENDEZVOUS_TIMEOUT"
	EnvTransport         = "RDMACELL_TRANSPORT"
	EnvPaths             = "RDMACELL_PATHS"
	EnvCellSize          = "RDMACELL_CELL_SIZE"
	EnvPolicy            = "RDMACELL_POLICY"
	EnvDebug             = "RDMACELL_DEBUG"
	EnvTCPAddr           = "RDMACELL_TCP_ADDR"
	EnvHost              = "RDMACELL_HOST"
	EnvSecret            = "RDMACELL_SECRET"
	EnvTimeout           = "RDMACELL_TIMEOUT"
	EnvStallReport       = "RDMACELL_STALL_REPORT"
	EnvTraceDir          = "RDMACELL_TRACE_DIR"
	EnvFlightOps         = "RDMACELL_FLIGHT_OPS"
	EnvMetricsAddr       = "RDMACELL_METRICS_ADDR"
)

// OptionsFromEnv builds Options from the launcher's environment. A
// missing required variable, or any variable with a value that cannot be
// used, is an *EnvError naming the variable and the value; several are
// joined with errors.Join.
//
// Without RDMACELL_RANK, a rank started by srun, mpirun or another PMI
// launcher is placed by that launcher's variables instead (see
// launchers.go): the ranks then meet at a store rank 0 serves, or at the
// etcd RDMACELL_ETCD_ENDPOINTS names, and the job secret is RDMACELL_SECRET
// or derived from the user's key file (RDMACELL_SECRET_FILE).
func OptionsFromEnv() (Options, error) {
	return optionsFrom(os.LookupEnv)
}

// envReader reads variables and collects what is wrong with them.
type envReader struct {
	lookup func(string) (string, bool)
	errs   []error
}

func (r *envReader) fail(name, value, want string, missing bool) {
	r.errs = append(r.errs, &EnvError{Var: name, Value: value, Want: want, Missing: missing})
}

// get returns the value of an optional variable, "" when unset.
func (r *envReader) get(name string) string {
	v, _ := r.lookup(name)
	return v
}

// required returns the value of a required variable.
func (r *envReader) required(name, want string) (string, bool) {
	v, ok := r.lookup(name)
	if !ok {
		r.fail(name, "", want, true)
		return "", false
	}
	return v, true
}

// intIn parses v as an integer in [lo, hi].
func (r *envReader) intIn(name, v string, lo, hi int, want string) (int, bool) {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < lo || n > hi {
		r.fail(name, v, want, false)
		return 0, false
	}
	return n, true
}

func optionsFrom(lookup func(string) (string, bool)) (Options, error) {
	r := &envReader{lookup: lookup}
	var o Options
	// A launcher's contract wins: cellrun run under srun passes its ranks
	// the srun task's SLURM_* too.
	placed := false
	if _, launched := lookup(EnvRank); !launched {
		p, ok, err := bootstrap.PlacementFromEnv(lookup)
		if err != nil {
			return Options{}, err
		}
		if ok {
			r.placement(&o, p)
			placed = true
		}
	}
	if !placed {
		r.contract(&o)
	}
	r.knobs(&o)
	if placed && o.Secret == nil && len(r.errs) == 0 {
		r.secretFile(&o)
	}
	if len(r.errs) > 0 {
		return Options{}, errors.Join(r.errs...)
	}
	return o, nil
}

// maxInt bounds the counts of the environment.
const maxInt = int(^uint(0) >> 1)

// contract reads the variables of the launcher contract: rank, world,
// local placement, job and etcd.
func (r *envReader) contract(o *Options) {

	world, okWorld := 0, false
	if v, ok := r.required(EnvWorldSize, "the number of ranks, an integer >= 1"); ok {
		world, okWorld = r.intIn(EnvWorldSize, v, 1, maxInt, "the number of ranks, an integer >= 1")
	}
	o.WorldSize = world
	if v, ok := r.required(EnvRank, "this process's rank, an integer >= 0"); ok {
		hi, want := maxInt, "this process's rank, an integer >= 0"
		if okWorld {
			hi, want = world-1, fmt.Sprintf("this process's rank, 0..%d (%s is %d)", world-1, EnvWorldSize, world)
		}
		o.Rank, _ = r.intIn(EnvRank, v, 0, hi, want)
	}

	lr, lw := r.get(EnvLocalRank), r.get(EnvLocalWorldSize)
	switch {
	case lr == "" && lw == "":
	case lw == "":
		r.fail(EnvLocalWorldSize, "", "the number of ranks on this host, set with "+EnvLocalRank, true)
	case lr == "":
		r.fail(EnvLocalRank, "", "this process's rank on its host, set with "+EnvLocalWorldSize, true)
	default:
		hi, want := maxInt, "the number of ranks on this host, an integer >= 1"
		if okWorld {
			hi, want = world, fmt.Sprintf("the number of ranks on this host, 1..%d (%s)", world, EnvWorldSize)
		}
		if n, ok := r.intIn(EnvLocalWorldSize, lw, 1, hi, want); ok {
			o.LocalWorldSize = n
			o.LocalRank, _ = r.intIn(EnvLocalRank, lr, 0, n-1,
				fmt.Sprintf("this process's rank on its host, 0..%d (%s is %d)", n-1, EnvLocalWorldSize, n))
		}
	}

	if v, ok := r.required(EnvJob, "the job id: letters, digits, '.', '_' or '-'"); ok {
		if !jobPattern.MatchString(v) {
			r.fail(EnvJob, v, "the job id: letters, digits, '.', '_' or '-'", false)
		}
		o.Job = v
	}
	if v, ok := r.required(EnvEtcdEndpoints, "etcd endpoints, host:port[,host:port...]"); ok {
		eps, err := bootstrap.ParseEndpoints(v)
		if err != nil {
			r.fail(EnvEtcdEndpoints, v, "etcd endpoints, host:port[,host:port...]", false)
		}
		o.Etcd.Endpoints = eps
	}
	r.etcdSecurity(o)
}

// knobs reads the optional variables, the same whoever started the rank.
func (r *envReader) knobs(o *Options) {
	if v := r.get(EnvRendezvousTimeout); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			r.fail(EnvRendezvousTimeout, v, "a positive Go duration such as 2m or 30s", false)
		}
		o.RendezvousTimeout = d
	}
	if v := r.get(EnvTimeout); v != "" {
		o.Timeout = r.bound(EnvTimeout, v)
	}
	if v := r.get(EnvStallReport); v != "" {
		o.StallReport = r.bound(EnvStallReport, v)
	}
	o.TraceDir = r.get(EnvTraceDir)
	if v := r.get(EnvFlightOps); v != "" {
		o.FlightOps, _ = r.intIn(EnvFlightOps, v, 1, 1<<24, "operations the flight recorder keeps, 1..16777216")
	}
	if v := r.get(EnvMetricsAddr); v != "" {
		if !validListenAddr(v) {
			r.fail(EnvMetricsAddr, v, "where to serve metrics, host:port or :port", false)
		}
		o.MetricsAddr = v
	}
	if v := r.get(EnvTransport); v != "" {
		t, err := ParseTransport(v)
		if err != nil {
			r.fail(EnvTransport, v, transportWant, false)
		}
		o.Transport = t
	}
	if v := r.get(EnvPaths); v != "" {
		o.Paths, _ = r.intIn(EnvPaths, v, 1, cell.MaxPaths, fmt.Sprintf("queue pairs per peer, 1..%d", cell.MaxPaths))
	}
	if v := r.get(EnvCellSize); v != "" {
		n, err := parseSize(v)
		if err != nil || n < 1 || n > maxCellSize {
			r.fail(EnvCellSize, v, "the flowcell size in bytes, 1..2^31, such as 65536 or 64KiB", false)
		}
		o.CellSize = n
	}
	if v := r.get(EnvPolicy); v != "" {
		p, err := ParsePolicy(v)
		if err != nil {
			r.fail(EnvPolicy, v, "adaptive, ecmp or spray", false)
		}
		o.Policy = p
	}
	if v := r.get(EnvDebug); v != "" {
		if _, err := parseDebug(v); err != nil {
			r.fail(EnvDebug, v, debugWant, false)
		}
		o.Debug = v
	}
	if v := r.get(EnvTCPAddr); v != "" {
		if _, err := tcpListenAddr(v); err != nil {
			r.fail(EnvTCPAddr, v, "the tcp provider's listen address, host:port or host", false)
		}
		o.TCPAddr = v
	}
	ib, err := ibv.OptionsFromLookup(ibv.Options{}, r.lookup)
	if err != nil {
		r.errs = append(r.errs, err)
	}
	o.IBV = ib
	if v, ok := r.lookup(EnvHost); ok {
		if !validHost(v) {
			r.fail(EnvHost, v, hostWant, false)
		}
		o.Host = v
	}
	if v := r.get(EnvSecret); v != "" {
		b, err := hex.DecodeString(v)
		if err != nil || len(b) != bootstrap.SecretSize {
			// The value is the secret: never repeat it in an error.
			r.fail(EnvSecret, fmt.Sprintf("(%d characters)", len(v)),
				fmt.Sprintf("the job secret, %d hexadecimal digits", 2*bootstrap.SecretSize), false)
		}
		o.Secret = b
	}
}

// bound reads a watchdog bound: a Go duration, 0 for none.
func (r *envReader) bound(name, v string) time.Duration {
	d, err := time.ParseDuration(v)
	switch {
	case err != nil || d < 0:
		r.fail(name, v, "a Go duration such as 10m or 90s, 0 for none", false)
		return 0
	case d == 0:
		return NoTimeout
	}
	return d
}

// etcdSecurity reads the TLS files and credentials of etcd.
func (r *envReader) etcdSecurity(o *Options) {
	ca, cert, key := r.get(EnvEtcdCA), r.get(EnvEtcdCert), r.get(EnvEtcdKey)
	for _, f := range []struct{ name, v string }{{EnvEtcdCA, ca}, {EnvEtcdCert, cert}, {EnvEtcdKey, key}} {
		if f.v == "" {
			continue
		}
		if st, err := os.Stat(f.v); err != nil || !st.Mode().IsRegular() {
			r.fail(f.name, f.v, "a readable PEM file", false)
		}
	}
	switch {
	case cert != "" && key == "":
		r.fail(EnvEtcdKey, "", "the key of "+EnvEtcdCert, true)
	case key != "" && cert == "":
		r.fail(EnvEtcdCert, "", "the certificate of "+EnvEtcdKey, true)
	}
	if ca != "" || cert != "" {
		o.Etcd.TLS = &bootstrap.TLSFiles{CAFile: ca, CertFile: cert, KeyFile: key}
	}
	user, pass := r.get(EnvEtcdUser), r.get(EnvEtcdPassword)
	if pass != "" && user == "" {
		r.fail(EnvEtcdUser, "", "the etcd user of "+EnvEtcdPassword, true)
	}
	o.Etcd.Username, o.Etcd.Password = user, pass
}

// parseSize parses a byte count with an optional binary suffix (KiB, MiB,
// GiB, or K, M, G).
func parseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("%w: size %q", ErrInvalidArgument, s)
	}
	return n * mult, nil
}
