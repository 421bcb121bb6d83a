package tcp

import (
	"runtime"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

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
	// ackDelay bounds how long a held acknowledgement waits for an
	// answer when the consumer neither answers nor parks. The runtime's
	// timers on an idle process fire a millisecond late at worst: the
	// network poller sleeps in whole milliseconds.
	ackDelay = 200 * time.Microsecond
	// lazyDelay bounds how long a lazy acknowledgement waits for a frame
	// to ride with. Nobody waits for it but a Relaxed completion, which
	// verbs.RelaxedDelay bounds, and the ack budget, so it is long enough
	// for the next exchange with the peer to take it along even in a job
	// whose ranks outnumber the cores (sixteen ranks on two cores call
	// every few milliseconds); at ackDelay, most went alone there, a
	// third of a rank's writes.
	lazyDelay = verbs.RelaxedDelay / 2
	// nakLinger bounds how long a responder that refused a request waits
	// for its NAK to be read before it closes the connection.
	nakLinger = 2 * time.Second
	// inlineBytes and inlineIov bound what a poster (or the receiver,
	// for an acknowledgement) writes itself: small frames, which the
	// socket buffer takes at once. Larger batches go to the sender
	// goroutine, so posting never waits for the network.
	inlineBytes = 64 << 10
	inlineIov   = 64
	// inlineInFlight is how many requests may be on the wire, not yet
	// acknowledged, for a post to be written inline (see PostSend).
	inlineInFlight = 2
)

// Writing. One goroutine at a time holds the writer role (link.writing)
// and with it the socket's sending side and the buffers below: the
// sender goroutine, or a goroutine writing inline. An inline writer is
// PostSend's caller, or the receiver with an acknowledgement to send; it
// writes only what the socket takes without waiting (a non-blocking
// writev), and leaves anything else, including the unwritten end of a
// partial write, to the sender goroutine. Frames are taken from the send
// queue and encoded only by the role's holder, so they reach the socket
// in PSN order whoever writes them. Goroutines that find the role taken
// record it in link.missed; the holder wakes the sender when it lets go,
// so no frame waits for a kick that was spent while the role was held.

// acquire takes the writer role, or records that a writer was missed.
func (l *link) acquire() bool {
	if l.writing.CompareAndSwap(false, true) {
		return true
	}
	l.missed.Store(true)
	// The holder may have let go between the two: try once more, or it
	// will see missed when it does.
	return l.writing.CompareAndSwap(false, true)
}

// release gives the writer role back and wakes the sender for anything
// a goroutine that missed the role left.
func (l *link) release() {
	l.writing.Store(false)
	if l.missed.Swap(false) {
		l.wake()
	}
}

// post writes what the QP has to send from the calling goroutine when
// that is quick: the role is free, nothing is left over from a partial
// write, and the frames are small. Otherwise, or for what the socket did
// not take, it wakes the sender. It never blocks.
func (l *link) post() {
	if l.raw == nil || l.dead.Load() || !l.acquire() {
		l.wake()
		return
	}
	done, err := l.flush(false)
	l.release()
	if err != nil {
		l.writeFailed(err)
		return
	}
	if !done {
		l.wake()
	}
}

// send is the sender goroutine: it writes what inline writers leave, and
// large requests straight from registered memory, header and payload in
// one writev per batch, blocking as the socket requires.
func (l *link) send() {
	defer l.wg.Done()
	for {
		if l.dead.Load() {
			for !l.writing.CompareAndSwap(false, true) {
				runtime.Gosched() // an inline writer never holds it long
			}
			l.finish()
			return
		}
		if l.acquire() {
			_, err := l.flush(true)
			l.release()
			if err != nil {
				l.writeFailed(err)
				return
			}
		}
		select {
		case <-l.kick:
		case <-l.closing:
			return
		}
	}
}

// flush writes the leftover of a partial write, then the urgent control
// frames and batches of requests, until nothing is left (done). With
// block unset it writes only small batches and only what the socket
// takes at once, and returns with done unset when it leaves anything.
// The caller holds the writer role.
func (l *link) flush(block bool) (done bool, err error) {
	q := l.qp
	if len(l.rest) > 0 {
		if !block {
			return false, nil
		}
		if err := l.write(l.rest); err != nil {
			return false, err
		}
		l.rest = l.rest[:0]
	}
	for {
		if l.dead.Load() {
			return true, nil
		}
		limit := maxBatchBytes
		if !block {
			limit = inlineBytes
		}
		q.mu.Lock()
		start, end, pressed, more := q.takeBatchLocked(limit, block)
		q.mu.Unlock()
		// Control frames go after the requests: the peer reads a
		// request's payload together with the header after it (see
		// reader.fill), so an acknowledgement riding behind a small
		// request costs it no system call of its own.
		vec := l.appendFrames(l.vec[:0], start, end, pressed)
		if n := l.takeControl(l.ctlBuf[:], end > start); n > 0 {
			vec = append(vec, l.ctlBuf[:n])
		}
		l.vec = vec
		if len(vec) == 0 {
			return !more, nil
		}
		l.qp.d.writes.Add(1)
		if end > start {
			l.qp.d.requestWrites.Add(1)
		}
		if block {
			if err := l.write(vec); err != nil {
				return false, err
			}
			continue
		}
		n, err := l.writeNow(vec)
		if err != nil {
			return false, err
		}
		if left := l.keepRest(vec, n); left || more {
			return false, nil
		}
	}
}

