package fault

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/rdmacell/rdmacell/verbs"
)

// retryFull is how soon the delivery goroutine tries again when the
// provider's send queue is full.
const retryFull = 100 * time.Microsecond

// deliver is the QP's delivery goroutine: it hands held requests to the
// provider when they are due and fails dropped ones. It sleeps on a timer
// or a kick, never polls, and ends when the QP is closed.
func (q *QP) deliver() {
	defer close(q.exited)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		q.mu.Lock()
		if q.closed {
			q.mu.Unlock()
			return
		}
		next := q.runDue(time.Now())
		q.mu.Unlock()
		if !next.IsZero() {
			timer.Reset(time.Until(next))
		}
		select {
		case <-q.kick:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// runDue handles the held requests that are due, in order, and returns
// when the next one is due (zero when none is waiting on time).
func (q *QP) runDue(now time.Time) time.Time {
	defer q.updateDirect()
	for q.held.len() > 0 {
		e := q.held.at(0)
		switch {
		case e.stalled:
			return time.Time{}
		case e.at.After(now):
			return e.at
		case e.drop:
			q.breakLocked()
			return time.Time{}
		}
		err := q.send(&e.wr)
		switch {
		case errors.Is(err, verbs.ErrQueueFull):
			return now.Add(retryFull)
		case err != nil:
			// The provider's QP left RTS (a failure or a user's Modify):
			// what it has not got is flushed, as it would flush it.
			q.scq.push(q.flushHeld(nil)...)
			return time.Time{}
		}
		q.held.pop()
	}
	return time.Time{}
}

// breakLocked fails the first dropped request as a transport timeout
// would: the provider's QP moves to StateErr, the request completes with
// StatusRetryExceeded and everything behind it flushes.
func (q *QP) breakLocked() {
	_ = q.under.Modify(verbs.StateErr, nil) // always allowed
	first := q.held.at(0)
	wcs := []verbs.WC{q.wc(&first.wr, verbs.StatusRetryExceeded)}
	q.held.pop()
	q.scq.push(q.flushHeld(wcs)...)
}

// markIDs makes marker ids; the tag keeps them apart from ordinary ids.
var markIDs atomic.Uint64

const markTag = 0xfa17 << 48

// Modify implements verbs.QP. A move to StateErr or StateReset first
// delivers the requests held by Delay or Stall and waits until the peer
// has them (or the provider gave up on them): they were already in the
// network. Dropped requests are flushed (StateErr) or discarded
// (StateReset), as the provider would treat requests it still had.
func (q *QP) Modify(state verbs.QPState, remote *verbs.Endpoint) error {
	if state != verbs.StateErr && state != verbs.StateReset {
		return q.under.Modify(state, remote)
	}
	q.mu.Lock()
	m, wcs := q.deliverLate(state)
	q.updateDirect()
	q.mu.Unlock()
	if m != nil {
		ctx, cancel := context.WithTimeout(context.Background(), q.lateTimeout)
		q.scq.await(ctx, m)
		cancel()
	}
	err := q.under.Modify(state, remote)
	if state == verbs.StateReset {
		q.scq.dropMarks(q.num)
	} else {
		q.scq.push(wcs...)
	}
	return err
}

// deliverLate hands every deliverable held request to the provider at
// once; the last is posted signaled under a marker id, whose completion
// proves that all of them were placed. It returns that marker, if any, and
// the flush completions of the requests that are not delivered.
func (q *QP) deliverLate(state verbs.QPState) (*mark, []verbs.WC) {
	n := 0 // deliverable: everything before the first dropped request
	for n < q.held.len() && !q.held.at(n).drop {
		n++
	}
	var m *mark
	var wcs []verbs.WC
	for i := range n {
		e := q.held.at(0)
		w := &e.wr
		if i == n-1 {
			id := markTag | markIDs.Add(1)
			m = q.scq.addMark(q.num, id, w.ID, w.Flags&verbs.Signaled != 0)
			w.ID, w.Flags = id, w.Flags|verbs.Signaled
		}
		if err := q.send(w); err != nil {
			if m != nil {
				q.scq.removeMark(q.num, w.ID)
				w.ID = m.id // report the request under its own id
				m = nil
			}
			wcs = q.flushHeld(wcs)
			break
		}
		q.late.Add(1)
		q.held.pop()
	}
	if state == verbs.StateErr {
		wcs = q.flushHeld(wcs)
	}
	q.held.clear()
	return m, wcs
}
