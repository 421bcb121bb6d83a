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
	// spinTime is how long an engine keeps polling after its last piece
	// of work before it sleeps. A reply that comes back within it costs
	// no wake-up; an idle QP sleeps and costs nothing.
	spinTime = 50 * time.Microsecond
	// idleWait bounds a sleep with nothing pending, so that even a lost
	// wake-up would only delay, never hang.
	idleWait = time.Second
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
	e.q.kick()
	<-e.done
}

func (e *engine) run() {
	q := e.q
	defer q.dev.wg.Done()
	defer close(e.done)
	last := time.Now()
	for {
		l := q.link.Load()
		var b bell
		var seen uint32
		if l != nil {
			b = l.pair.bell(l.pair.side)
			seen = b.load()
		}
		if m := e.stopMode.Load(); m != 0 {
			if e.inflight && l != nil {
				l.pair.cancel(e.seq)
			}
			if m == stopFlush && e.haveRecv {
				q.recvCQ.Push(verbs.WC{ID: e.recv.ID, Status: verbs.StatusWRFlush, Opcode: verbs.OpRecv, QPN: q.num})
			}
			return
		}
		now := time.Now()
		worked := e.respond(l, now)
		if !e.exited {
			worked = e.request(l, now) || worked
		}
		if e.exited {
			return
		}
		if worked {
			last = now
			continue
		}
		if now.Sub(last) < spinTime {
			runtime.Gosched()
			continue
		}
		wait := e.nextWake(l, now)
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

// nextWake is how long the engine may sleep: until the next deadline of a
// request it waits on, or idleWait.
func (e *engine) nextWake(l *link, now time.Time) time.Duration {
	wake := now.Add(idleWait)
	if e.waiting {
		if d := e.since.Add(e.budget(l)); d.Before(wake) {
			wake = d
		}
	}
	if e.rnr && e.rnrNext.Before(wake) {
		wake = e.rnrNext
	}
	return max(wake.Sub(now), 10*time.Microsecond)
}

// budget is how long a request may wait for the peer without progress:
// the QP's timeout for each try, and the responder's RNR timer on top
// while an acknowledgement is due.
func (e *engine) budget(l *link) time.Duration {
	d := e.q.cfg.Timeout * time.Duration(e.q.cfg.RetryCount+1)
	if e.inflight && l != nil {
		d += l.peerMinRNR
	}
	return d
}

// request advances the head of the send queue.
func (e *engine) request(l *link, now time.Time) bool {
	q := e.q
	if e.inflight {
		return e.checkAck(l, now)
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
			e.waiting, e.since = true, now
		} else if now.Sub(e.since) >= e.budget(l) {
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
		e.sendChunk(l, s, total, now)
		return true
	}
	dst, m, st, err := e.remote(l, s.rkey, s.raddr, total, now)
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
	e.post(l, desc{op: descImm, imm: s.imm, total: uint32(total)}, now)
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
func (e *engine) sendChunk(l *link, s *sendSlot, total uint64, now time.Time) {
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
	e.post(l, desc{op: descSend, len: uint32(n), total: uint32(total), off: uint32(e.sent)}, now)
}

// post publishes a request for the responder and rings it.
func (e *engine) post(l *link, d desc, now time.Time) {
	e.seq++
	_, _, e.progress = l.pair.acked()
	l.pair.postRequest(e.seq, d)
	l.ringPeer()
	e.inflight, e.waiting, e.since = true, true, now
}

// checkAck completes the request in flight once the responder answers.
func (e *engine) checkAck(l *link, now time.Time) bool {
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
	case progress != e.progress:
		e.progress, e.since = progress, now
		return false
	case now.Sub(e.since) >= e.budget(l):
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
func (e *engine) remote(l *link, rkey uint32, addr, n uint64, now time.Time) (dst []byte, m *mapping, st verbs.Status, err error) {
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
	m, err = e.mapping(l, r.memID, now)
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

// mapping returns the peer's memory file id mapped and pinned, fetching
// it over the socket the first time.
func (e *engine) mapping(l *link, id uint32, now time.Time) (*mapping, error) {
	if e.lastMap != nil && e.lastPeer == l.peer && e.lastMem == id && e.lastMap.acquire() {
		return e.lastMap, nil
	}
	for range 3 {
		m := l.peer.lookup(id)
		if m == nil {
			fd, err := l.fetch(id, now.Add(e.budget(l)), e.stopCh)
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
