package shm

import (
	"fmt"

	"github.com/rdmacell/rdmacell/verbs"
)

// respond executes the peer's pending request, if any: a WRITE_WITH_IMM
// (its bytes are already placed; it consumes a receive) or a chunk of a
// SEND (scattered from the peer's staging area into the receive's
// buffers). Everything read from the segment is checked: a malformed
// request closes the connection.
func (e *engine) respond(l *link, c *clock) bool {
	if l == nil || l.isDown() || !l.pair.peerAttached() {
		return false
	}
	seq := l.pair.peerRequestSeq()
	if seq == e.handled {
		return false
	}
	if seq != e.handled+1 {
		return e.protocol(l, "request %d after %d", seq, e.handled)
	}
	d := l.pair.peerRequest()
	q := e.q
	switch d.op {
	case descImm:
		if d.len != 0 || d.off != 0 || uint64(d.total) > maxMessage {
			return e.protocol(l, "malformed WRITE_WITH_IMM descriptor %+v", d)
		}
		if got, worked := e.takeRecv(l, seq, c); !got {
			return worked
		}
		if !l.pair.take(seq) {
			return e.cancelled(seq)
		}
		// Acknowledge first: the requester's poller may be waiting on it.
		e.answer(l, seq, verbs.StatusSuccess)
		q.recvCQ.Push(verbs.WC{ID: e.recv.ID, Status: verbs.StatusSuccess, Opcode: verbs.OpRecvWriteImm,
			Flags: verbs.WCWithImm, ByteLen: d.total, Imm: d.imm, QPN: q.num})
		e.haveRecv = false
		return true
	case descSend:
		if d.len > stagingSize || uint64(d.total) > maxMessage || d.off > d.total || d.len > d.total-d.off ||
			(d.len == 0 && d.total != 0) || uint64(d.off) != e.recvOff || (d.off > 0 && !e.haveRecv) {
			return e.protocol(l, "malformed SEND descriptor %+v (placed %d)", d, e.recvOff)
		}
		if got, worked := e.takeRecv(l, seq, c); !got {
			return worked
		}
		if !l.pair.take(seq) {
			return e.cancelled(seq)
		}
		if d.off == 0 && uint64(d.total) > recvLen(e.recv.SGL) {
			e.endRecv(verbs.StatusLocalLength, d.total)
			e.answer(l, seq, verbs.StatusRemoteInvalidRequest)
			return true
		}
		if st := e.scatter(l.pair.staging(1 - l.pair.side)[:d.len]); st != verbs.StatusSuccess {
			e.endRecv(st, d.total)
			e.answer(l, seq, verbs.StatusRemoteInvalidRequest)
			return true
		}
		if e.recvOff == uint64(d.total) {
			e.endRecv(verbs.StatusSuccess, d.total)
		}
		e.answer(l, seq, verbs.StatusSuccess)
		return true
	}
	return e.protocol(l, "request opcode %d", d.op)
}

// takeRecv returns whether a receive is at hand for request seq, taking
// the oldest posted one. With none posted it emulates an RNR NAK: it waits
// MinRNRTimer per retry, as many times as the requester's RNR retry count
// allows (7: forever), then fails the request. worked reports a change.
func (e *engine) takeRecv(l *link, seq uint32, c *clock) (got, worked bool) {
	q := e.q
	if e.haveRecv {
		return true, false
	}
	if q.rq.Take(0, &e.recv) {
		e.haveRecv, e.recvOff, e.rnr = true, 0, false
		return true, false
	}
	retries := int(q.remote.RNRRetry)
	switch {
	case !e.rnr:
		if retries == 0 {
			e.answer(l, seq, verbs.StatusRNRRetryExceeded)
			return false, true
		}
		e.rnr, e.rnrTries, e.rnrNext = true, 0, c.now().Add(q.cfg.MinRNRTimer)
		l.pair.notReady(seq)
		return false, false
	case c.now().Before(e.rnrNext):
		return false, false
	}
	e.rnrTries++
	l.pair.bumpProgress()
	if retries != 7 && e.rnrTries >= retries {
		e.answer(l, seq, verbs.StatusRNRRetryExceeded)
		return false, true
	}
	e.rnrNext = c.now().Add(q.cfg.MinRNRTimer)
	return false, true
}

// scatter places src at the current offset of the receive's buffers.
func (e *engine) scatter(src []byte) verbs.Status {
	skip := e.recvOff
	for _, sge := range e.recv.SGL {
		if len(src) == 0 {
			break
		}
		if skip >= uint64(sge.Length) {
			skip -= uint64(sge.Length)
			continue
		}
		dst, st := e.q.pd.mrs.Local(sge, true)
		if st != verbs.StatusSuccess {
			return st
		}
		n := copy(dst[skip:], src)
		src = src[n:]
		e.recvOff += uint64(n)
		skip = 0
	}
	if len(src) > 0 {
		return verbs.StatusLocalLength
	}
	return verbs.StatusSuccess
}

// endRecv completes the receive of the current SEND.
func (e *engine) endRecv(st verbs.Status, n uint32) {
	q := e.q
	q.recvCQ.Push(verbs.WC{ID: e.recv.ID, Status: st, Opcode: verbs.OpRecv, ByteLen: n, QPN: q.num})
	e.haveRecv, e.recvOff = false, 0
}

// cancelled drops the peer's request seq, which its requester withdrew.
// The receive taken for it stays held for the next request, so receives
// are still consumed in the order they were posted.
func (e *engine) cancelled(seq uint32) bool {
	e.handled, e.rnr = seq, false
	return true
}

// answer acknowledges the peer's request seq.
func (e *engine) answer(l *link, seq uint32, st verbs.Status) {
	l.pair.ack(seq, uint32(st))
	l.ringPeer()
	e.handled, e.rnr = seq, false
}

// protocol closes a connection whose peer broke the segment protocol.
func (e *engine) protocol(l *link, format string, args ...any) bool {
	l.fail(fmt.Errorf("%w: qp %d: peer %s qp %d: %s", errProtocol, e.q.num, l.peerAddr, l.peerQPN, fmt.Sprintf(format, args...)))
	return true
}

func recvLen(sgl []verbs.SGE) uint64 {
	var n uint64
	for _, sge := range sgl {
		n += uint64(sge.Length)
	}
	return n
}
