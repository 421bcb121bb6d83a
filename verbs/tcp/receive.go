package tcp

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/rdmacell/rdmacell/verbs"
	"github.com/rdmacell/rdmacell/verbs/internal/soft"
)

const (
	// readChunk bounds one read of payload, so that progress is recorded
	// while a large request arrives.
	readChunk = 4 << 20
	// rnrNotice is how often a responder waiting for a receive tells the
	// requester it is alive, so the requester's ack timer does not fire.
	rnrNotice = 5 * time.Millisecond
)

// receive is the receiver goroutine. As responder it checks each request
// against the registered regions before it reads a byte of payload, and
// reads the payload straight into the target memory; as requester it
// takes acknowledgements. Anything malformed ends the connection.
func (l *link) receive() {
	defer l.wg.Done()
	q := l.qp
	for {
		if err := l.rd.readHeader(); err != nil {
			l.readFailed(err)
			return
		}
		q.touch()
		h, err := decodeHeader(l.rd.hdr[:])
		if err != nil {
			l.protocolError(err)
			return
		}
		var ok bool
		switch h.typ {
		case frameAck:
			ok = l.onAck(h.psn)
		case frameNak:
			l.onNak(&h)
			return
		case frameRNR:
			ok = l.onRNR(h.psn)
		case frameBye:
			l.onBye()
			return
		default:
			ok = l.serve(&h)
		}
		if !ok {
			return
		}
	}
}

// readFailed ends the link after a read error: the peer closed or reset
// the connection, or the kernel gave up on it. If the QP already left the
// link, the error is the link's shutdown and means nothing. A read that
// timed out after a write failed (see writeFailed) ends with the write's
// error: no goodbye came to explain it.
func (l *link) readFailed(err error) {
	if l.dead.Load() {
		return
	}
	if werr := l.writeErr.Load(); werr != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		l.qp.connLost(l, *werr)
		return
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		err = fmt.Errorf("peer closed the connection: %w", err)
	}
	l.qp.connLost(l, fmt.Errorf("%w: qp %d: read from %s: %w", ErrConnLost, l.qp.qpn, l.peer, err))
}

// onBye ends the link because the peer's QP left it in order: the QP is
// reset or destroyed, which is how a job ends and how the cell engine
// recycles a path. Requests still outstanding fail as for a lost
// connection (the peer will never answer them), but nothing went wrong.
func (l *link) onBye() {
	if l.dead.Load() {
		return
	}
	l.qp.connLost(l, fmt.Errorf("%w: qp %d: %s: %w", ErrConnLost, l.qp.qpn, l.peer, ErrPeerLeft))
}

// protocolError ends the link because the peer broke the protocol.
func (l *link) protocolError(err error) {
	q := l.qp
	err = fmt.Errorf("qp %d: frame from %s: %w", q.qpn, l.peer, err)
	if !l.dead.Load() {
		q.d.warn.logAt(slog.LevelError, q.source(), "tcp: closing connection after a malformed frame", "qpn", q.qpn, "peer", l.peer, "err", err)
	}
	q.connFailed(l, err)
}

func (l *link) onAck(psn uint32) bool {
	q := l.qp
	q.mu.Lock()
	if l.dead.Load() {
		q.mu.Unlock()
		return false
	}
	seq, ok := q.seqOf(psn)
	if ok {
		q.completeLocked(seq + 1)
		q.failLocalLocked()
	}
	q.mu.Unlock()
	if !ok {
		l.protocolError(fmt.Errorf("%w: ACK for psn %d, which is not in flight", ErrProtocol, psn))
	}
	return ok
}

func (l *link) onRNR(psn uint32) bool {
	q := l.qp
	q.mu.Lock()
	_, ok := q.seqOf(psn)
	if ok && !l.dead.Load() {
		q.rnrWait = true
	}
	q.mu.Unlock()
	if !ok {
		l.protocolError(fmt.Errorf("%w: RNR notice for psn %d, which is not in flight", ErrProtocol, psn))
	}
	return ok
}

// onNak fails the QP as the peer's NAK says: requests before the NAK'd one
// were placed, the NAK'd one fails with the NAK's status, the rest flush.
func (l *link) onNak(h *header) {
	q := l.qp
	q.mu.Lock()
	seq, ok := q.seqOf(h.psn)
	if !ok {
		q.mu.Unlock()
		l.protocolError(fmt.Errorf("%w: NAK for psn %d, which is not in flight", ErrProtocol, h.psn))
		return
	}
	s := q.sq.slot(seq)
	err := fmt.Errorf("%w: qp %d: %s refused %s wr %d: %s", ErrRemote, q.qpn, l.peer, s.op, s.id, h.status)
	if !q.enterErrLocked(l, err) {
		q.mu.Unlock()
		return
	}
	q.failSendsLocked(seq, h.status)
	q.flushRecvsLocked()
	q.mu.Unlock()
	l.shutdown()
	q.d.warn.warn(q.source(), "tcp: request refused by peer", "qpn", q.qpn, "peer", l.peer, "err", err)
}

