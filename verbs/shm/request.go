package shm

import (
	"fmt"
	"log/slog"
	"runtime"
	"time"

	"github.com/rdmacell/rdmacell/verbs"
)

// The requester. Requests are executed in order from the send queue's
// execution pointer (e.next) and completed in order from its head: a
// request between the two has been executed (its bytes placed, its
// descriptor published) and waits for the acknowledgements of the
// descriptors published up to it (sendSlot.need). Execution does not wait
// for acknowledgements, so a chain of requests pipelines, except behind a
// request the responder might refuse:
//
//   - a WRITE_WITH_IMM is safe when the peer has posted more receives than
//     this QP's requests will have consumed (the count the peer publishes
//     in the segment): it cannot meet receiver-not-ready. Otherwise it
//     may fail with an RNR error, and nothing behind it is executed until
//     it is acknowledged, so that no WRITE lands behind a failed request;
//   - a SEND chunk always blocks: the responder may find the receive too
//     small, and the staging area holds one chunk.
//
// A request that fails at the requester (a local protection error, an
// rkey the peer's table refuses) waits until every request before it is
// acknowledged and then fails: completions stay in order, as on an RNIC.

// budget is how long a request may wait for the peer without progress:
// the QP's timeout for each try, and the responder's RNR retries on top
// while an acknowledgement is due.
func (e *engine) budget(l *link) time.Duration {
	d := e.q.cfg.Timeout * time.Duration(e.q.cfg.RetryCount+1)
	if e.seq != e.acked && l != nil {
		d += l.peerMinRNR * time.Duration(e.q.cfg.RNRRetry+1)
	}
	return d
}

// request is the engine's requester step: everything advance does, plus
// what only the engine does (large copies, SENDs, fetching a memory file,
// failures and timeouts). It reports whether anything changed.
func (e *engine) request(l *link, c *clock) bool {
	q := e.q
	if q.sq.head.Load() == q.sq.tail.Load() {
		e.waiting = false
		return false
	}
	if l != nil && l.isDown() {
		e.fail(verbs.StatusRetryExceeded, l.downErr)
		return true
	}
	if l == nil || !l.pair.peerAttached() {
		// The peer has not moved to RTR yet: wait for it as a
		// requester on a fabric retries, within the same budget.
		if !e.waiting {
			e.waiting, e.since = true, c.now()
		} else if c.now().Sub(e.since) >= e.budget(l) {
			e.fail(verbs.StatusRetryExceeded, fmt.Errorf("shm: qp %d: peer %s qp %d did not connect", q.num, q.remote.Addr, q.remote.QPN))
			return true
		}
		return false
	}
	worked := e.advance(l, c, true)
	if e.exited || e.stopMode.Load() != 0 {
		return worked
	}
	if e.seq == e.acked {
		e.waiting = false
		return worked
	}
	// Descriptors await their acknowledgement: watch for silence.
	if !e.waiting {
		e.waiting, e.since = true, time.Time{}
	}
	switch {
	case l.pair.retriedRNR() == e.acked+1 && q.cfg.RNRRetry == 7:
		// A live responder answering "not ready" is no silence: with
		// RNR retries unlimited, only the connection's loss ends this.
		e.since = c.now()
	case l.pair.progress() != e.progress:
		e.progress, e.since = l.pair.progress(), c.now()
	case e.since.IsZero():
		// The clock is read when an acknowledgement is first found
		// missing, not at every post.
		e.since = c.now()
	case c.now().Sub(e.since) >= e.budget(l):
		e.fail(verbs.StatusRetryExceeded, fmt.Errorf("shm: qp %d: peer %s qp %d did not acknowledge within %v", q.num, l.peerAddr, l.peerQPN, e.budget(l)))
		return true
	}
	return worked
}

