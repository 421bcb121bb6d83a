package comm

import (
	"fmt"
	"log/slog"
	"net"
	"regexp"
	"strconv"
	"time"

	"github.com/rdmacell/rdmacell/bootstrap"
	"github.com/rdmacell/rdmacell/cell"
	"github.com/rdmacell/rdmacell/verbs"
	"github.com/rdmacell/rdmacell/verbs/ibv"
)

// Options configure Init. Rank, WorldSize, Job, and Store or
// Etcd.Endpoints are required; every other field has a default. Init with
// zero Options reads them from the environment (see OptionsFromEnv).
type Options struct {
	// Rank is this process's rank in [0, WorldSize).
	Rank, WorldSize int
	// LocalRank and LocalWorldSize place the rank among those of its host.
	// With LocalWorldSize 0 they are derived from the hosts the ranks
	// register with.
	LocalRank, LocalWorldSize int
	// Job is the job id: letters, digits, '.', '_' and '-'.
	Job string
	// Store is where the ranks meet, for instance bootstrap.NewLocalStore()
	// shared by ranks run as goroutines of one program. Nil means the etcd
	// cluster Etcd names.
	Store bootstrap.Store
	// Etcd reaches the rendezvous when Store is nil and StoreAddr empty:
	// endpoints, TLS files, credentials.
	Etcd bootstrap.ClientConfig
	// StoreAddr, when Store is nil, is the host:port of a store served by
	// a rank of the job (see bootstrap.ServeStore), reached with Secret,
	// which is then required. ServeStore makes this rank the one that
	// serves it, listening there (e.g. ":29400"). OptionsFromEnv sets
	// both for ranks started by srun or mpirun.
	StoreAddr, ServeStore string
	// Secret is the job secret (bootstrap.SecretSize bytes) that
	// authenticates the ranks' tcp connections, handed out by the
	// launcher. Nil means the first rank makes one and keeps it in the
	// store, readable by whoever can read the store.
	Secret []byte
	// RendezvousTimeout bounds Init: joining, waiting for every rank and
	// connecting to them (default DefaultRendezvousTimeout).
	RendezvousTimeout time.Duration
	// LeaseTTL is the liveness lease: a rank that dies is noticed by the
	// others about this long after (default bootstrap.DefaultLeaseTTL).
	LeaseTTL time.Duration
	// Host names this machine to the other ranks (default os.Hostname()).
	// Ranks with the same Host talk over shared memory; ranks of one
	// machine given different Hosts behave as ranks of different hosts.
	// The tcp provider advertises the machine's own name, not Host, unless
	// TCPAddr names an address.
	Host string
	// Transport is TransportAuto (default: shm to ranks of the same host,
	// tcp to the others), or the one transport used for every peer.
	Transport Transport
	// Paths is the number of queue pairs per connection (default
	// DefaultPaths, at most cell.MaxPaths).
	Paths int
	// CellSize fixes the flowcell size in bytes; 0 sizes cells from the
	// measured bandwidth-delay product.
	CellSize int64
	// Policy places cells on paths (default PolicyAdaptive).
	Policy Policy
	// IBV configures the ibv transport: device, port, GID index.
	IBV ibv.Options
	// TCPAddr is where the tcp provider listens, "host:port" or "host"
	// (default "127.0.0.1:0" when every rank is on this host, else ":0",
	// advertised under Host).
	TCPAddr string
	// Debug turns on debug logs: "1" or "all" for every component, or a
	// comma-separated list such as "comm,cell,bootstrap". Empty means none
	// (OptionsFromEnv reads RDMACELL_DEBUG).
	Debug string
	// CloseTimeout bounds how long Close waits for the other ranks to
	// close too, so that no message still moving is cut off (default
	// DefaultCloseTimeout).
	CloseTimeout time.Duration
	// Timeout is the watchdog's bound on every wait: a message that has
	// not moved, or a collective that has not finished, this long after it
	// was posted fails with a *TimeoutError saying what it waited for, and
	// a collective's failure fails its group as a dead peer would (default
	// DefaultTimeout; NoTimeout turns the watchdog off). A context that
	// ends sooner still ends the wait sooner.
	Timeout time.Duration
	// StallReport is how long a wait lasts before this rank asks every
	// rank of the job to report what it is doing (see stall.go), then
	// again at twice the interval while the stall lasts (default
	// DefaultStallReport; NoTimeout turns reports off).
	StallReport time.Duration
	// TraceDir, when set, is where this rank writes its flight recorder
	// (package flight) when an operation fails, when the watchdog fires,
	// when any rank asks for it (RequestTrace), and when it closes.
	TraceDir string
	// FlightOps is how many operations the flight recorder keeps (default
	// flight.DefaultSize).
	FlightOps int
	// MetricsAddr, when set, is where this rank serves Prometheus metrics
	// on /metrics ("host:port", ":port").
	MetricsAddr string
	// Logger receives the communicator's messages (default slog.Default(),
	// or a text handler on standard error when debug logs are on).
	Logger *slog.Logger

	// wrapDevice, when set, wraps every device Init opens; tests use it to
	// inject faults (verbs/fault).
	wrapDevice func(verbs.Device) verbs.Device
	// tcpSecret replaces the job secret for the tcp provider; tests use it
	// to play a process of another job.
	tcpSecret []byte
}

