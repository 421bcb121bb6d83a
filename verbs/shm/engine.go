package shm

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/rdmacell/rdmacell/verbs"
	"github.com/rdmacell/rdmacell/verbs/internal/soft"
)

// Engine tuning.
const (
	// spinRounds is how many times (each a yield to other goroutines,
	// some 50 µs in all) an engine polls after its last piece of work
	// before it sleeps. A reply that comes back within it costs no
	// wake-up; an idle QP sleeps and costs nothing.
	spinRounds = 200
	// idleWait bounds a sleep with nothing pending, so that even a lost
	// wake-up would only delay, never hang.
	idleWait = time.Second
	// dozeTime is how long an engine sleeps while a poller drives its QP;
	// when polling stops, the engine takes over within it.
	dozeTime = 200 * time.Microsecond
	// inlineMax is the largest request a poster or poller executes in
	// its own goroutine; the copy takes about a microsecond.
	inlineMax = 16 << 10
)

// Engine stop modes.
const (
	stopFlush   int32 = 1 // the QP moves to ERR: flush what the engine holds
	stopDiscard int32 = 2 // the QP moves to RESET: drop it
)

// engine executes one QP's requests, as requester, and its peer's requests,
// as responder. Each QP has its own, so a slow or stalled QP delays no
// other. It runs from the move to RTR until the QP leaves RTR and RTS.
type engine struct {
	q        *QP
	stopMode atomic.Int32
	stopCh   chan struct{}
	done     chan struct{}
	timer    *time.Timer
	exited   bool // the engine failed the QP

	// The requester and responder roles are each held by one goroutine
	// at a time: the engine, or a goroutine polling or posting (see
	// poll). The fields below belong to the holder of their role.
	reqBusy, respBusy atomic.Bool
	dozing            atomic.Bool   // the engine sleeps while pollers drive
	polled            atomic.Uint32 // bell value of the last complete poll
	lastPolls         uint32        // q.polls when the engine last looked

	// Requester. The request at the head of the send queue is being
	// executed; waiting says since when it waits for the peer to connect
	// or acknowledge.
	waiting  bool
	since    time.Time
	inflight bool   // a request descriptor awaits its acknowledgement
	seq      uint32 // sequence number of the last request posted
	progress uint32 // the responder's progress counter when last seen
	sent     uint64 // bytes of the head SEND already acknowledged
	chunk    uint32 // bytes of the SEND chunk in flight
	srcs     [][]byte

	// Responder.
	handled  uint32 // sequence number of the peer's last request answered
	recv     soft.RecvSlot
	haveRecv bool   // recv was taken for the message being received
	recvOff  uint64 // bytes of that message placed
	rnr      bool   // no receive was posted for the pending request
	rnrTries int
	rnrNext  time.Time

	// Caches of remote lookups: rkey → table slot, and the last mapping.
	hints    [4]keyHint
	nextHint int
	lastPeer *peer
	lastMem  uint32
	lastMap  *mapping
}

type keyHint struct{ key, slot uint32 }

func newEngine(q *QP) *engine {
	e := &engine{
		q: q, stopCh: make(chan struct{}), done: make(chan struct{}),
		timer: time.NewTimer(time.Hour),
		srcs:  make([][]byte, 0, q.cfg.MaxSGE),
		recv:  soft.RecvSlot{SGL: make([]verbs.SGE, 0, q.cfg.MaxSGE)},
	}
	e.timer.Stop()
	return e
}

// stop makes the engine exit and waits for it. Called with q.mu held.
func (e *engine) stop(mode int32) {
	e.stopMode.Store(mode)
	close(e.stopCh)
	e.q.kickHard()
	<-e.done
}