// serve executes one request of the peer.
func (l *link) serve(h *header) bool {
	q := l.qp
	if h.psn != l.expect {
		l.protocolError(fmt.Errorf("%w: %s with psn %d, want %d", ErrProtocol, h.typ, h.psn, l.expect))
		return false
	}
	switch h.typ {
	case frameWrite, frameWriteImm:
		var dst []byte
		var mr *soft.MR
		// A zero-length WRITE touches no memory; as in the IB spec its
		// rkey and address are not checked.
		if h.length > 0 {
			var st verbs.Status
			dst, mr, st = q.pd.mrs.Remote(h.rkey, h.raddr, uint64(h.length), verbs.AccessRemoteWrite)
			if st != verbs.StatusSuccess {
				l.refuse(h, verbs.StatusRemoteAccess, verbs.StatusSuccess,
					fmt.Sprintf("%s of %d bytes at %#x under rkey %#x is outside the registered regions with remote write access", h.typ, h.length, h.raddr, h.rkey))
				return false
			}
		}
		if h.typ == frameWriteImm && !l.takeRecv(h) {
			return false
		}
		if err := l.readPayload(dst, true); err != nil {
			l.readFailed(err)
			return false
		}
		held := l.placed(h)
		if h.typ == frameWriteImm {
			l.completeReq(verbs.WC{Opcode: verbs.OpRecvWriteImm, Flags: verbs.WCWithImm, Imm: h.imm, ByteLen: h.length}, held)
		} else if mr != nil {
			mr.Landed()
		}
	case frameSend:
		if !l.takeRecv(h) {
			return false
		}
		if !l.scatter(h) {
			return false
		}
		l.completeReq(verbs.WC{Opcode: verbs.OpRecv, ByteLen: h.length}, l.placed(h))
	}
	return true
}

// placed records that request h is executed, its data in place, and
// queues the acknowledgement it asks for (see ack.go): before its
// receive completes, so that the consumer the completion wakes may
// answer with the acknowledgement behind its answer. It reports whether
// the acknowledgement is held, in which case the caller completes the
// receive through completeHeld.
func (l *link) placed(h *header) bool {
	l.expect++
	switch {
	case h.flags&flagAckReq == 0:
		if h.flags&flagAckLazy != 0 {
			l.queueAck(h.psn, ackLazy)
		}
		return false
	case h.typ == frameWrite:
		l.queueAck(h.psn, ackUrgent)
		return false
	}
	return l.queueAck(h.psn, ackHeld)
}

// scatter reads a SEND's payload into the buffers of the held receive.
func (l *link) scatter(h *header) bool {
	q := l.qp
	bufs := l.rbufs[:0]
	var room uint64
	for _, sge := range q.held.SGL {
		b, st := q.pd.mrs.Local(sge, true)
		if st != verbs.StatusSuccess {
			l.refuse(h, verbs.StatusRemoteInvalidRequest, verbs.StatusLocalProtection,
				fmt.Sprintf("receive wr %d: lkey %#x no longer names local writable memory", q.held.ID, sge.LKey))
			return false
		}
		bufs = append(bufs, b)
		room += uint64(len(b))
	}
	l.rbufs = bufs
	if room < uint64(h.length) {
		l.refuse(h, verbs.StatusRemoteInvalidRequest, verbs.StatusLocalLength,
			fmt.Sprintf("SEND of %d bytes does not fit receive wr %d of %d bytes", h.length, q.held.ID, room))
		return false
	}
	left := int(h.length)
	for _, b := range bufs {
		if left == 0 {
			break
		}
		n := min(left, len(b))
		if err := l.readPayload(b[:n], n == left); err != nil {
			l.readFailed(err)
			return false
		}
		left -= n
	}
	return true
}

// readPayload reads len(dst) bytes into dst, recording progress per
// chunk; last says dst ends the frame.
func (l *link) readPayload(dst []byte, last bool) error {
	soft.RaceSync()
	for len(dst) > 0 {
		n := min(len(dst), readChunk)
		if err := l.rd.fill(dst[:n], last && n == len(dst)); err != nil {
			return err
		}
		l.qp.touch()
		dst = dst[n:]
	}
	return nil
}

