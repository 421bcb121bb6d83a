package cell

import (
	"fmt"
	"time"

	"github.com/rdmacell/rdmacell/verbs"
)

// Engine is the RDMACell protocol of one connection, both directions: the
// sender half cuts send ranges into cells, places and tracks them, and
// recovers them; the receiver half grants receive ranges, keeps receives
// posted, answers cells with tokens and hands ranges back on their final.
//
// It is a pure state machine: no goroutines, no clock, no I/O. Each input
// method takes the current time in nanoseconds (any monotonic origin);
// outputs accumulate until Ready. An Engine is not safe for concurrent
// use.
type Engine struct {
	cfg    Config
	policy Policy
	now    int64
	// err is the terminal failure, once every path is closed for good.
	err error

	paths []path
	infos []PathInfo // policy snapshot, reused
	gmask uint32     // MaxRanges − 1

	snd sender
	rcv receiver

	rd      Ready
	drained bool
	// batch numbers the Ready batches: copies posted in the batch not yet
	// handed out can be taken back when their path fails.
	batch uint64
	stats Stats
}

// Stats counts what the engine did.
type Stats struct {
	// CellsPosted counts copies handed out for posting, re-posts included;
	// CellsReposted the re-posts alone.
	CellsPosted, CellsReposted uint64
	// TokensAccepted counts tokens that resolved a copy; TokensStale those
	// that matched nothing outstanding (already resolved, or garbage).
	TokensAccepted, TokensStale uint64
	// TokensSent counts tokens the receiver half emitted, Duplicates those
	// for a cell it had seen before, NACKsSent its refusals.
	TokensSent, Duplicates, NACKsSent uint64
	// StaleArrivals counts cells that arrived on an incarnation of their
	// path's QP that had been reset by the time their completion was
	// read: they get no token (see Engine.Completion).
	StaleArrivals uint64
	// GiveUps counts paths given up; Readmissions paths reset and usable
	// again. Demotions counts paths taken off new cells for a soft
	// timeout, Promotions those up again after draining.
	GiveUps, Readmissions, Demotions, Promotions uint64
	// Reprobes counts paths whose measurements went stale while others
	// carried the cells, and that were probed again (see forgetStale).
	Reprobes uint64
	// Holds counts tailed ranges held before a cell of theirs went again;
	// HoldsDone those the receiver had whole already, so that nothing
	// was written again.
	Holds, HoldsDone uint64
	// RangesSent, RangesReceived and RangesFailed count the Events.
	RangesSent, RangesReceived, RangesFailed uint64
}

// New returns an engine for one connection. Its first Ready holds a full
// receive chain for every path: the driver posts them while the QPs are in
// INIT, before connecting them, and drains that Ready before any input.
func New(cfg Config) (*Engine, error) {
	e := &Engine{}
	if err := e.Reset(cfg); err != nil {
		return nil, err
	}
	return e, nil
}

