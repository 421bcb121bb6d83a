package tcp

import (
	"fmt"

	"github.com/rdmacell/rdmacell/verbs"
	"github.com/rdmacell/rdmacell/verbs/internal/soft"
)

// sendSlot is one posted send request, copied out of the caller's SendWR
// at post time (as an RNIC copies a WQE) so the caller may reuse it at
// once. Slots, their header buffers and their buffer lists are allocated
// with the queue, so posting and sending do not allocate.
type sendSlot struct {
	id       uint64
	op       verbs.Opcode
	signaled bool
	relaxed  bool         // its acknowledgement may come lazily
	status   verbs.Status // a local error found at post time, else success
	raddr    uint64
	rkey     uint32
	imm      uint32
	length   uint32
	bufs     [][]byte // the gathered local memory, resolved at post time
	hdr      [headerLen]byte
}

// sendQueue is a ring of slots indexed by sequence numbers that only grow:
// [head, sent) are on the wire awaiting acknowledgement, [sent, tail) wait
// for the sender. A request's PSN is the QP's initial PSN plus its
// sequence number.
type sendQueue struct {
	slots            []sendSlot
	head, sent, tail uint64
}

func newSendQueue(depth, maxSGE int) sendQueue {
	q := sendQueue{slots: make([]sendSlot, depth)}
	for i := range q.slots {
		q.slots[i].bufs = make([][]byte, 0, maxSGE)
	}
	return q
}

func (s *sendQueue) slot(seq uint64) *sendSlot { return &s.slots[seq%uint64(len(s.slots))] }
func (s *sendQueue) idle() bool                { return s.head == s.tail }
func (s *sendQueue) reset()                    { s.head, s.sent, s.tail = 0, 0, 0 }

// PostSend implements verbs.QP. It validates each request and copies it
// into the send queue; small frames it then writes itself when the socket
// takes them without waiting, anything else is left to the sender
// goroutine. It never waits for the network.
func (q *QP) PostSend(wr *verbs.SendWR) (*verbs.SendWR, error) {
	soft.RaceSync()
	q.mu.Lock()
	if q.state != verbs.StateRTS {
		st := q.state
		q.mu.Unlock()
		return wr, fmt.Errorf("%w: post send on qp %d in state %s, want RTS", verbs.ErrInvalidState, q.qpn, st)
	}
	wasIdle := q.sq.idle()
	tail := q.sq.tail
	l := q.link
	// Write inline only what answers a request or starts an exchange:
	// with requests streaming (several unacknowledged on the wire) the
	// sender goroutine batches them into fewer, larger writevs, where a
	// writev per post would cost a system call per request.
	inline := q.sq.sent-q.sq.head <= inlineInFlight
	var err error
	for ; wr != nil; wr = wr.Next {
		if err = q.checkSendLocked(wr); err != nil {
			break
		}
		q.enqueueLocked(wr)
	}
	if q.sq.tail != tail {
		if wasIdle {
			// The peer owes us nothing yet: the ack budget starts now.
			q.touch()
		}
		q.armLocked()
		q.failLostLocked()
		q.failLocalLocked()
	}
	posted := q.sq.tail != tail
	corked := q.corked
	q.mu.Unlock()
	switch {
	case !posted || l == nil || corked:
	case inline:
		// Written from this goroutine when the socket takes it at once:
		// no hand-off to the sender on the way to the wire.
		l.post()
	default:
		l.wake()
	}
	return wr, err
}

// Cork implements verbs.Corker: requests posted until Uncork are queued,
// not written.
func (q *QP) Cork() {
	q.mu.Lock()
	q.corked = true
	q.mu.Unlock()
}

// Uncork implements verbs.Corker: what was posted since Cork goes to the
// wire, written from this goroutine when the socket takes it at once, else
// by the sender goroutine. Unlike PostSend it writes inline even while
// requests stream: the cork has already gathered them into one writev,
// which is what leaving them to the sender would have bought, and a
// hand-off to the sender waits for this goroutine to let go of its
// processor where a rank has one.
func (q *QP) Uncork() {
	q.mu.Lock()
	if !q.corked {
		q.mu.Unlock()
		return
	}
	q.corked = false
	pending := q.sq.sent != q.sq.tail && q.state == verbs.StateRTS
	l := q.link
	q.mu.Unlock()
	if pending && l != nil {
		l.post()
	}
}

func (q *QP) checkSendLocked(wr *verbs.SendWR) error {
	switch wr.Opcode {
	case verbs.OpWrite, verbs.OpWriteImm, verbs.OpSend:
	default:
		return fmt.Errorf("%w: qp %d: send wr %d has opcode %s", verbs.ErrInvalidArgument, q.qpn, wr.ID, wr.Opcode)
	}
	if len(wr.SGL) > q.cfg.maxSGE {
		return fmt.Errorf("%w: qp %d: send wr %d has %d SGEs, QP allows %d", verbs.ErrInvalidArgument, q.qpn, wr.ID, len(wr.SGL), q.cfg.maxSGE)
	}
	if wr.Flags&^(verbs.Signaled|verbs.Relaxed) != 0 {
		return fmt.Errorf("%w: qp %d: send wr %d has unknown flags %#x", verbs.ErrInvalidArgument, q.qpn, wr.ID, wr.Flags)
	}
	if q.sq.tail-q.sq.head == uint64(len(q.sq.slots)) {
		return fmt.Errorf("%w: qp %d: %d sends outstanding", verbs.ErrQueueFull, q.qpn, len(q.sq.slots))
	}
	return nil
}