// Defaults of Options.
const (
	DefaultRendezvousTimeout = 2 * time.Minute
	DefaultCloseTimeout      = 10 * time.Second
	DefaultPaths             = 4
	// DefaultTimeout is torch.distributed's default bound on a collective.
	DefaultTimeout     = 10 * time.Minute
	DefaultStallReport = time.Minute
	// NoTimeout, as Options.Timeout or Options.StallReport, turns the
	// watchdog or the stall reports off.
	NoTimeout time.Duration = -1
)

// Policy names how cells are placed on a connection's paths.
type Policy string

// Policies.
const (
	// PolicyAdaptive places each cell on the path expected to finish it
	// first.
	PolicyAdaptive Policy = "adaptive"
	// PolicyECMP keeps each range on one path, as flow hashing would.
	PolicyECMP Policy = "ecmp"
	// PolicySpray sends cells round-robin over every path.
	PolicySpray Policy = "spray"
)

// String returns the policy's name.
func (p Policy) String() string { return string(p) }

// ParsePolicy returns the policy named s.
func ParsePolicy(s string) (Policy, error) {
	switch p := Policy(s); p {
	case PolicyAdaptive, PolicyECMP, PolicySpray:
		return p, nil
	}
	return "", fmt.Errorf("%w: policy %q, want adaptive, ecmp or spray", ErrInvalidArgument, s)
}

// maxHostLen bounds Options.Host: a DNS name is at most 253 bytes.
const maxHostLen = 253

var jobPattern = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

// maxCellSize bounds Options.CellSize, as the engine does.
const maxCellSize = 1 << 31