// Reset makes e the engine of a new connection, in the state New(cfg)
// returns, reusing the storage it already has where it is large enough.
// A simulator that opens a connection per flow would otherwise build and
// collect two engines for each of millions of flows. Everything e handed
// out before (its Ready, the work requests of its chains and receives)
// is reused: the driver must be done with the old connection, its QPs
// included, first. If cfg is invalid, e is left as it was.
func (e *Engine) Reset(cfg Config) error {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return err
	}
	paths := e.paths
	if cap(paths) < cfg.Paths {
		paths = make([]path, cfg.Paths)
	}
	paths = paths[:cfg.Paths]
	credits := cfg.Paths * cfg.RecvDepth
	*e = Engine{
		cfg:    cfg,
		policy: cfg.Policy,
		paths:  paths,
		infos:  reuse(e.infos, cfg.Paths),
		gmask:  uint32(cfg.MaxRanges - 1),
		snd:    e.snd,
		rcv:    e.rcv,
		rd: Ready{
			Recvs:    reuseCap(e.rd.Recvs, cfg.Paths),
			Resets:   reuseCap(e.rd.Resets, cfg.Paths),
			Posts:    reuseCap(e.rd.Posts, credits),
			Tokens:   reuseCap(e.rd.Tokens, credits),
			Grants:   reuseCap(e.rd.Grants, cfg.MaxRanges),
			Finals:   reuseCap(e.rd.Finals, cfg.MaxRanges),
			Holds:    reuseCap(e.rd.Holds, cfg.MaxRanges),
			HoldAcks: reuseCap(e.rd.HoldAcks, cfg.MaxRanges),
			Events:   reuseCap(e.rd.Events, 2*cfg.MaxRanges),
		},
	}
	for i := range e.paths {
		e.paths[i].init(i, cfg.RecvDepth, int64(cfg.InitialRTT), int64(cfg.MinSoftTimeout), 0)
	}
	e.snd.init(cfg)
	e.rcv.init(cfg)
	for i := range e.paths {
		p := &e.paths[i]
		e.rd.Recvs = append(e.rd.Recvs, RecvPost{Path: i, WR: p.refillChain(), Count: len(p.refill)})
	}
	return nil
}

// reuse returns n zero elements, in s's storage if it has room.
func reuse[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	s = s[:n]
	clear(s)
	return s
}

// resize returns n elements in s's storage if it has room, as they are:
// for storage written whole before any read.
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// reuseCap returns an empty slice with room for n, s's storage if it has
// it. What the old elements point to stays reachable until overwritten,
// as it does between two batches of one engine.
func reuseCap[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, 0, n)
	}
	return s[:0]
}

// Ready returns the outputs produced since the previous call, and the
// deadline for the next Tick. See Ready for the order to act on them.
func (e *Engine) Ready() *Ready {
	if !e.drained {
		var dl int64
		for i := range e.paths {
			if d := e.paths[i].deadline(e.cfg.MaxSoftBackoff); d != 0 && (dl == 0 || d < dl) {
				dl = d
			}
		}
		e.rd.Deadline = dl
		e.drained = true
		e.batch++
	}
	return &e.rd
}

// begin opens an input: a drained batch is recycled, and the clock moves
// (never backwards).
func (e *Engine) begin(now int64) {
	if e.drained {
		e.rd.clear()
		for i := range e.paths {
			e.paths[i].recvQueued = 0
		}
		e.drained = false
	}
	if now > e.now {
		e.now = now
	}
}

// Err returns the connection's terminal failure (a *NoPathError), or nil.
func (e *Engine) Err() error { return e.err }

// Stats returns the engine's counters.
func (e *Engine) Stats() Stats { return e.stats }

// Path returns a snapshot of path i.
func (e *Engine) Path(i int) PathInfo {
	if i < 0 || i >= len(e.paths) {
		return PathInfo{}
	}
	return e.paths[i].info()
}

// Config returns the engine's configuration, defaults filled in.
func (e *Engine) Config() Config { return e.cfg }

// Policy returns the placement policy in use.
func (e *Engine) Policy() Policy { return e.policy }

func (e *Engine) checkPath(q int) error {
	if q < 0 || q >= len(e.paths) {
		return fmt.Errorf("%w: peer %s: path %d, want 0..%d", ErrInvalid, e.cfg.Peer, q, len(e.paths)-1)
	}
	return nil
}

// pathInput starts an input about path q: the path, or nil with the
// error for an index out of range, or nil and no error once the
// connection has failed (inputs are then ignored).
func (e *Engine) pathInput(now int64, q int) (*path, error) {
	if err := e.checkPath(q); err != nil {
		return nil, err
	}
	e.begin(now)
	if e.err != nil {
		return nil, nil
	}
	return &e.paths[q], nil
}

