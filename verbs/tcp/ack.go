package tcp

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdmacell/rdmacell/verbs"
)

// Acknowledgements. They are cumulative, and a frame written anyway
// carries one for free (behind the requests, where the peer reads it in
// the same system call), so the responder writes one by itself only when
// it must. What the requester asked for decides when:
//
//   - flagAckLazy (the last of a batch of unsignaled requests, and any
//     request posted verbs.Relaxed): with the next frame written, or
//     after lazyDelay (at most a quarter of the QP's ack budget).
//   - flagAckReq on a WRITE: the requester's completion waits for it, so
//     before the receiver next makes a system call. A stream of signaled
//     requests read in one readv is acknowledged once, and a lone one
//     waits for no one.
//   - flagAckReq on a WRITE_WITH_IMM or SEND: the request completed a
//     receive, whose consumer may answer it (the cell engine returns a
//     token for every cell), and an answer would carry the
//     acknowledgement. The acknowledgement is held for it until a frame
//     leaves, or a goroutine is about to block in the receive CQ's Wait
//     (the consumer dealt with the completion and did not answer: see
//     holds), or ackDelay passes. Whether answers came is scored per
//     link (control.answered): where they do not come, acknowledgements
//     are not held, so a lone request's completion waits neither for its
//     peer's consumer nor for a timer; an acknowledgement that went out
//     alone and was followed by a frame before the next request counts
//     for holding again.
//
// A request's acknowledgement is queued only once its data is in place,
// so however long it waits, a signaled request completes only when its
// data is in the peer's memory.

// ackMode is how soon an acknowledgement is written.
type ackMode uint8

const (
	ackLazy   ackMode = iota // with the next frame, or after lazyDelay
	ackHeld                  // for an answer, the consumer going idle, or ackDelay
	ackUrgent                // before the receiver's next system call
)

// Scores of control.answered: an acknowledgement is held while it is at
// least zero. A hold an answer took raises it by one, a hold that waited
// in vain lowers it by two, so that holds stop after the first miss
// where answers do not come and survive the odd miss where they do.
const (
	answeredMax  = 3
	answeredMin  = -4
	answeredMiss = 2
)

// queueAck asks for every request up to psn to be acknowledged, as mode
// says (ackHeld only for a request that completed a receive), and
// reports whether the acknowledgement is held. It runs on the receiver
// goroutine, before the request's receive completes: a consumer woken by
// that completion finds the hold in place when it parks again.
func (l *link) queueAck(psn uint32, mode ackMode) (held bool) {
	c := &l.ctl
	delay := l.qp.d.ackDelay
	if mode == ackLazy {
		delay = min(l.qp.d.lazyDelay, l.qp.cfg.ackBudget()/4)
	}
	due := monoNow() + int64(delay)
	c.mu.Lock()
	if !c.ackPending || due < c.due {
		c.due = due
	}
	c.ack, c.ackPending = psn, true
	if mode == ackHeld {
		// A new request that may be answered: the chance of the
		// previous one's acknowledgement to be followed is over.
		c.candidate, c.alone = true, false
	}
	if mode == ackHeld && (c.answered < 0 || c.ackUrgent) {
		mode = ackUrgent
	}
	list := false
	switch mode {
	case ackUrgent:
		c.ackUrgent, c.held = true, false
		l.ackDue = true
	case ackHeld:
		c.held, c.ready = true, false
		list = !c.listed
		c.listed = true
	}
	// A timer set for a lazy acknowledgement's deadline is brought
	// forward for a held one's.
	arm := !c.ackUrgent && (!c.lazyArmed || c.due < c.armedFor)
	if arm {
		c.lazyArmed, c.armedFor = true, c.due
		due = c.due
	}
	c.mu.Unlock()
	if list {
		l.qp.recvHolds.add(l)
	}
	if arm {
		c.lazy.Reset(time.Duration(due - monoNow()))
	}
	return mode == ackHeld
}

// flushDue writes an urgent acknowledgement the receiver queued, before
// it makes a system call that may wait for the peer (see reader.before).
func (l *link) flushDue() {
	if l.ackDue {
		l.ackDue = false
		l.post()
	}
}

// completeHeld completes the receive of a request whose acknowledgement
// is held, and marks the hold ready: a park from then on is the
// consumer's reaction to the completion. Both happen under the holds'
// lock, so a park sees the hold either before the completion (and keeps
// it: the consumer wakes for the completion and parks again) or after.
func (l *link) completeHeld(wc verbs.WC) {
	h := l.qp.recvHolds
	h.mu.Lock()
	l.completeRecv(wc)
	l.ctl.mu.Lock()
	l.ctl.ready = true
	l.ctl.mu.Unlock()
	h.mu.Unlock()
}

// lazyDue runs when the timer of lazy and held acknowledgements fires:
// one that is due, which no frame took along, becomes urgent and the
// sender writes it. The timer is not stopped when a frame takes an
// acknowledgement, so one due later is given the rest of its time.
func (l *link) lazyDue() {
	c := &l.ctl
	c.mu.Lock()
	c.lazyArmed = false
	due, again := false, time.Duration(0)
	if c.ackPending && !c.ackUrgent {
		if again = time.Duration(c.due - monoNow()); again > 0 {
			c.lazyArmed, c.armedFor = true, c.due
		} else {
			c.ackUrgent, due = true, true
		}
	}
	c.mu.Unlock()
	if again > 0 {
		c.lazy.Reset(again)
	}
	if due {
		l.wake()
	}
}

