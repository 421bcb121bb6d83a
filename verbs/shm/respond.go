package shm

import (
	"fmt"

	"github.com/rdmacell/rdmacell/verbs"
)

// respond executes the peer's published requests in order, as many as
// are ready: a WRITE_WITH_IMM (its bytes are already placed; it consumes
// a receive) or a chunk of a SEND (scattered from the peer's staging area
// into the receive's buffers). It acknowledges them with one cumulative
// acknowledgement and one doorbell. Everything read from the segment is
// checked: a malformed request closes the connection.
func (e *engine) respond(l *link, c *clock) bool {
	if l == nil || l.isDown() || e.peerFailed || !l.pair.peerAttached() {
		return false
	}
	top := l.pair.peerRequestSeq()
	if top == e.handled {
		return false
	}
	if n := top - e.handled; n > ringSlots {
		return e.protocol(l, "request %d after %d", top, e.handled)
	}
	q := e.q
	done := e.handled
	worked := false
	for seq := e.handled + 1; ; seq++ {
		d := l.pair.peerRequest(seq)
		st := verbs.StatusSuccess
		switch d.op {
		case descImm:
			if d.len != 0 || d.off != 0 || uint64(d.total) > maxMessage {
				return e.protocol(l, "malformed WRITE_WITH_IMM descriptor %+v", d)
			}
		case descSend:
			if d.len > stagingSize || uint64(d.total) > maxMessage || d.off > d.total || d.len > d.total-d.off ||
				(d.len == 0 && d.total != 0) || uint64(d.off) != e.recvOff || (d.off > 0 && !e.haveRecv) {
				return e.protocol(l, "malformed SEND descriptor %+v (placed %d)", d, e.recvOff)
			}
		default:
			return e.protocol(l, "request opcode %d", d.op)
		}
		got, w := e.takeRecv(l, seq, done, c)
		worked = worked || w
		if e.peerFailed {
			return true // answered with a failure
		}
		if !got {
			break // not ready
		}
		if !l.pair.take(seq) {
			// The requester withdrew this request and every later one.
			// The receive taken for it stays held for the next request,
			// so receives are still consumed in the order they were
			// posted.
			e.handled, e.rnr = top, false
			return true
		}
		if d.op == descImm {
			q.recvCQ.Push(verbs.WC{ID: e.recv.ID, Status: verbs.StatusSuccess, Opcode: verbs.OpRecvWriteImm,
				Flags: verbs.WCWithImm, ByteLen: d.total, Imm: d.imm, QPN: q.num})
			e.haveRecv = false
		} else {
			switch {
			case d.off == 0 && uint64(d.total) > recvLen(e.recv.SGL):
				e.endRecv(verbs.StatusLocalLength, d.total)
				st = verbs.StatusRemoteInvalidRequest
			default:
				if lst := e.scatter(l.pair.staging(1 - l.pair.side)[:d.len]); lst != verbs.StatusSuccess {
					e.endRecv(lst, d.total)
					st = verbs.StatusRemoteInvalidRequest
				} else if e.recvOff == uint64(d.total) {
					e.endRecv(verbs.StatusSuccess, d.total)
				}
			}
		}
		worked = true
		if st != verbs.StatusSuccess {
			e.answer(l, seq, st)
			return true
		}
		done, e.handled, e.rnr = seq, seq, false
		if seq == top {
			break
		}
	}
	if done != e.answeredUpTo {
		e.answer(l, done, verbs.StatusSuccess)
	}
	return worked
}

// takeRecv returns whether a receive is at hand for request seq, taking
// the oldest posted one. With none posted it emulates an RNR NAK: it waits
// MinRNRTimer per retry, as many times as the requester's RNR retry count
// allows (7: forever), then fails the request. worked reports a change.
// done is the last request executed before seq, acknowledged along with a
// failure.
func (e *engine) takeRecv(l *link, seq, done uint32, c *clock) (got, worked bool) {
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
		if done != e.answeredUpTo {
			// Acknowledge what went before, so the requester's budget
			// counts from this request.
			e.answer(l, done, verbs.StatusSuccess)
		}
		return false, true
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

// answer acknowledges the peer's requests up to seq, the last with st. A
// failure ends the responder's work for this connection: the requester
// fails its QP, and requests it published behind the failed one must not
// execute.
func (e *engine) answer(l *link, seq uint32, st verbs.Status) {
	l.pair.ack(seq, uint32(st))
	l.ringPeer()
	e.handled, e.answeredUpTo, e.rnr = seq, seq, false
	if st != verbs.StatusSuccess {
		e.peerFailed = true
	}
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