// askReset asks the driver to reset path p. Every reset starts a new
// incarnation of the path's QP, into which the Reset's refill goes.
func (e *Engine) askReset(p *path, cause error) {
	p.incarn++
	e.rd.Resets = append(e.rd.Resets, Reset{Path: p.idx, Refill: p.refillChain(), Cause: cause})
}

// Completion feeds a work completion polled from path q's send or receive
// CQ. A RECV_RDMA_WITH_IMM completion is a cell arriving; any failed
// completion, the driver's own control writes' included, gives the path
// up; other successful completions carry nothing the tokens do not.
// Completions of a path's old incarnation must all be fed before its
// PathReset; a cell arriving on one is not answered (see "Quarantine of
// late copies" in the package doc), so wc.ID must be the id of the
// receive the engine posted. The error is for a path index out of range.
func (e *Engine) Completion(now int64, q int, wc verbs.WC) error {
	p, err := e.pathInput(now, q)
	if p == nil {
		return err
	}
	if wc.Status == verbs.StatusSuccess {
		if wc.Opcode == verbs.OpRecvWriteImm && wc.Flags&verbs.WCWithImm != 0 {
			e.arrived(p, wc.ID, wc.Imm)
		}
		return nil
	}
	pe := &PathError{Peer: e.cfg.Peer, Path: q, Err: fmt.Errorf("%w: %w", ErrNACK, &verbs.WCError{WC: wc})}
	if wc.ID&wrKindMask == wrKindCell {
		pe.Cell, pe.HasCell = uint32(wc.ID), true
	}
	e.giveUp(p, pe)
	e.pump()
	return nil
}

// PathFailed reports that path q failed outside the engine's sight, for
// example because the peer asked for it to be reset. The engine gives it
// up (and asks for its reset, which joins the one under way).
func (e *Engine) PathFailed(now int64, q int, cause error) error {
	p, err := e.pathInput(now, q)
	if p == nil {
		return err
	}
	err = ErrPathFailed
	if cause != nil {
		err = fmt.Errorf("%w: %w", ErrPathFailed, cause)
	}
	e.giveUp(p, &PathError{Peer: e.cfg.Peer, Path: q, Err: err})
	e.pump()
	return nil
}

// PathQuiet reports that the QPs of path q, given up, have left their
// old incarnation at both ends (each has been through ERR): nothing
// posted on it before can land any more, though the path is not back
// yet. The engine lifts its quarantine at once: the cells it held resolve,
// ranges waiting on it finish, and the receiver releases ranges it held
// for it. A reset's last steps (reconnecting, and over a fabric whose
// route under the path died, perhaps waiting for a new route) then no
// longer hold up the transfer, which goes on over the other paths. As
// for PathReset, the driver feeds every completion and ring record of the
// old incarnation first. Calling it is optional; PathReset implies it.
func (e *Engine) PathQuiet(now int64, q int) error {
	p, err := e.pathInput(now, q)
	if p == nil || p.state != PathDown || p.quiet {
		return err
	}
	e.clearCopies(p)
	p.quiet = true
	e.afterQuarantine(p)
	return nil
}

// PathReset reports that path q has been reset at both ends and is in RTS
// again, with the Refill of its Reset posted: nothing posted on it before
// can land any more. The engine lifts its quarantine and re-admits it.
// The driver feeds every completion and ring record of the old
// incarnation first (a last poll of the CQs and rings), so that none of
// them is taken for news about the new one. Both ends should call it as
// soon as both are in RTS; an end that hears late still answers the cells
// that arrive meanwhile.
func (e *Engine) PathReset(now int64, q int) error {
	p, err := e.pathInput(now, q)
	// A path not down is up already, or closed for good (a close raced
	// the reset).
	if p == nil || p.state != PathDown {
		return err
	}
	e.clearCopies(p)
	p.admit(e.cfg.RecvDepth, int64(e.cfg.InitialRTT), int64(e.cfg.MinSoftTimeout), e.now)
	e.stats.Readmissions++
	e.afterQuarantine(p)
	return nil
}