// appendFrames appends the headers and payloads of requests [start, end)
// to vec.
func (l *link) appendFrames(vec [][]byte, start, end uint64, pressed bool) [][]byte {
	q := l.qp
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
		case s.signaled && !s.relaxed || (seq == end-1 && pressed):
			h.flags = flagAckReq
		case seq == end-1 || s.relaxed:
			h.flags = flagAckLazy
		}
		encodeHeader(s.hdr[:], &h)
		vec = append(vec, s.hdr[:])
		vec = append(vec, s.bufs...)
	}
	return vec
}

// takeBatchLocked moves the next batch of requests from waiting to in
// flight and returns their sequence range. It stops before a request with
// a local error, which is never sent, and at about limit bytes of
// payload; with whole unset it takes only requests that fit in limit and
// in an inline writev, and more says it left some that will not. pressed
// says the send queue is at least half full, so slots should come back
// soon.
func (q *QP) takeBatchLocked(limit int, whole bool) (start, end uint64, pressed, more bool) {
	start, end = q.sq.sent, q.sq.sent
	var bytes uint64
	iov := 1 // the control frames
	for end < q.sq.tail && end-start < maxBatch && bytes < uint64(limit) {
		s := q.sq.slot(end)
		if s.status != verbs.StatusSuccess {
			break
		}
		if !whole && (bytes+uint64(s.length) > uint64(limit) || iov+1+len(s.bufs) > inlineIov) {
			more = true
			break
		}
		bytes += uint64(s.length)
		iov += 1 + len(s.bufs)
		end++
	}
	q.sq.sent = end
	return start, end, 2*(q.sq.tail-q.sq.head) >= uint64(len(q.sq.slots)), more
}

// write writes vec in writevs of at most writeChunk bytes, blocking as
// needed, and records progress after each. It allocates nothing: nb is a
// field and its backing array is reused.
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

// writeNow writes vec with one non-blocking writev and returns how many
// bytes the socket took. vec has at most inlineIov elements.
func (l *link) writeNow(vec [][]byte) (int, error) {
	l.niov = 0
	for _, b := range vec {
		if len(b) == 0 {
			continue
		}
		l.iov[l.niov].Base = unsafe.SliceData(b)
		l.iov[l.niov].SetLen(len(b))
		l.niov++
	}
	if l.niov == 0 {
		return 0, nil
	}
	l.wn, l.werr = 0, nil
	if err := l.raw.Write(l.wfn); err != nil {
		return 0, err
	}
	if l.werr != nil {
		return 0, l.werr
	}
	if l.wn > 0 {
		l.qp.touch()
	}
	return l.wn, nil
}

// writevFD is the body of raw.Write: it returns true whatever happens,
// so the runtime never waits for the socket to become writable.
func (l *link) writevFD(fd uintptr) bool {
	for {
		n, e := iovCall(unix.SYS_WRITEV, fd, l.iov[:l.niov])
		switch e {
		case 0:
			l.wn = n
		case unix.EINTR:
			continue
		case unix.EAGAIN:
		default:
			l.werr = e
		}
		return true
	}
}

// keepRest saves what vec holds past its first n bytes for the sender
// goroutine, which writes it before anything else, and reports whether
// there was any.
func (l *link) keepRest(vec [][]byte, n int) bool {
	for len(vec) > 0 && n >= len(vec[0]) {
		n -= len(vec[0])
		vec = vec[1:]
	}
	if len(vec) == 0 {
		return false
	}
	rest := append(l.rest[:0], vec[0][n:])
	l.rest = append(rest, vec[1:]...)
	return true
}

// finish ends the sender of a link the QP has left. If the receiver
// refused a request, write the NAK saying so and half-close, so the peer
// reads it before the end of the stream; other control frames are moot.
func (l *link) finish() {
	n, nak := l.takeControlNak(l.ctlBuf[:])
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
