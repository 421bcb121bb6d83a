package shm

import (
	"fmt"
	"log/slog"
	"runtime"
	"time"

	"github.com/rdmacell/rdmacell/verbs"
)

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