// releaseHeld writes a held acknowledgement now, unless the receive it
// is held for has not completed yet, and reports whether the link stays
// in the holds (a link the QP left never does). It is called when the
// receive CQ's consumer is about to block, so no answer is coming soon.
// It runs on that consumer's goroutine and, like PostSend, never blocks.
func (l *link) releaseHeld() (keep bool) {
	c := &l.ctl
	c.mu.Lock()
	if c.held && c.ackPending && !c.ready && !l.dead.Load() {
		// The consumer has not seen the completion yet; it wakes for
		// it and parks again after.
		c.mu.Unlock()
		return true
	}
	c.listed = false
	due := c.held && c.ackPending
	if due {
		c.ackUrgent = true
		c.nParked++
	}
	c.mu.Unlock()
	if due {
		l.post()
	}
	return false
}

func (l *link) queueRNR(psn uint32) {
	l.ctl.mu.Lock()
	l.ctl.rnr, l.ctl.rnrPending = psn, true
	l.ctl.mu.Unlock()
	l.post()
}

func (l *link) queueNak(psn uint32, st verbs.Status) {
	l.ctl.mu.Lock()
	l.ctl.nak = header{typ: frameNak, psn: psn, status: st}
	l.ctl.nakPending = true
	l.ctl.mu.Unlock()
	l.wake()
}

// takeControl encodes the pending RNR notice and acknowledgement into
// buf, which holds three headers, and returns their length; data says
// they go behind requests. A lazy or held acknowledgement rides only
// behind requests: written alone, it would cost the system call it waits
// to save. A NAK is left for finish, which half-closes after it.
func (l *link) takeControl(buf []byte, data bool) int {
	l.ctl.mu.Lock()
	n := l.takeControlLocked(buf, data)
	l.ctl.mu.Unlock()
	return n
}

// takeControlLocked puts a pending RNR notice before a pending
// acknowledgement: the notice was queued first, and an acknowledgement
// that covers its request before it would make the notice name a request
// no longer in flight, which the requester takes for a protocol error.
// It scores, for queueAck, whether answers come: a candidate's
// acknowledgement that rides with requests, or a frame that follows one
// that went alone, says they do; a held one that goes alone (released by
// the consumer's park or the timer) says they do not.
func (l *link) takeControlLocked(buf []byte, data bool) (n int) {
	c := &l.ctl
	if data && c.alone {
		c.alone = false
		c.answered = min(c.answered+1, answeredMax)
	}
	if c.rnrPending {
		encodeHeader(buf[n:], &header{typ: frameRNR, psn: c.rnr})
		c.rnrPending = false
		n += headerLen
	}
	if c.ackPending && (data || c.ackUrgent) {
		encodeHeader(buf[n:], &header{typ: frameAck, psn: c.ack})
		if !data {
			c.nAlone++
		}
		switch {
		case data && (c.held || c.candidate):
			c.answered = min(c.answered+1, answeredMax)
		case c.held:
			c.answered = max(c.answered-answeredMiss, answeredMin)
			c.nMissed++
		case c.candidate:
			c.alone = true
		}
		c.ackPending, c.ackUrgent, c.held, c.candidate = false, false, false, false
		n += headerLen
	}
	return n
}

// takeControlNak is takeControl with the NAK last, if there is one.
func (l *link) takeControlNak(buf []byte) (n int, nak bool) {
	l.ctl.mu.Lock()
	n = l.takeControlLocked(buf, false)
	if l.ctl.nakPending {
		encodeHeader(buf[n:], &l.ctl.nak)
		l.ctl.nakPending = false
		n += headerLen
		nak = true
	}
	l.ctl.mu.Unlock()
	return n, nak
}

// holds are the links of the QPs whose receives complete into one CQ
// that hold an acknowledgement for an answer. The CQ's park hook
// releases them: a goroutine about to block in Wait has dealt with the
// completions it took, and what it answered has left (posting writes
// inline, or hands to the sender); whatever is still held is answered by
// nobody soon.
type holds struct {
	n     atomic.Int32 // len(links), read without the lock by every park
	mu    sync.Mutex
	links []*link
}

// add lists l; control.listed keeps it from being listed twice.
func (h *holds) add(l *link) {
	h.mu.Lock()
	h.links = append(h.links, l)
	h.n.Store(int32(len(h.links)))
	h.mu.Unlock()
}

// release is the CQ's park hook. It writes the acknowledgements under
// the lock, which only receivers listing a link or completing a held
// receive wait for: writing inline never blocks (see link.post).
func (h *holds) release() {
	if h.n.Load() == 0 {
		return
	}
	h.mu.Lock()
	kept := h.links[:0]
	for _, l := range h.links {
		if l.releaseHeld() {
			kept = append(kept, l)
		}
	}
	clear(h.links[len(kept):])
	h.links = kept
	h.n.Store(int32(len(kept)))
	h.mu.Unlock()
}