// resolve checks o and fills in the defaults.
func (o *Options) resolve() error {
	bad := func(field string, v any, want string) error {
		return &OptionError{Field: field, Value: fmt.Sprint(v), Want: want}
	}
	switch {
	case o.WorldSize < 1:
		return bad("WorldSize", o.WorldSize, "at least 1")
	case o.Rank < 0 || o.Rank >= o.WorldSize:
		return bad("Rank", o.Rank, fmt.Sprintf("0 <= rank < WorldSize %d", o.WorldSize))
	case o.LocalWorldSize < 0 || o.LocalWorldSize > o.WorldSize:
		return bad("LocalWorldSize", o.LocalWorldSize, fmt.Sprintf("0 (derive) or 1..WorldSize %d", o.WorldSize))
	case o.LocalWorldSize > 0 && (o.LocalRank < 0 || o.LocalRank >= o.LocalWorldSize):
		return bad("LocalRank", o.LocalRank, fmt.Sprintf("0 <= local rank < LocalWorldSize %d", o.LocalWorldSize))
	case !jobPattern.MatchString(o.Job):
		return bad("Job", strconv.Quote(o.Job), "letters, digits, '.', '_' or '-'")
	case o.Store == nil && o.StoreAddr == "" && len(o.Etcd.Endpoints) == 0:
		return bad("Etcd.Endpoints", o.Etcd.Endpoints, "at least one etcd endpoint (or a Store, or StoreAddr)")
	case o.Store == nil && o.StoreAddr != "" && o.Secret == nil:
		return bad("Secret", "nil", "the job secret, which StoreAddr "+strconv.Quote(o.StoreAddr)+" needs")
	case o.ServeStore != "" && o.StoreAddr == "":
		return bad("StoreAddr", `""`, "the address other ranks reach the store at, which ServeStore "+strconv.Quote(o.ServeStore)+" needs")
	case o.Secret != nil && len(o.Secret) != bootstrap.SecretSize:
		return bad("Secret", fmt.Sprintf("%d bytes", len(o.Secret)), fmt.Sprintf("%d bytes", bootstrap.SecretSize))
	case o.Host != "" && !validHost(o.Host):
		return bad("Host", strconv.Quote(o.Host), hostWant)
	case o.RendezvousTimeout < 0:
		return bad("RendezvousTimeout", o.RendezvousTimeout, "a positive duration (0 for the default)")
	case o.LeaseTTL < 0:
		return bad("LeaseTTL", o.LeaseTTL, "a positive duration (0 for the default)")
	case o.CloseTimeout < 0:
		return bad("CloseTimeout", o.CloseTimeout, "a positive duration (0 for the default)")
	case o.Timeout < 0 && o.Timeout != NoTimeout:
		return bad("Timeout", o.Timeout, "a positive duration (0 for the default, NoTimeout for none)")
	case o.StallReport < 0 && o.StallReport != NoTimeout:
		return bad("StallReport", o.StallReport, "a positive duration (0 for the default, NoTimeout for none)")
	case o.FlightOps < 0:
		return bad("FlightOps", o.FlightOps, "a number of operations (0 for the default)")
	case o.MetricsAddr != "" && !validListenAddr(o.MetricsAddr):
		return bad("MetricsAddr", strconv.Quote(o.MetricsAddr), "host:port or :port")
	case o.Paths < 0 || o.Paths > cell.MaxPaths:
		return bad("Paths", o.Paths, fmt.Sprintf("1..%d (0 for the default)", cell.MaxPaths))
	case o.CellSize < 0 || o.CellSize > maxCellSize:
		return bad("CellSize", o.CellSize, "1..2^31 bytes (0 for adaptive cells)")
	}
	if o.Transport == "" {
		o.Transport = TransportAuto
	}
	if _, err := ParseTransport(string(o.Transport)); err != nil {
		return bad("Transport", strconv.Quote(string(o.Transport)), transportWant)
	}
	if o.Policy == "" {
		o.Policy = PolicyAdaptive
	}
	if _, err := ParsePolicy(string(o.Policy)); err != nil {
		return bad("Policy", strconv.Quote(string(o.Policy)), "adaptive, ecmp or spray")
	}
	if o.TCPAddr != "" {
		if _, err := tcpListenAddr(o.TCPAddr); err != nil {
			return bad("TCPAddr", strconv.Quote(o.TCPAddr), "host:port or host")
		}
	}
	if _, err := parseDebug(o.Debug); err != nil {
		return bad("Debug", strconv.Quote(o.Debug), debugWant)
	}
	if o.RendezvousTimeout == 0 {
		o.RendezvousTimeout = DefaultRendezvousTimeout
	}
	if o.CloseTimeout == 0 {
		o.CloseTimeout = DefaultCloseTimeout
	}
	if o.Paths == 0 {
		o.Paths = DefaultPaths
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.StallReport == 0 {
		o.StallReport = DefaultStallReport
	}
	return nil
}

// validListenAddr reports whether s is host:port with a port number.
func validListenAddr(s string) bool {
	_, port, err := net.SplitHostPort(s)
	n, perr := strconv.Atoi(port)
	return err == nil && perr == nil && n >= 0 && n <= 65535
}

// tcpListenAddr turns Options.TCPAddr into a listen address: a bare host
// gets a free port.
func tcpListenAddr(s string) (string, error) {
	if host, port, err := net.SplitHostPort(s); err == nil {
		n, err := strconv.Atoi(port)
		if err != nil || n < 0 || n > 65535 || host != "" && net.ParseIP(host) == nil && !hostPattern.MatchString(host) {
			return "", fmt.Errorf("%w: tcp address %q", ErrInvalidArgument, s)
		}
		return s, nil
	}
	if s == "" || net.ParseIP(s) == nil && !hostPattern.MatchString(s) {
		return "", fmt.Errorf("%w: tcp address %q", ErrInvalidArgument, s)
	}
	return net.JoinHostPort(s, "0"), nil
}

var hostPattern = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$`)

// hostWant says what a host name must be, for errors.
const hostWant = "a host name of 1..253 letters, digits, '.' and '-'"

// validHost reports whether s can name a host to the other ranks.
func validHost(s string) bool { return len(s) <= maxHostLen && hostPattern.MatchString(s) }