// ResetAgain reports that the reset of path q, given up and not yet
// back, failed part way (its QP could not be connected, say) and starts
// over. The next Ready holds a new Reset for it, whose Refill goes into
// the QP's next incarnation: arrivals on the failed attempt are then told
// apart like those of any incarnation before it. A path that is not down
// is left alone.
func (e *Engine) ResetAgain(now int64, q int, cause error) error {
	p, err := e.pathInput(now, q)
	if p == nil || p.state != PathDown {
		return err
	}
	e.askReset(p, cause)
	return nil
}

// PathDead reports that path q was closed at both ends (or its peer is
// gone) and will not come back. Nothing posted on it can land any more.
func (e *Engine) PathDead(now int64, q int, cause error) error {
	p, err := e.pathInput(now, q)
	if p == nil || p.state == PathDead {
		return err
	}
	if cause == nil {
		cause = ErrPathFailed
	}
	pe := &PathError{Peer: e.cfg.Peer, Path: q, Err: fmt.Errorf("closed: %w", cause)}
	if p.live() {
		e.isolate(p, pe)
	}
	p.state, p.cause = PathDead, pe
	e.clearCopies(p)
	if e.allDead() {
		e.fail()
		return nil
	}
	e.afterQuarantine(p)
	return nil
}

// Tick lets time pass: an up path whose oldest outstanding cell has
// waited longer than T_soft is demoted, and a slow path that has shown
// no progress for as long again is given up.
func (e *Engine) Tick(now int64) {
	e.begin(now)
	if e.err != nil {
		return
	}
	for i := range e.paths {
		p := &e.paths[i]
		dl := p.deadline(e.cfg.MaxSoftBackoff)
		if dl == 0 || e.now < dl {
			continue
		}
		c := p.at(0)
		waited := time.Duration(e.now - max(c.sentAt, p.progress))
		factor := backoffFactor(c.backoff, e.cfg.MaxSoftBackoff)
		if p.state == PathSlow {
			e.giveUp(p, &PathError{Peer: e.cfg.Peer, Path: i, Cell: c.id, HasCell: true,
				Err: fmt.Errorf("%w: demoted, and no token for %v since, nor an arrival for %v, allowed %d × %v, %d× for this cell",
					ErrNoProgress, waited, time.Duration(e.now-p.alive), NoProgressFactor, time.Duration(p.headSpan(c)), factor)})
			if e.err != nil {
				return
			}
			continue
		}
		// As TCP backs its RTO off (RFC 6298, 5.5), this cell's next
		// attempts get twice as long, wherever it goes: the path may be
		// slow rather than broken, and then only a longer clock lets the
		// cell land and the estimates learn the real RTT. The path's own
		// clock stays as it is, so that a path that is dead, not slow,
		// is still found out by the next fresh cell within T_soft.
		bumpBackoff(&e.snd.tq.at(c.id).timeouts, e.cfg.MaxSoftBackoff)
		p.softTimeouts++
		e.demote(p, &PathError{Peer: e.cfg.Peer, Path: i, Cell: c.id, HasCell: true,
			Err: fmt.Errorf("%w: no token for %v, allowed %v, %d× for this cell", ErrSoftTimeout, waited, time.Duration(p.headSpan(c)), factor)})
	}
	e.pump()
}

// demote takes path p off new cells without resetting it: a cell on it
// is late, which a slow path and a broken one alike show. What this batch
// would have posted on it is taken back, and every cell it holds that
// has not landed goes to the re-post queue; its copies stay outstanding
// and resolve as its tokens come, after which it is up again (Token).
// Everything else bound for it, tokens and ring records, still goes: its
// QP is in service.
func (e *Engine) demote(p *path, cause error) {
	p.state, p.cause = PathSlow, cause
	e.stats.Demotions++
	e.takeBack(p)
	e.rd.Posts = keep(e.rd.Posts, func(x *Post) bool { return x.Path != p.idx })
	e.requeueHeld(p)
	e.promoteDrained(p)
}