// advance takes acknowledgements, completes the requests they cover and
// executes requests up to the first that must wait. With full unset (a
// poster or poller), it never blocks and fails nothing: a request it
// cannot finish (large, a SEND, a failure, a memory file to fetch) is left
// to the engine, which it wakes. The caller holds the requester role and
// has checked that the link is up and the peer attached.
func (e *engine) advance(l *link, c *clock, full bool) (worked bool) {
	q := e.q
	ack, status := l.pair.acked()
	if ack != e.acked {
		if !seqLE(e.acked, ack) || !seqLE(ack, e.seq) {
			if full {
				e.fail(verbs.StatusRetryExceeded, fmt.Errorf("%w: acknowledgement %d while %d..%d are due", errProtocol, ack, e.acked+1, e.seq))
			} else {
				e.wake()
			}
			return true
		}
		if verbs.Status(status) != verbs.StatusSuccess {
			if full {
				e.refused(ack, verbs.Status(status))
			} else {
				e.wake()
			}
			return true
		}
		e.acked, e.since, worked = ack, time.Time{}, true
	}
	tail := q.sq.tail.Load()
	worked = e.completeAcked() || worked
	if e.failing {
		if full && q.sq.head.Load() == e.next {
			e.fail(e.failSt, e.failErr)
			return true
		}
		return worked
	}
	posted := false
	for e.next != tail {
		if e.blocked && !seqLE(e.blockSeq, e.acked) {
			break // behind a request the responder might refuse
		}
		e.blocked = false
		s := q.sq.slot(e.next)
		if !full && s.total > inlineMax {
			e.wake()
			break
		}
		if s.op != verbs.OpWrite && e.seq-e.acked >= ringSlots {
			break // the ring is full until the responder catches up
		}
		if s.op == verbs.OpSend {
			if e.sendChunk(l, s) {
				posted, worked = true, true
			}
			if e.failing {
				break
			}
			continue
		}
		total, st := e.gather(s)
		var err error
		if st == verbs.StatusSuccess {
			var dst []byte
			var m *mapping
			dst, m, st, err = e.remote(l, s.rkey, s.raddr, total, c, full)
			if st == verbs.StatusSuccess {
				off := 0
				for _, src := range e.srcs {
					off += copy(dst[off:], src)
				}
				m.release()
			}
		}
		if st != verbs.StatusSuccess {
			if !full {
				e.wake()
			} else if e.stopMode.Load() == 0 {
				// A fetch interrupted by a stop is not a failure: the
				// QP leaves RTS and flushes the request.
				e.failing, e.failSt, e.failErr = true, st, err
				worked = true
			}
			break
		}
		if s.op == verbs.OpWriteImm {
			safe := int32(l.pair.peerRecvsPosted()-e.recvsUsed) > 0
			e.publish(l, desc{op: descImm, imm: s.imm, total: uint32(total)})
			e.recvsUsed++
			posted = true
			if !safe {
				e.blocked, e.blockSeq = true, e.seq
			}
		}
		s.need = e.seq
		e.next++
		worked = true
	}
	if posted {
		// One doorbell for the whole batch.
		l.ringPeer()
	}
	// WRITEs with nothing outstanding before them are done already.
	e.completeAcked()
	if e.failing && full && q.sq.head.Load() == e.next {
		e.fail(e.failSt, e.failErr)
	}
	return worked
}

// awaitingAck reports whether the request at the execution pointer waits
// for an acknowledgement, whose doorbell will rouse whoever executes it.
func (e *engine) awaitingAck() bool {
	if e.blocked && !seqLE(e.blockSeq, e.acked) {
		return true
	}
	return e.q.sq.slot(e.next).op != verbs.OpWrite && e.seq-e.acked >= ringSlots
}