func (e *engine) run() {
	q := e.q
	defer q.dev.wg.Done()
	defer close(e.done)
	spins := 0
	for {
		l := q.link.Load()
		var b bell
		var seen uint32
		if l != nil {
			b = l.pair.bell(l.pair.side)
			seen = b.load()
		}
		if m := e.stopMode.Load(); m != 0 {
			// Both roles stay locked: pollers leave a stopped engine alone.
			e.lockAll()
			if e.inflight && l != nil {
				l.pair.cancel(e.seq)
			}
			if m == stopFlush && e.haveRecv {
				q.recvCQ.Push(verbs.WC{ID: e.recv.ID, Status: verbs.StatusWRFlush, Opcode: verbs.OpRecv, QPN: q.num})
			}
			return
		}
		var c clock
		worked, busy := false, false
		wait := idleWait
		if e.respBusy.CompareAndSwap(false, true) {
			worked = e.respond(l, &c)
			if e.rnr {
				wait = min(wait, e.rnrNext.Sub(c.now()))
			}
			e.respBusy.Store(false)
		} else {
			busy = true
		}
		if e.reqBusy.CompareAndSwap(false, true) {
			worked = e.request(l, &c) || worked
			if e.exited {
				return // fail locked both roles for good
			}
			if e.waiting {
				if e.since.IsZero() {
					e.since = c.now()
				}
				wait = min(wait, e.since.Add(e.budget(l)).Sub(c.now()))
			}
			e.reqBusy.Store(false)
		} else {
			busy = true
		}
		if worked {
			spins = 0
			continue
		}
		if p := q.polls.Load(); p != e.lastPolls || busy {
			// A goroutine polling a CQ of this QP drives it: stay out of
			// its way, and do not make the peer pay for waking us.
			e.lastPolls = p
			e.doze(l, min(wait, dozeTime))
			continue
		}
		if spins < spinRounds {
			spins++
			runtime.Gosched()
			continue
		}
		wait = max(wait, 10*time.Microsecond)
		if l != nil {
			b.sleep(seen, wait)
			continue
		}
		e.timer.Reset(wait)
		select {
		case <-q.wake:
		case <-e.timer.C:
		}
		e.timer.Stop()
	}
}

// clock reads the time once, when first needed: on the machines this
// runs on a clock read costs a few hundred nanoseconds, as much as the
// rest of a small request.
type clock struct{ t time.Time }

func (c *clock) now() time.Time {
	if c.t.IsZero() {
		c.t = time.Now()
	}
	return c.t
}

// doze sleeps for d without asking to be woken by the peer: only a local
// post that leaves work for the engine wakes it early.
func (e *engine) doze(l *link, d time.Duration) {
	d = max(d, 10*time.Microsecond)
	e.dozing.Store(true)
	if l != nil {
		b := l.pair.bell(l.pair.side)
		futexWait(b.seq, b.load(), d)
	} else {
		e.timer.Reset(d)
		select {
		case <-e.q.wake:
		case <-e.timer.C:
		}
		e.timer.Stop()
	}
	e.dozing.Store(false)
}

// lockAll takes both roles, waiting for pollers to let go of them; they
// hold a role only for non-blocking work.
func (e *engine) lockAll() {
	for !e.respBusy.CompareAndSwap(false, true) {
		runtime.Gosched()
	}
	for !e.reqBusy.CompareAndSwap(false, true) {
		runtime.Gosched()
	}
}

// poll lets a goroutine polling one of the QP's CQs advance the QP: it
// executes the peer's requests, collects acknowledgements and executes
// small requests of its own, without blocking and without failing
// anything (failures are left to the engine). The clock is shared by
// the QPs of one poll.
func (e *engine) poll(c *clock) {
	q := e.q
	q.polls.Add(1)
	// The segment may be touched only with a role held and the engine
	// not stopped: a QP being reset unmaps it after locking both roles.
	if !e.respBusy.CompareAndSwap(false, true) {
		return
	}
	defer e.respBusy.Store(false)
	l := q.link.Load()
	if l == nil || e.stopMode.Load() != 0 {
		return
	}
	seen := l.pair.bell(l.pair.side).load()
	if seen == e.polled.Load() {
		return // nothing happened since the last complete poll
	}
	e.respond(l, c)
	if e.reqBusy.CompareAndSwap(false, true) {
		e.fast(l, c)
		e.reqBusy.Store(false)
		e.polled.Store(seen)
	}
}