// promoteDrained makes a slow path that holds no copy up again: all it
// was given has landed, so it is slow, not broken, and its estimates now
// know how slow.
func (e *Engine) promoteDrained(p *path) {
	if p.state == PathSlow && p.n == 0 {
		p.state, p.cause = PathUp, nil
		p.promotions++
		e.stats.Promotions++
	}
}

// giveUp isolates a live path and asks for its reset.
func (e *Engine) giveUp(p *path, cause error) {
	if !p.live() {
		return
	}
	e.isolate(p, cause)
	e.stats.GiveUps++
	p.giveUps++
	e.askReset(p, cause)
	// Even the last path up is only being reset, not lost: a stall of the
	// whole host (a pause, a slow first write into fresh memory) times
	// every path out at once, and must not fail the connection. Only
	// PathDead ends it, and the driver bounds every reset.
	e.reemit()
}

// isolate takes path p out of service: what this batch would have sent on
// it is taken back, and every cell it holds that has not landed is rolled
// back onto the re-post queue. Its copies stay outstanding, quarantined,
// until the path is reset or closed.
//
// A slow path's cells went to the re-post queue when it was demoted, and
// it took none since: each is queued still, or has a copy elsewhere,
// whose path going out of service would queue it again. Queued now, it
// could go a second time onto the path that holds that copy; a token for
// either copy there would then resolve both, the one not landed too.
func (e *Engine) isolate(p *path, cause error) {
	slow := p.state == PathSlow
	p.state, p.cause = PathDown, cause
	e.takeBack(p)
	e.dropBatch(p.idx)
	if !slow {
		e.requeueHeld(p)
	}
}

// takeBack removes from path p the copies of this batch, which were not
// handed out yet, and queues their cells for re-posting.
func (e *Engine) takeBack(p *path) {
	for p.n > 0 && p.at(p.n-1).batch == e.batch {
		rec := p.popTail()
		c := e.snd.tq.at(rec.id)
		c.copies--
		c.attempts--
		p.credits++
		p.cellsPosted--
		p.bytesPosted -= uint64(rec.n)
		e.stats.CellsPosted--
		if c.tail {
			// The tail went back with its cell: the peer never saw it.
			c.tail = false
			e.snd.at(c.rseq).tailed = false
		}
		e.requeue(c)
		e.resolve(c)
	}
}

// requeueHeld queues for re-posting every cell with a copy on p that has
// not landed.
func (e *Engine) requeueHeld(p *path) {
	for i := 0; i < p.n; i++ {
		if c := e.snd.tq.at(p.at(i).id); !c.acked {
			e.requeue(c)
		}
	}
}

// dropBatch removes the outputs of the current batch bound for path q.
// Grants, finals and holds among them are sent again by reemit; a hold
// ack, when the peer writes its hold again.
func (e *Engine) dropBatch(q int) {
	rd := &e.rd
	rd.Posts = keep(rd.Posts, func(x *Post) bool { return x.Path != q })
	rd.Recvs = keep(rd.Recvs, func(x *RecvPost) bool { return x.Path != q })
	rd.Tokens = keep(rd.Tokens, func(x *TokenWrite) bool { return x.Path != q })
	rd.Grants = keep(rd.Grants, func(x *GrantWrite) bool { return x.Path != q })
	rd.Finals = keep(rd.Finals, func(x *FinalWrite) bool { return x.Path != q })
	rd.Holds = keep(rd.Holds, func(x *HoldWrite) bool { return x.Path != q })
	rd.HoldAcks = keep(rd.HoldAcks, func(x *HoldAckWrite) bool { return x.Path != q })
	e.paths[q].recvQueued = 0
}