// refused handles an acknowledgement of descriptor seq with a failure:
// the requests before it were placed and complete, the one it belongs to
// fails with the status, and everything behind it is flushed.
func (e *engine) refused(seq uint32, st verbs.Status) {
	switch st {
	case verbs.StatusRNRRetryExceeded, verbs.StatusRemoteAccess, verbs.StatusRemoteInvalidRequest:
	default:
		e.fail(verbs.StatusFatal, fmt.Errorf("%w: acknowledgement with status %d", errProtocol, st))
		return
	}
	e.acked = seq - 1
	e.completeAcked()
	e.fail(st, nil)
}

// completeAcked completes the executed requests whose descriptors are
// all acknowledged, in order.
func (e *engine) completeAcked() bool {
	q := e.q
	worked := false
	for head := q.sq.head.Load(); head != e.next && seqLE(q.sq.slot(head).need, e.acked); head++ {
		e.complete(q.sq.slot(head))
		worked = true
	}
	return worked
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

// sendChunk moves the SEND at the execution pointer on: once its previous
// chunk is acknowledged it stages and publishes the next one, or, when
// all are, retires it from execution. It reports whether it did either.
func (e *engine) sendChunk(l *link, s *sendSlot) bool {
	if e.chunkOut {
		// The gate in advance let us through: the chunk is acknowledged.
		e.sendOff += uint64(e.chunk)
		e.chunkOut = false
		if e.sendOff >= s.total {
			s.need, e.sendOff = e.seq, 0
			e.next++
			return true
		}
	}
	total, st := e.gather(s)
	if st != verbs.StatusSuccess {
		e.failing, e.failSt, e.failErr = true, st, nil
		return true
	}
	n := min(total-e.sendOff, stagingSize)
	stage := l.pair.staging(l.pair.side)[:n]
	skip, pos := e.sendOff, 0
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
	if e.sendOff == 0 {
		e.recvsUsed++
	}
	e.chunk, e.chunkOut = uint32(n), true
	e.publish(l, desc{op: descSend, len: uint32(n), total: uint32(total), off: uint32(e.sendOff)})
	e.blocked, e.blockSeq = true, e.seq
	return true
}

// publish writes the next descriptor into the ring; the caller rings the
// peer once it has published what it will.
func (e *engine) publish(l *link, d desc) {
	if e.seq == e.acked {
		// The first descriptor outstanding: silence counts from now, and
		// the responder's progress counter from its current value.
		e.progress, e.since = l.pair.progress(), time.Time{}
	}
	e.seq++
	l.pair.postRequest(e.seq, d)
}

// complete retires the head request successfully. The slot is freed
// before its completion is out: a poster that reuses the slot as soon as
// it sees the completion must not find the queue still full.
func (e *engine) complete(s *sendSlot) {
	q := e.q
	signaled := s.flags&verbs.Signaled != 0
	wc := verbs.WC{ID: s.id, Status: verbs.StatusSuccess, Opcode: s.op, ByteLen: uint32(s.total), QPN: q.num}
	q.sq.head.Add(1)
	if signaled {
		q.sendCQ.Push(wc)
	}
}

// fail completes the head request with st, moves the QP to ERR, flushes
// everything else and closes the connection; the engine then exits.
func (e *engine) fail(st verbs.Status, cause error) {
	q := e.q
	// The engine holds the requester role; the flush needs the responder
	// role too. Both stay locked: the engine exits.
	for !e.respBusy.CompareAndSwap(false, true) {
		runtime.Gosched()
	}
	if l := q.link.Load(); l != nil {
		l.pair.cancel()
	}
	q.setState(verbs.StateErr)
	var id uint64
	if h := q.sq.head.Load(); h != q.sq.tail.Load() {
		s := q.sq.slot(h)
		id = s.id
		wc := verbs.WC{ID: s.id, Status: st, Opcode: s.op, QPN: q.num}
		q.sq.head.Add(1) // freed before it is seen, as in complete
		q.sendCQ.Push(wc)
	}
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
		slog.Debug("shm: request failed", "qp", q.num, "wr", id, "status", st, "err", cause)
	}
	e.exited = true
}