// fast is the requester's path for pollers and posters: it completes
// acknowledged requests and executes small WRITEs and WRITE_WITH_IMMs
// whose checks pass against cached state. Anything else (a failure, a
// memory file to fetch, a large copy, a SEND) is left to the engine.
func (e *engine) fast(l *link, c *clock) {
	q := e.q
	if l == nil || l.isDown() || !l.pair.peerAttached() {
		return
	}
	for {
		head := q.sq.head.Load()
		s := q.sq.slot(head)
		if e.inflight {
			seq, status, _ := l.pair.acked()
			if seq != e.seq {
				return // the acknowledgement is not there yet
			}
			if verbs.Status(status) != verbs.StatusSuccess || s.op == verbs.OpSend {
				e.wake(l)
				return
			}
			e.inflight, e.waiting = false, false
			e.complete(s)
			continue
		}
		if head == q.sq.tail.Load() {
			return
		}
		if s.op == verbs.OpSend || s.total > inlineMax {
			e.wake(l)
			return
		}
		e.waiting = false
		total, st := e.gather(s)
		if st != verbs.StatusSuccess {
			e.wake(l)
			return
		}
		dst, m, st, _ := e.remote(l, s.rkey, s.raddr, total, c, false)
		if st != verbs.StatusSuccess {
			e.wake(l)
			return
		}
		off := 0
		for _, src := range e.srcs {
			off += copy(dst[off:], src)
		}
		m.release()
		if s.op == verbs.OpWrite {
			e.complete(s)
			continue
		}
		e.post(l, desc{op: descImm, imm: s.imm, total: uint32(total)}, c)
		return
	}
}

// wake rouses an engine dozing while pollers drive its QP: they met work
// only the engine does.
func (e *engine) wake(l *link) {
	if e.dozing.Load() {
		futexWake(l.pair.bell(l.pair.side).seq)
	}
}

// budget is how long a request may wait for the peer without progress:
// the QP's timeout for each try, and the responder's RNR retries on top
// while an acknowledgement is due.
func (e *engine) budget(l *link) time.Duration {
	d := e.q.cfg.Timeout * time.Duration(e.q.cfg.RetryCount+1)
	if e.inflight && l != nil {
		d += l.peerMinRNR * time.Duration(e.q.cfg.RNRRetry+1)
	}
	return d
}

// request advances the head of the send queue.
func (e *engine) request(l *link, c *clock) bool {
	q := e.q
	if e.inflight {
		return e.checkAck(l, c)
	}
	head := q.sq.head.Load()
	if head == q.sq.tail.Load() {
		return false
	}
	s := q.sq.slot(head)
	if l != nil && l.isDown() {
		e.fail(s, verbs.StatusRetryExceeded, l.downErr)
		return true
	}
	if l == nil || !l.pair.peerAttached() {
		// The peer has not moved to RTR yet: wait for it as a
		// requester on a fabric retries, within the same budget.
		if !e.waiting {
			e.waiting, e.since = true, c.now()
		} else if c.now().Sub(e.since) >= e.budget(l) {
			e.fail(s, verbs.StatusRetryExceeded, fmt.Errorf("shm: qp %d: peer %s qp %d did not connect", q.num, q.remote.Addr, q.remote.QPN))
			return true
		}
		return false
	}
	e.waiting = false
	total, st := e.gather(s)
	if st != verbs.StatusSuccess {
		e.fail(s, st, nil)
		return true
	}
	if s.op == verbs.OpSend {
		e.sendChunk(l, s, total, c)
		return true
	}
	dst, m, st, err := e.remote(l, s.rkey, s.raddr, total, c, true)
	if st != verbs.StatusSuccess && e.stopMode.Load() != 0 {
		// Interrupted while fetching the peer's memory: the QP is
		// leaving RTS and flushes the request.
		return false
	}
	if st != verbs.StatusSuccess {
		e.fail(s, st, err)
		return true
	}
	off := 0
	for _, src := range e.srcs {
		off += copy(dst[off:], src)
	}
	m.release()
	if s.op == verbs.OpWrite {
		e.complete(s)
		return true
	}
	e.post(l, desc{op: descImm, imm: s.imm, total: uint32(total)}, c)
	return true
}