func keep[T any](s []T, ok func(*T) bool) []T {
	out := s[:0]
	for i := range s {
		if ok(&s[i]) {
			out = append(out, s[i])
		}
	}
	return out
}

// clearCopies resolves every copy outstanding on p, whose reset or close
// guarantees they can no longer land.
func (e *Engine) clearCopies(p *path) {
	for p.n > 0 {
		rec := p.popHead()
		c := e.snd.tq.at(rec.id)
		c.copies--
		e.resolve(c)
	}
}

// afterQuarantine goes on once path p can no longer write anything: the
// window slides over the cells it held, ranges waiting on it finish, and
// the receiver releases ranges it held for it.
func (e *Engine) afterQuarantine(p *path) {
	e.snd.advance()
	e.rcv.release(e, p.idx)
	// A control write of ours still in flight on p when it failed may
	// have overwritten a newer ring slot at the peer before p died.
	e.reemit()
	e.pump()
}

// allDead reports whether every path is closed for good.
func (e *Engine) allDead() bool {
	for i := range e.paths {
		if e.paths[i].state != PathDead {
			return false
		}
	}
	return true
}

// downMask is the set of paths given up whose old incarnation may still
// write.
func (e *Engine) downMask() uint64 {
	var m uint64
	for i := range e.paths {
		if e.paths[i].state == PathDown && !e.paths[i].quiet {
			m |= 1 << i
		}
	}
	return m
}

// slotPath picks the path for a grant or a final bound for a ring slot
// whose previous record went over path last (-1: none yet), and records
// the choice in *last. While that path is in service (up or slow) the
// new record follows the old one on it: RC places one QP's writes in
// order, so the new record lands after the old one. On another path the
// old record, still queued behind cells on its own path or written again
// by reemit, could land second and overwrite the newer record in the
// peer's slot; the peer would find only a stale record there and wait
// for ever for the grant or final that was lost. Otherwise the record
// goes over ctrlPath.
func (e *Engine) slotPath(last *int8) int {
	q := int(*last)
	if q < 0 || q >= len(e.paths) || !e.paths[q].live() {
		q = e.ctrlPath()
	}
	if q >= 0 {
		*last = int8(q)
	}
	return q
}

// ctrlPath picks the path for a grant or a final: the up path with the
// least outstanding, else the slow one with the least (a slow path still
// delivers, and nothing would write the record again when it is up), or
// -1. Of the paths within recordSlack of the least, the first is taken:
// with small messages that is the path their cells and tokens take too
// (see firstQuick), so one QP carries all of it.
func (e *Engine) ctrlPath() int {
	best := -1
	for i := range e.paths {
		p := &e.paths[i]
		if !p.live() {
			continue
		}
		if b := best; b < 0 || better(p, &e.paths[b]) {
			best = i
		}
	}
	for i := range best {
		if p := &e.paths[i]; p.live() && p.state == e.paths[best].state && p.bytes <= e.paths[best].bytes+recordSlack {
			return i
		}
	}
	return best
}

// better reports whether p is the better path for a record than b: up
// before slow, then the least outstanding.
func better(p, b *path) bool {
	if (p.state == PathUp) != (b.state == PathUp) {
		return p.state == PathUp
	}
	return p.bytes < b.bytes
}

// reemit writes again every grant and final the peer may not have seen.
// Records are idempotent, so duplicates are harmless; this runs only when
// a path fails or comes back.
func (e *Engine) reemit() {
	e.rcv.reemit(e)
	e.snd.reemit(e)
}

// fail ends the connection: every range still open fails with a
// *NoPathError naming each path and why it was given up.
func (e *Engine) fail() {
	np := &NoPathError{Peer: e.cfg.Peer, Paths: make([]error, len(e.paths))}
	for i := range e.paths {
		np.Paths[i] = e.paths[i].cause
	}
	e.err = np
	e.snd.fail(e)
	e.rcv.fail(e)
}
