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
)

// Options configure Init. Rank, WorldSize, Job and Etcd.Endpoints are
// required; every other field has a default. Init with zero Options reads
// them from the environment (see OptionsFromEnv).
type Options struct {
	// Rank is this process's rank in [0, WorldSize).
	Rank, WorldSize int
	// LocalRank and LocalWorldSize place the rank among those of its host.
	// With LocalWorldSize 0 they are derived from the hosts the ranks
	// register with.
	LocalRank, LocalWorldSize int
	// Job is the job id: letters, digits, '.', '_' and '-'.
	Job string
	// Etcd reaches the rendezvous: endpoints, TLS files, credentials.
	Etcd bootstrap.ClientConfig
	// RendezvousTimeout bounds Init: joining, waiting for every rank and
	// connecting to them (default DefaultRendezvousTimeout).
	RendezvousTimeout time.Duration
	// LeaseTTL is the liveness lease: a rank that dies is noticed by the
	// others about this long after (default bootstrap.DefaultLeaseTTL).
	LeaseTTL time.Duration
	// Host names this machine to the other ranks (default os.Hostname()).
	// Ranks with the same Host talk over shared memory.
	Host string
	// Transport is "auto" (default: shm to ranks of the same host, tcp to
	// the others), "shm" or "tcp" (for every peer).
	Transport string
	// Paths is the number of queue pairs per connection (default
	// DefaultPaths, at most cell.MaxPaths).
	Paths int
	// CellSize fixes the flowcell size in bytes; 0 sizes cells from the
	// measured bandwidth-delay product.
	CellSize int64
	// Policy places cells on paths: "adaptive" (default), "ecmp", "spray".
	Policy string
	// TCPAddr is where the tcp provider listens, "host:port" or "host"
	// (default "127.0.0.1:0" when every rank is on this host, else ":0",
	// advertised under Host).
	TCPAddr string
	// Debug turns on debug logs: "1" or "all" for every component, or a
	// comma-separated list such as "comm,cell,bootstrap". Empty means the
	// value of RDMACELL_DEBUG.
	Debug string
	// CloseTimeout bounds how long Close waits for the other ranks to
	// close too, so that no message still moving is cut off (default
	// DefaultCloseTimeout).
	CloseTimeout time.Duration
	// Logger receives the communicator's messages (default slog.Default(),
	// or a text handler on standard error when debug logs are on).
	Logger *slog.Logger

	// tcpSecret replaces the job secret for the tcp provider; tests use it
	// to play a process of another job.
	tcpSecret []byte
}

// Defaults of Options.
const (
	DefaultRendezvousTimeout = 2 * time.Minute
	DefaultCloseTimeout      = 10 * time.Second
	DefaultPaths             = 4
)

// Transports.
const (
	TransportAuto = "auto"
	TransportShm  = "shm"
	TransportTCP  = "tcp"
)

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
	case len(o.Etcd.Endpoints) == 0:
		return bad("Etcd.Endpoints", o.Etcd.Endpoints, "at least one etcd endpoint")
	case o.RendezvousTimeout < 0:
		return bad("RendezvousTimeout", o.RendezvousTimeout, "a positive duration (0 for the default)")
	case o.LeaseTTL < 0:
		return bad("LeaseTTL", o.LeaseTTL, "a positive duration (0 for the default)")
	case o.CloseTimeout < 0:
		return bad("CloseTimeout", o.CloseTimeout, "a positive duration (0 for the default)")
	case o.Paths < 0 || o.Paths > cell.MaxPaths:
		return bad("Paths", o.Paths, fmt.Sprintf("1..%d (0 for the default)", cell.MaxPaths))
	case o.CellSize < 0 || o.CellSize > maxCellSize:
		return bad("CellSize", o.CellSize, "1..2^31 bytes (0 for adaptive cells)")
	}
	switch o.Transport {
	case "":
		o.Transport = TransportAuto
	case TransportAuto, TransportShm, TransportTCP:
	default:
		return bad("Transport", strconv.Quote(o.Transport), "auto, shm or tcp")
	}
	switch o.Policy {
	case "":
		o.Policy = "adaptive"
	case "adaptive", "ecmp", "spray":
	default:
		return bad("Policy", strconv.Quote(o.Policy), "adaptive, ecmp or spray")
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
	return nil
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
