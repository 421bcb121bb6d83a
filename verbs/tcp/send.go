package tcp

import (
	"fmt"
	"time"

	"github.com/rdmacell/rdmacell/verbs"
)

// Batching: the sender gathers up to maxBatch frames, or about
// maxBatchBytes of payload, into one writev. The last frame of a batch
// asks for an acknowledgement, so that slots come back even when nothing
// is signaled, without an acknowledgement per frame.
const (
	maxBatch      = 64
	maxBatchBytes = 4 << 20
	// writeChunk bounds one writev, so that progress is recorded while a
	// large request is on its way and a slow but live peer is not taken
	// for a dead one.
	writeChunk = 4 << 20
	// ackDelay bounds how long a lazy acknowledgement waits for a frame
	// to ride with.
	ackDelay = 200 * time.Microsecond
	// nakLinger bounds how long a responder that refused a request waits
	// for its NAK to be read before it closes the connection.
	nakLinger = 2 * time.Second
)

// send is the sender goroutine: it writes control frames for the
// receiver, and the QP's requests straight from registered memory,
// header and payload in one writev per batch.
func (l *link) send() {
	defer l.wg.Done()
	q := l.qp
	flushLazy := false
	for {
		q.mu.Lock()
		if l.dead.Load() {
			q.mu.Unlock()
			l.finish()
			return
		}
		start, end, pressed := q.takeBatchLocked()
		q.mu.Unlock()
		if start == end && !flushLazy {
			switch l.controlState() {
			case ctlNone:
				select {
				case <-l.kick:
				case <-l.closing:
					return
				}
				continue
			case ctlLazy:
				if !l.ackArmed {
					l.ackTimer.Reset(ackDelay)
					l.ackArmed = true
				}
				select {
				case <-l.kick:
				case <-l.ackTimer.C:
					l.ackArmed = false
					flushLazy = true
				case <-l.closing:
					return
				}
				continue
			}
		}
		flushLazy = false
		vec := l.vec[:0]
		if n, _ := l.takeControl(l.ctlBuf[:]); n > 0 {
			vec = append(vec, l.ctlBuf[:n])
			if l.ackArmed {
				l.ackTimer.Stop()
				l.ackArmed = false
			}
		}
		for seq := start; seq < end; seq++ {
			s := q.sq.slot(seq)
			h := header{psn: q.psnOf(seq), length: s.length}
			switch s.op {
			case verbs.OpWrite:
				h.typ, h.rkey, h.raddr = frameWrite, s.rkey, s.raddr
			case verbs.OpWriteImm:
				h.typ, h.rkey, h.raddr, h.imm = frameWriteImm, s.rkey, s.raddr, s.imm
			default:
				h.typ = frameSend
			}
			switch {
			case s.signaled || (seq == end-1 && pressed):
				h.flags = flagAckReq
			case seq == end-1:
				h.flags = flagAckLazy
			}
			encodeHeader(s.hdr[:], &h)
			vec = append(vec, s.hdr[:])
			vec = append(vec, s.bufs...)
		}
		if len(vec) == 0 {
			continue
		}
		l.vec = vec
		if err := l.write(vec); err != nil {
			if !l.dead.Load() {
				q.connLost(l, fmt.Errorf("%w: qp %d: write to %s: %w", ErrConnLost, q.qpn, l.peer, err))
			}
			return
		}
	}
}

// takeBatchLocked moves the next batch of requests from waiting to in
// flight and returns their sequence range. It stops before a request with
// a local error, which is never sent. pressed says the send queue is at
// least half full, so slots should come back soon.
func (q *QP) takeBatchLocked() (start, end uint64, pressed bool) {
	start, end = q.sq.sent, q.sq.sent
	var bytes uint64
	for end < q.sq.tail && end-start < maxBatch && bytes < maxBatchBytes {
		s := q.sq.slot(end)
		if s.status != verbs.StatusSuccess {
			break
		}
		bytes += uint64(s.length)
		end++
	}
	q.sq.sent = end
	return start, end, 2*(q.sq.tail-q.sq.head) >= uint64(len(q.sq.slots))
}

// write writes vec in writevs of at most writeChunk bytes, recording
// progress after each. It allocates nothing: nb is a field and its backing
// array is reused.
func (l *link) write(vec [][]byte) error {
	for len(vec) > 0 {
		nb := l.nbBack[:0]
		n := 0
		for len(vec) > 0 && n < writeChunk {
			b := vec[0]
			if room := writeChunk - n; len(b) > room {
				nb = append(nb, b[:room])
				vec[0] = b[room:]
				n = writeChunk
				break
			}
			nb = append(nb, b)
			n += len(b)
			vec = vec[1:]
		}
		l.nb = nb
		if _, err := l.nb.WriteTo(l.conn); err != nil {
			return err
		}
		l.qp.touch()
	}
	return nil
}

// finish ends the sender of a link the QP has left. If the receiver
// refused a request, write the NAK saying so and half-close, so the peer
// reads it before the end of the stream; other control frames are moot.
func (l *link) finish() {
	n, nak := l.takeControl(l.ctlBuf[:])
	if !nak {
		return
	}
	_ = l.conn.SetWriteDeadline(time.Now().Add(nakLinger))
	l.vec = append(l.vec[:0], l.ctlBuf[:n])
	_ = l.write(l.vec)
	if cw, ok := l.conn.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
}
