package driver

import (
	"fmt"
	"hash/fnv"
	"log/slog"
	"time"

	"github.com/rdmacell/rdmacell/cell"
	"github.com/rdmacell/rdmacell/verbs"
)

// Config configures one connection. Paths, Engine.MTU, Engine.Window,
// Engine.MaxRanges, Engine.RecvDepth and Engine.FirstCellID describe the
// wire and must be the same at both ends (Dial checks); the rest is local.
type Config struct {
	// Peer names the remote end in errors and logs (a rank, a host).
	Peer string
	// Device is the provider's device; PD is the protection domain of the
	// memory the connection moves, in which its QPs are created. Both stay
	// the caller's.
	Device verbs.Device
	PD     verbs.PD
	// Paths is the number of data QPs (default 4, at most cell.MaxPaths).
	Paths int
	// Policy places cells on paths: "adaptive" (default), "ecmp" or
	// "spray".
	Policy string
	// CellSize fixes the flowcell size in bytes; 0 sizes cells from the
	// measured bandwidth-delay product.
	CellSize int64
	// Engine holds the engine's other parameters. Its Peer, Paths,
	// CellSize and Policy are ignored (the fields above set them). Zero
	// values take the driver's defaults: MTU 4096, Window 1024, MaxRanges
	// 64, RecvDepth 64, InitialRTT 1ms and MinSoftTimeout 50ms. The last
	// two are higher than the engine's own defaults, which suit an RNIC:
	// with software providers on a busy host, the goroutines that move
	// the data and answer with tokens wait tens of milliseconds for a
	// processor at times, and a healthy path must not be given up for
	// that (a path just reset starts with T_soft at this floor).
	Engine cell.Config
	// QP is the template of the connection's QPs: Timeout, RetryCount,
	// RNRRetry, MinRNRTimer and FlowLabel are used (defaults: 1s, 3, 3 and
	// the provider's); CQs, queue sizes and LocalAddr are the driver's.
	QP verbs.QPConfig
	// LocalAddrs optionally binds path i's connection to LocalAddrs[i] on
	// providers with addresses, to pin paths to interfaces.
	LocalAddrs []string
	// ResetTimeout bounds the reset of a path with the peer; a path not
	// back within it is declared dead (default 10s).
	ResetTimeout time.Duration
	// Clock returns the time in nanoseconds on a monotonic scale (default:
	// the monotonic time since Dial). Tests may substitute their own.
	Clock func() int64
	// Counters, if set, is added to by the connection as it posts cells
	// and resets paths. Several connections may share one, for a view of
	// a whole process that costs a few atomic additions per cell.
	Counters *Counters
	// OnComplete, if set, is called after Ops completed: by the progress
	// goroutine, without the connection's lock, once per round in which
	// any did (those completed inside Send and Recv included). It runs the
	// caller's reaction where the completion was found instead of waking
	// another goroutine to wait for Done, which costs a hand-off per
	// message. It must not block for long and must not call Close, which
	// waits for the progress goroutine; Ops that Abort or Close fail are
	// not reported through it, since their caller knows.
	OnComplete func()
	// Logger receives path resets and failures at debug and warn level
	// (default slog.Default()), and every batch of the engine's outputs
	// at LevelTrace, if it takes that level.
	Logger *slog.Logger
}

// LevelTrace is the level below debug at which a Conn logs every batch
// of its engine's outputs as it acts on them, in the format of
// bind.Trace: a history of what this end did, for a protocol problem
// that only a real provider shows. A logger at debug level does not take
// it; it costs a clean run one check per batch.
const LevelTrace = slog.LevelDebug - 4

// Driver defaults; see Config.
const (
	defaultPaths          = 4
	defaultMTU            = 4096
	defaultWindow         = 1024
	defaultMaxRanges      = 64
	defaultRecvDepth      = 64
	defaultInitialRTT     = time.Millisecond
	defaultMinSoftTimeout = 50 * time.Millisecond
	defaultResetTimeout   = 10 * time.Second
	defaultQPTimeout      = time.Second
	defaultRetryCount     = 3
	defaultRNRRetry       = 3
)