// enqueueLocked copies wr into the next slot. Local errors do not fail the
// post: as on an RNIC they fail the request, in order, with a completion.
func (q *QP) enqueueLocked(wr *verbs.SendWR) {
	s := q.sq.slot(q.sq.tail)
	q.sq.tail++
	s.id, s.op, s.signaled = wr.ID, wr.Opcode, wr.Flags&verbs.Signaled != 0
	s.relaxed = wr.Flags&verbs.Relaxed != 0
	s.raddr, s.rkey, s.imm = wr.RemoteAddr, wr.RKey, wr.Imm
	if wr.Opcode == verbs.OpSend {
		s.raddr, s.rkey = 0, 0
	}
	if wr.Opcode != verbs.OpWriteImm {
		s.imm = 0
	}
	s.status = verbs.StatusSuccess
	s.bufs = s.bufs[:0]
	var n uint64
	for _, sge := range wr.SGL {
		b, st := q.pd.mrs.Local(sge, false)
		if st != verbs.StatusSuccess {
			s.status = st
			s.bufs = s.bufs[:0]
			return
		}
		if len(b) > 0 {
			s.bufs = append(s.bufs, b)
		}
		n += uint64(len(b))
	}
	if n > MaxMessageSize {
		s.status = verbs.StatusLocalLength
		s.bufs = s.bufs[:0]
		return
	}
	s.length = uint32(n)
}

// psnOf is the PSN of the request with sequence number seq.
func (q *QP) psnOf(seq uint64) uint32 { return q.psn + uint32(seq) }

// seqOf maps a PSN the peer names to an in-flight sequence number, or
// reports false if no request in flight has it.
func (q *QP) seqOf(psn uint32) (uint64, bool) {
	off := uint64(psn - q.psnOf(q.sq.head))
	if off >= q.sq.sent-q.sq.head {
		return 0, false
	}
	return q.sq.head + off, true
}

func (q *QP) pushSend(s *sendSlot, st verbs.Status) {
	q.sendCQ.Push(verbs.WC{ID: s.id, Status: st, Opcode: s.op, ByteLen: s.length, QPN: q.qpn})
}

// completeLocked completes the requests before upTo as placed by the peer.
func (q *QP) completeLocked(upTo uint64) {
	if upTo > q.sq.head {
		q.rnrWait = false
	}
	for ; q.sq.head < upTo; q.sq.head++ {
		if s := q.sq.slot(q.sq.head); s.signaled {
			q.pushSend(s, verbs.StatusSuccess)
		}
	}
}

// failSendsLocked completes the requests before upTo as placed, the one at
// upTo with status st, and flushes the rest.
func (q *QP) failSendsLocked(upTo uint64, st verbs.Status) {
	q.completeLocked(min(upTo, q.sq.tail))
	for ; q.sq.head < q.sq.tail; q.sq.head++ {
		q.pushSend(q.sq.slot(q.sq.head), st)
		st = verbs.StatusWRFlush
	}
	q.sq.sent = q.sq.tail
	q.rnrWait = false
}

// failLocalLocked fails the QP if the oldest outstanding request carries a
// local error. The sender never sends such a request, so it reaches the
// head once everything before it is acknowledged.
func (q *QP) failLocalLocked() {
	if q.sq.idle() {
		return
	}
	s := q.sq.slot(q.sq.head)
	if s.status == verbs.StatusSuccess {
		return
	}
	l := q.link
	err := fmt.Errorf("tcp: qp %d: send wr %d: %s", q.qpn, s.id, s.status)
	if !q.enterErrLocked(l, err) {
		return
	}
	q.failSendsLocked(q.sq.head, s.status)
	q.flushRecvsLocked()
	if l != nil {
		// shutdown only closes the socket; safe under q.mu.
		l.shutdown()
	}
}

// PostRecv implements verbs.QP. Receives may be posted from StateInit on;
// each SGE must name local memory with local write access.
func (q *QP) PostRecv(wr *verbs.RecvWR) (*verbs.RecvWR, error) {
	soft.RaceSync()
	q.mu.Lock()
	if q.closed || q.state == verbs.StateReset || q.state == verbs.StateErr {
		st := q.state
		q.mu.Unlock()
		return wr, fmt.Errorf("%w: post receive on qp %d in state %s", verbs.ErrInvalidState, q.qpn, st)
	}
	bad, err := q.rq.Post(wr, q.checkRecvFn)
	q.mu.Unlock()
	select {
	case q.recvPosted <- struct{}{}:
	default:
	}
	if err != nil {
		err = fmt.Errorf("tcp: qp %d: %w", q.qpn, err)
	}
	return bad, err
}

func (q *QP) checkRecv(wr *verbs.RecvWR) error {
	for i, sge := range wr.SGL {
		if _, st := q.pd.mrs.Local(sge, true); st != verbs.StatusSuccess {
			return fmt.Errorf("%w: receive wr %d SGE %d (lkey %#x, %#x+%d) is not in a region with local write access",
				verbs.ErrInvalidArgument, wr.ID, i, sge.LKey, sge.Addr, sge.Length)
		}
	}
	return nil
}

// flushRecvsLocked flushes the receive the responder holds, then the
// posted ones, in the order they were posted.
func (q *QP) flushRecvsLocked() {
	if q.holding {
		q.holding = false
		q.recvCQ.Push(verbs.WC{ID: q.held.ID, Status: verbs.StatusWRFlush, Opcode: verbs.OpRecv, QPN: q.qpn})
	}
	q.rq.Flush(q.recvCQ, q.qpn)
}
