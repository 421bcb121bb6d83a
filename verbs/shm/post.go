package shm

import (
	"fmt"

	"github.com/rdmacell/rdmacell/verbs"
)

// PostSend implements verbs.QP. It copies each request into the send
// queue; a small request with nothing queued before it is executed at
// once in the caller's goroutine, anything else is left to the engine.
// It neither blocks nor allocates. Local elements are checked when the
// request is executed: a bad lkey or range completes it with
// StatusLocalProtection.
func (q *QP) PostSend(wr *verbs.SendWR) (*verbs.SendWR, error) {
	posted, bad, err := q.enqueue(wr)
	if !posted {
		return bad, err
	}
	if e := q.running.Load(); e != nil && e.reqBusy.CompareAndSwap(false, true) {
		if e.stopMode.Load() == 0 {
			var c clock
			e.fast(q.link.Load(), &c)
		}
		// Requests executed but not yet acknowledged need no engine,
		// nor do requests waiting behind an acknowledgement: the
		// acknowledgement rings the doorbell.
		left := e.failing || e.next != q.sq.tail.Load() && !e.awaitingAck()
		e.reqBusy.Store(false)
		if !left {
			return bad, err
		}
	}
	// The kick touches the pair segment: do it while the QP is known to
	// be live.
	q.sqMu.Lock()
	if !q.gone.Load() && q.State() == verbs.StateRTS {
		q.kickHard()
	}
	q.sqMu.Unlock()
	return bad, err
}

// enqueue copies the chain into the send queue.
func (q *QP) enqueue(wr *verbs.SendWR) (posted bool, bad *verbs.SendWR, err error) {
	q.sqMu.Lock()
	defer q.sqMu.Unlock()
	for ; wr != nil; wr = wr.Next {
		if err = q.checkSend(wr); err != nil {
			break
		}
		tail := q.sq.tail.Load()
		if tail-q.sq.head.Load() >= uint64(len(q.sq.slots)) {
			err = fmt.Errorf("%w: qp %d: send wr %d: %d requests outstanding", verbs.ErrQueueFull, q.num, wr.ID, len(q.sq.slots))
			break
		}
		q.sq.slot(tail).put(wr, sgeLen(wr.SGL))
		q.sq.tail.Store(tail + 1)
		posted = true
	}
	if err != nil {
		return posted, wr, err
	}
	return posted, nil, nil
}

func (q *QP) checkSend(wr *verbs.SendWR) error {
	if q.gone.Load() {
		return fmt.Errorf("shm: qp %d: %w", q.num, verbs.ErrClosed)
	}
	if st := q.State(); st != verbs.StateRTS {
		return fmt.Errorf("%w: qp %d is %v, posting sends needs RTS", verbs.ErrInvalidState, q.num, st)
	}
	switch {
	case wr.Opcode != verbs.OpWrite && wr.Opcode != verbs.OpWriteImm && wr.Opcode != verbs.OpSend:
		return fmt.Errorf("%w: qp %d: send wr %d has opcode %v", verbs.ErrInvalidArgument, q.num, wr.ID, wr.Opcode)
	case len(wr.SGL) > q.cfg.MaxSGE:
		return fmt.Errorf("%w: qp %d: send wr %d has %d SGEs, QP allows %d", verbs.ErrInvalidArgument, q.num, wr.ID, len(wr.SGL), q.cfg.MaxSGE)
	case wr.Flags&^(verbs.Signaled|verbs.Relaxed) != 0:
		return fmt.Errorf("%w: qp %d: send wr %d has unknown flags %#x", verbs.ErrInvalidArgument, q.num, wr.ID, wr.Flags)
	case sgeLen(wr.SGL) > maxMessage:
		return fmt.Errorf("%w: qp %d: send wr %d of %d bytes, at most %d", verbs.ErrInvalidArgument, q.num, wr.ID, sgeLen(wr.SGL), maxMessage)
	}
	return nil
}

func sgeLen(sgl []verbs.SGE) uint64 {
	var n uint64
	for i := range sgl {
		n += uint64(sgl[i].Length)
	}
	return n
}

// PostRecv implements verbs.QP. Receives may be posted from INIT on; on a
// QP in ERR they complete at once with StatusWRFlush.
func (q *QP) PostRecv(wr *verbs.RecvWR) (*verbs.RecvWR, error) {
	q.rqMu.Lock()
	defer q.rqMu.Unlock()
	if q.gone.Load() {
		return wr, fmt.Errorf("shm: qp %d: %w", q.num, verbs.ErrClosed)
	}
	switch st := q.State(); st {
	case verbs.StateReset:
		return wr, fmt.Errorf("%w: qp %d is %v, posting receives needs INIT or later", verbs.ErrInvalidState, q.num, st)
	case verbs.StateErr:
		for ; wr != nil; wr = wr.Next {
			if len(wr.SGL) > q.cfg.MaxSGE {
				return wr, fmt.Errorf("%w: qp %d: receive wr %d has %d SGEs, QP allows %d", verbs.ErrInvalidArgument, q.num, wr.ID, len(wr.SGL), q.cfg.MaxSGE)
			}
			q.recvCQ.Push(verbs.WC{ID: wr.ID, Status: verbs.StatusWRFlush, Opcode: verbs.OpRecv, QPN: q.num})
		}
		return nil, nil
	}
	bad, err := q.rq.Post(wr, nil)
	for ; wr != bad; wr = wr.Next {
		q.recvsPosted++
	}
	if l := q.link.Load(); l != nil {
		// The peer's requester pipelines WRITE_WITH_IMMs against this
		// count (see request.go).
		l.pair.setRecvsPosted(q.recvsPosted)
	}
	q.kick()
	if err != nil {
		return bad, fmt.Errorf("shm: qp %d: %w", q.num, err)
	}
	return nil, nil
}