// gather resolves the request's local elements into e.srcs.
func (e *engine) gather(s *sendSlot) (uint64, verbs.Status) {
	e.srcs = e.srcs[:0]
	var total uint64
	for _, sge := range s.sgl {
		b, st := e.q.pd.mrs.Local(sge, false)
		if st != verbs.StatusSuccess {
			return 0, st
		}
		e.srcs = append(e.srcs, b)
		total += uint64(len(b))
	}
	return total, verbs.StatusSuccess
}

// sendChunk stages the next chunk of a SEND and posts it.
func (e *engine) sendChunk(l *link, s *sendSlot, total uint64, c *clock) {
	n := min(total-e.sent, stagingSize)
	stage := l.pair.staging(l.pair.side)[:n]
	skip, pos := e.sent, 0
	for _, src := range e.srcs {
		if skip >= uint64(len(src)) {
			skip -= uint64(len(src))
			continue
		}
		pos += copy(stage[pos:], src[skip:])
		skip = 0
		if pos == len(stage) {
			break
		}
	}
	e.chunk = uint32(n)
	e.post(l, desc{op: descSend, len: uint32(n), total: uint32(total), off: uint32(e.sent)}, c)
}

// post publishes a request for the responder and rings it.
func (e *engine) post(l *link, d desc, c *clock) {
	e.seq++
	_, _, e.progress = l.pair.acked()
	l.pair.postRequest(e.seq, d)
	l.ringPeer()
	// The clock is read when the acknowledgement is first found missing.
	e.inflight, e.waiting, e.since = true, true, time.Time{}
}

// checkAck completes the request in flight once the responder answers.
func (e *engine) checkAck(l *link, c *clock) bool {
	q := e.q
	s := q.sq.slot(q.sq.head.Load())
	seq, status, progress := l.pair.acked()
	switch {
	case seq == e.seq:
		e.inflight, e.waiting = false, false
		st := verbs.Status(status)
		switch st {
		case verbs.StatusSuccess:
		case verbs.StatusRNRRetryExceeded, verbs.StatusRemoteAccess, verbs.StatusRemoteInvalidRequest:
			e.fail(s, st, nil)
			return true
		default:
			e.fail(s, verbs.StatusFatal, fmt.Errorf("%w: acknowledgement with status %d", errProtocol, status))
			return true
		}
		if s.op == verbs.OpSend {
			e.sent += uint64(e.chunk)
			if e.sent < s.total {
				return true
			}
		}
		e.complete(s)
		return true
	case seq != e.seq-1:
		e.fail(s, verbs.StatusRetryExceeded, fmt.Errorf("%w: acknowledgement %d while %d is due", errProtocol, seq, e.seq))
		return true
	case l.isDown():
		e.fail(s, verbs.StatusRetryExceeded, l.downErr)
		return true
	case l.pair.retriedRNR() == e.seq && q.cfg.RNRRetry == 7:
		// A live responder answering "not ready" is no silence: with
		// RNR retries unlimited, only the connection's loss ends this.
		e.since = c.now()
		return false
	case progress != e.progress:
		e.progress, e.since = progress, c.now()
		return false
	case e.since.IsZero():
		e.since = c.now()
		return false
	case c.now().Sub(e.since) >= e.budget(l):
		e.fail(s, verbs.StatusRetryExceeded, fmt.Errorf("shm: qp %d: peer %s qp %d did not acknowledge within %v", q.num, l.peerAddr, l.peerQPN, e.budget(l)))
		return true
	}
	return false
}

// complete retires the head request successfully.
func (e *engine) complete(s *sendSlot) {
	q := e.q
	if s.flags&verbs.Signaled != 0 {
		q.sendCQ.Push(verbs.WC{ID: s.id, Status: verbs.StatusSuccess, Opcode: s.op, ByteLen: uint32(s.total), QPN: q.num})
	}
	e.sent = 0
	q.sq.head.Add(1)
}