// resolved is a Config with defaults applied and the engine's
// configuration derived from it.
type resolved struct {
	Config
	eng cell.Config
}

func (cfg Config) resolve() (resolved, error) {
	bad := func(field string, v any, want string) error {
		return fmt.Errorf("%w: driver: peer %s: Config.%s = %v, want %s", cell.ErrInvalid, cfg.Peer, field, v, want)
	}
	switch {
	case cfg.Device == nil:
		return resolved{}, bad("Device", nil, "a verbs device")
	case cfg.PD == nil:
		return resolved{}, bad("PD", nil, "a protection domain of Device")
	}
	if cfg.Paths == 0 {
		cfg.Paths = defaultPaths
	}
	if cfg.Paths < 1 || cfg.Paths > cell.MaxPaths {
		return resolved{}, bad("Paths", cfg.Paths, fmt.Sprintf("1..%d", cell.MaxPaths))
	}
	if len(cfg.LocalAddrs) != 0 && len(cfg.LocalAddrs) != cfg.Paths {
		return resolved{}, bad("LocalAddrs", cfg.LocalAddrs, fmt.Sprintf("none or one per path (%d)", cfg.Paths))
	}
	if cfg.ResetTimeout < 0 {
		return resolved{}, bad("ResetTimeout", cfg.ResetTimeout, ">= 0")
	}
	if cfg.ResetTimeout == 0 {
		cfg.ResetTimeout = defaultResetTimeout
	}
	pol, err := cell.ParsePolicy(cfg.Policy)
	if err != nil {
		return resolved{}, fmt.Errorf("driver: peer %s: Config.Policy: %w", cfg.Peer, err)
	}
	if e, ok := pol.(*cell.ECMP); ok {
		// Each peer hashes to its own path, as flows to different
		// hosts do on an ECMP fabric.
		h := fnv.New64a()
		h.Write([]byte(cfg.Peer))
		e.Key = h.Sum64()
	}
	if cfg.Clock == nil {
		start := time.Now()
		cfg.Clock = func() int64 { return int64(time.Since(start)) }
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.QP.Timeout == 0 {
		cfg.QP.Timeout = defaultQPTimeout
	}
	if cfg.QP.RetryCount == 0 {
		cfg.QP.RetryCount = defaultRetryCount
	}
	if cfg.QP.RNRRetry == 0 {
		cfg.QP.RNRRetry = defaultRNRRetry
	}

	e := cfg.Engine
	e.Peer, e.Paths, e.CellSize, e.Policy = cfg.Peer, cfg.Paths, cfg.CellSize, pol
	setDefault(&e.MTU, defaultMTU)
	setDefault(&e.Window, defaultWindow)
	setDefault(&e.MaxRanges, defaultMaxRanges)
	setDefault(&e.RecvDepth, defaultRecvDepth)
	setDefault(&e.InitialRTT, defaultInitialRTT)
	setDefault(&e.MinSoftTimeout, defaultMinSoftTimeout)
	return resolved{Config: cfg, eng: e}, nil
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// wire returns the parameters both ends must agree on.
func (r *resolved) wire(provider string) wireParams {
	return wireParams{
		Provider:    provider,
		Paths:       r.Paths,
		MTU:         r.eng.MTU,
		Window:      r.eng.Window,
		MaxRanges:   r.eng.MaxRanges,
		RecvDepth:   r.eng.RecvDepth,
		FirstCellID: r.eng.FirstCellID,
	}
}

// Queue sizes of the QPs. Cells take two send requests each and at most
// RecvDepth are outstanding per path; token writes are signaled every
// signalEvery, grants and finals each, and at most a window of tokens
// plus the grants and finals of both directions, twice over when written
// again after a failure, are outstanding.
const signalEvery = 16

func (r *resolved) maxSendWR() int {
	return 3*r.eng.RecvDepth + 4*r.eng.MaxRanges + 2*signalEvery
}

func (r *resolved) maxRecvWR() int { return 2*r.eng.RecvDepth + 8 }
