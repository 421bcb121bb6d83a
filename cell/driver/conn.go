package driver

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/rdmacell/rdmacell/cell"
	"github.com/rdmacell/rdmacell/cell/bind"
	"github.com/rdmacell/rdmacell/verbs"
)

// Conn is one cell connection to one peer: an engine, its data QPs
// (paths) and control QP, the rings the peer writes, and the goroutine
// that makes progress. Its methods are safe for concurrent use.
type Conn struct {
	cfg      resolved
	log      *slog.Logger
	trace    bool // log every batch at LevelTrace
	provider string
	lay      layout

	cq        verbs.CQ
	spin      bool // polling the CQ in a loop does work (see run)
	mem       *verbs.Memory
	ringMR    verbs.MR
	stageMR   verbs.MR
	ring      []byte // the rings the peer writes
	stage     []byte // records and control messages before they leave
	stageAddr uint64
	peerRing  ringInfo
	paths     []*path
	qpns      []uint32 // the data QPs' numbers, by path
	// corkers are the paths' QPs that can hold a round's writes and write
	// them together (verbs.Corker), corked while the progress goroutine
	// acts on what it found (see cork); inRound is set meanwhile.
	corkers []verbs.Corker
	inRound atomic.Bool

	// life ends when the connection ends; it stops the reset workers.
	life    context.Context
	endLife context.CancelFunc
	exited  chan struct{} // closed when the progress goroutine returns
	workers sync.WaitGroup
	byeDone chan struct{} // closed when the goodbye has left, or cannot
	closed  chan struct{} // closed when Close has released everything

	mu  sync.Mutex
	eng *cell.Engine
	// fed says the engine took inputs since its outputs were last acted
	// on; Ready must be called exactly once per batch.
	fed bool
	ops opTable
	// sendQ and recvQ hold the ranges posted while their direction's
	// window was full, in order (see queue.go).
	sendQ, recvQ []queued
	// err is the connection's terminal failure; once set, nothing is
	// posted any more.
	err      error
	closing  bool
	deadline int64 // the engine's next Tick, 0 for none
	// nextKeepalive is when paths are next checked for silence.
	nextKeepalive int64
	ctl           control
	// resetDone holds the reset workers' results for the progress
	// goroutine, which applies them after a last poll of the old
	// incarnation.
	resetDone []resetResult
	// quiets holds the resets whose old incarnation is gone at both ends,
	// for the progress goroutine to tell the engine (see reset.go).
	quiets []resetResult
	// failed collects the paths whose posts failed while acting on a
	// batch; they are reported after it.
	failed  uint64
	postErr []error
	// Waking the progress goroutine: while waiting says it waits in the
	// CQ, a kick ends the waiter's wait; kicked records a wake-up that
	// came while it was not waiting.
	waiter  *waiter
	waiting bool
	kicked  bool
	parked  bool
	// posts counts the ranges posted, so that the progress goroutine,
	// which decided to park while none was in flight, sees one posted
	// before it parked (see wait); completed says Ops completed since
	// OnComplete was last called.
	posts     uint64
	completed bool
	// answers scores whether a caller's post follows a round's report
	// soon (see awaitAnswer); unawaited says the last report did not
	// wait for one.
	answers   int8
	unawaited bool
	counters  counters
	// landed is set, without c.mu, when the provider reports a record
	// landed in the rings (see onLanded); landings counts them. inWait
	// says the progress goroutine waits in the CQ.
	landed atomic.Bool
	// tailsDue says an arrival was fed since the tail ring was last read
	// (a range's tail lands before its last cell's arrival); holdsDue that
	// a bell or a landing came, or a keepalive is due, since the hold ring
	// was.
	tailsDue, holdsDue bool
	inWait             atomic.Bool
	landings           atomic.Uint64

	wcs, waitWCs []verbs.WC
	// early holds completions the probe saw that were not its own.
	early []verbs.WC
	wr    verbs.SendWR // scratch for ring writes
	sge   [1]verbs.SGE
	// tailWR is the WRITE of a range's tail spliced into its last cell's
	// chain (spliceTailLocked).
	tailWR  verbs.SendWR
	tailSGE [1]verbs.SGE
}

// path is one data QP and the driver's state of it, guarded by Conn.mu
// except where noted.
type path struct {
	idx int
	qp  verbs.QP
	qpn uint32
	// qmu serialises Modify and Close, which must not race; it is never
	// held while taking Conn.mu.
	qmu sync.Mutex

	// Path is whether the path is being reset or closed for good, and
	// its section of the token ring.
	bind.Path
	gen    uint32 // incarnation agreed with the peer
	target uint32 // the incarnation a reset under way brings up
	inbox  chan ctlMsg
	early  *ctlMsg // the peer's next reset, come before ours finished
	// abandon ends the attempt under way (a no-op once its worker is
	// done).
	abandon  context.CancelCauseFunc
	failures int            // attempts in a row that failed after both QPs left ERR
	probing  bool           // reset with the peer; its probe is on the way
	closed   bool           // closed or being closed: post nothing
	refill   []verbs.RecvWR // the receives of the reset under way
	writes   uint64         // ring writes posted, to signal every signalEvery
	// records holds when each grant or final written on the path and not
	// yet completed was posted, oldest first (see watchRecordsLocked).
	records fifo[int64]
	// recordSlack multiplies T_soft for the records watched on the path:
	// doubled at each give-up of the watch, never undone (see
	// watchRecordsLocked).
	recordSlack int64
	lastSeen    int64 // when the path last completed anything
}

func (p *path) notify(m ctlMsg) { offer(p.inbox, m) }

// Peer returns the peer's name.
func (c *Conn) Peer() string { return c.cfg.Peer }

// Err returns the connection's terminal failure, or nil while it works:
// the engine's *cell.NoPathError, or an error wrapping ErrClosed or
// ErrAborted.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}