// fail completes the head request with st, moves the QP to ERR, flushes
// everything else and closes the connection; the engine then exits.
func (e *engine) fail(s *sendSlot, st verbs.Status, cause error) {
	q := e.q
	// The engine holds the requester role; the flush needs the responder
	// role too. Both stay locked: the engine exits.
	for !e.respBusy.CompareAndSwap(false, true) {
		runtime.Gosched()
	}
	if l := q.link.Load(); e.inflight && l != nil {
		l.pair.cancel(e.seq)
	}
	q.setState(verbs.StateErr)
	q.sendCQ.Push(verbs.WC{ID: s.id, Status: st, Opcode: s.op, QPN: q.num})
	q.sq.head.Add(1)
	q.flushSends()
	if e.haveRecv {
		q.recvCQ.Push(verbs.WC{ID: e.recv.ID, Status: verbs.StatusWRFlush, Opcode: verbs.OpRecv, QPN: q.num})
		e.haveRecv = false
	}
	q.rq.Flush(q.recvCQ, q.num)
	if l := q.link.Load(); l != nil {
		l.fail(fmt.Errorf("shm: qp %d: moved to ERR", q.num))
	}
	if cause != nil {
		slog.Debug("shm: request failed", "qp", q.num, "wr", s.id, "status", st, "err", cause)
	}
	e.exited = true
}

// remote checks a WRITE of n bytes at addr under rkey against the peer's
// region table and returns the destination in this process's mapping of
// the peer's memory, pinned until m.release.
func (e *engine) remote(l *link, rkey uint32, addr, n uint64, c *clock, fetch bool) (dst []byte, m *mapping, st verbs.Status, err error) {
	t := l.peer.table
	r, ok := region{}, false
	for _, h := range e.hints {
		if h.key == rkey && rkey != 0 {
			r, ok = t.read(h.slot, rkey)
			break
		}
	}
	if !ok {
		if i, found := t.find(rkey); found {
			if r, ok = t.read(i, rkey); ok {
				e.hints[e.nextHint] = keyHint{key: rkey, slot: i}
				e.nextHint = (e.nextHint + 1) % len(e.hints)
			}
		}
	}
	if !ok {
		return nil, nil, verbs.StatusRemoteAccess, fmt.Errorf("shm: rkey %#x is not registered at %s", rkey, l.peerAddr)
	}
	if r.pd != l.peerPD || r.access&uint32(verbs.AccessRemoteWrite) == 0 ||
		addr < r.addr || addr-r.addr > r.len || n > r.len-(addr-r.addr) {
		return nil, nil, verbs.StatusRemoteAccess, fmt.Errorf("shm: %d bytes at %#x under rkey %#x outside the region or its rights", n, addr, rkey)
	}
	m, err = e.mapping(l, r.memID, c, fetch)
	if err != nil {
		if errors.Is(err, errNoMemory) {
			return nil, nil, verbs.StatusRemoteAccess, err
		}
		return nil, nil, verbs.StatusRetryExceeded, err
	}
	off := r.memOff + (addr - r.addr)
	if off > uint64(len(m.b)) || n > uint64(len(m.b))-off {
		m.release()
		return nil, nil, verbs.StatusRemoteAccess, fmt.Errorf("%w: region %#x lies outside its memory file", errProtocol, rkey)
	}
	return m.b[off : off+n : off+n], m, verbs.StatusSuccess, nil
}

// errWouldBlock: the fast path met a memory file it has not mapped yet.
var errWouldBlock = errors.New("shm: memory file not mapped yet")

// mapping returns the peer's memory file id mapped and pinned, fetching
// it over the socket the first time.
func (e *engine) mapping(l *link, id uint32, c *clock, fetch bool) (*mapping, error) {
	if e.lastMap != nil && e.lastPeer == l.peer && e.lastMem == id && e.lastMap.acquire() {
		return e.lastMap, nil
	}
	for range 3 {
		m := l.peer.lookup(id)
		if m == nil && !fetch {
			return nil, errWouldBlock
		}
		if m == nil {
			fd, err := l.fetch(id, c.now().Add(e.budget(l)), e.stopCh)
			if err != nil {
				return nil, err
			}
			m, err = l.peer.insert(id, fd)
			closeFds([]int{fd})
			if err != nil {
				return nil, err
			}
		}
		if m.acquire() {
			e.lastPeer, e.lastMem, e.lastMap = l.peer, id, m
			return m, nil
		}
	}
	return nil, fmt.Errorf("shm: memory file %d of %s keeps being replaced", id, l.peerAddr)
}