// takeRecv takes the next posted receive for request h into q.held. With
// none posted it emulates RNR: it waits up to MinRNRTimer × the peer's RNR
// retry count (forever for 7) for one, telling the peer it is alive
// meanwhile, and then refuses the request with StatusRNRRetryExceeded.
func (l *link) takeRecv(h *header) bool {
	q := l.qp
	forever := l.rnrRetry == 7
	var deadline time.Time
	for first := true; ; first = false {
		// A requester that gave up while we waited has flushed the
		// request: its bytes are still in our socket, but executing them
		// now, into a receive posted after the flush, would be a late
		// copy. An RNIC would simply never see the request again.
		if !first && l.rd.peerGone() {
			l.qp.connLost(l, fmt.Errorf("%w: qp %d: %s closed the connection while psn %d waited for a receive", ErrConnLost, q.qpn, l.peer, h.psn))
			return false
		}
		q.mu.Lock()
		if l.dead.Load() {
			q.mu.Unlock()
			return false
		}
		ok := q.rq.Take(0, &q.held)
		q.holding = ok
		q.mu.Unlock()
		if ok {
			return true
		}
		now := time.Now()
		if first {
			deadline = now.Add(q.cfg.minRNR * time.Duration(l.rnrRetry))
		}
		if !forever && !now.Before(deadline) {
			l.refuse(h, verbs.StatusRNRRetryExceeded, verbs.StatusSuccess,
				fmt.Sprintf("%s found no receive posted within %d RNR retries", h.typ, l.rnrRetry))
			return false
		}
		l.queueRNR(h.psn)
		// Not reading while we wait is our choice, not the peer's silence.
		q.touch()
		wait := rnrNotice
		if !forever {
			wait = min(wait, deadline.Sub(now))
		}
		l.rnrTimer.Reset(wait)
		select {
		case <-q.recvPosted:
		case <-l.rnrTimer.C:
		case <-l.closing:
		}
		l.rnrTimer.Stop()
	}
}

// completeReq completes the receive a request consumed, through
// completeHeld if its acknowledgement is held.
func (l *link) completeReq(wc verbs.WC, held bool) {
	if held {
		l.completeHeld(wc)
	} else {
		l.completeRecv(wc)
	}
}

// completeRecv completes the held receive, unless a flush already did.
func (l *link) completeRecv(wc verbs.WC) {
	q := l.qp
	q.mu.Lock()
	if q.holding && !l.dead.Load() {
		q.holding = false
		wc.ID, wc.QPN = q.held.ID, q.qpn
		q.recvCQ.Push(wc)
	}
	q.mu.Unlock()
}

// refuse rejects request h of the peer: the sender writes a NAK with
// status remote and half-closes, and the receiver discards what the peer
// still sends until the peer closes. The target memory is untouched:
// refuse runs before any payload is read. If the request held a receive
// that fails here (local is not success), the QP moves to StateErr;
// otherwise, as on an RNIC, the responder's QP stays as it is and only
// loses its connection (see connLost).
func (l *link) refuse(h *header, remote, local verbs.Status, why string) {
	q := l.qp
	err := fmt.Errorf("%w: qp %d: psn %d from %s: %s", ErrResponder, q.qpn, h.psn, l.peer, why)
	q.mu.Lock()
	if q.link != l || l.dead.Load() {
		q.mu.Unlock()
		return
	}
	// Queued under q.mu, before the link is marked dead: a sender that sees
	// the link dead finds the NAK too.
	l.queueNak(h.psn, remote)
	sendSt := verbs.StatusRetryExceeded
	if q.holding && local != verbs.StatusSuccess {
		q.holding = false
		op := verbs.OpRecv
		if h.typ == frameWriteImm {
			op = verbs.OpRecvWriteImm
		}
		q.recvCQ.Push(verbs.WC{ID: q.held.ID, Status: local, Opcode: op, QPN: q.qpn})
		sendSt = verbs.StatusWRFlush
	}
	if local == verbs.StatusSuccess && q.sq.idle() && !q.holding {
		q.loseLinkLocked(l, err)
	} else if q.enterErrLocked(l, err) {
		q.failSendsLocked(q.sq.head, sendSt)
		q.flushRecvsLocked()
	}
	q.mu.Unlock()
	// The link is dead now: the sender writes the NAK and half-closes.
	l.wake()
	q.d.warn.warn(q.source(), "tcp: refused a request of the peer", "qpn", q.qpn, "peer", l.peer, "err", err)
	_ = l.conn.SetReadDeadline(time.Now().Add(nakLinger))
	_, _ = io.Copy(io.Discard, l.conn)
	l.shutdown()
}
