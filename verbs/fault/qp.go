package fault

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdmacell/rdmacell/verbs"
)

// QP wraps a provider's queue pair and applies its fault to the send
// requests posted on it. Receive requests and state changes pass through,
// except that a move to StateErr or StateReset first delivers the requests
// held by Delay or Stall (see the package documentation). It implements
// verbs.QP.
type QP struct {
	d     *Device
	under verbs.QP
	scq   *CQ
	num   uint32

	maxSend int
	maxSGE  int
	timeout time.Duration // the QP's Timeout: how long a dropped request takes to fail
	// lateTimeout bounds how long a Modify waits for late copies to be
	// acknowledged, which the provider does within its retry budget.
	lateTimeout time.Duration

	// direct says there is no fault and nothing held, so PostSend can hand
	// the caller's chain straight to the provider.
	direct          atomic.Bool
	requests, bytes atomic.Uint64
	late, dropped   atomic.Uint64

	mu      sync.Mutex
	fault   Fault
	after   int
	held    heldQueue
	scratch verbs.SendWR // one request handed to the provider
	closed  bool
	// The delivery goroutine runs while the QP holds or has held requests.
	running bool
	kick    chan struct{}
	exited  chan struct{}
}

var _ verbs.QP = (*QP)(nil)

func newQP(d *Device, under verbs.QP, scq *CQ, cfg verbs.QPConfig) *QP {
	q := &QP{d: d, under: under, scq: scq, num: under.Num(),
		maxSend: cfg.MaxSendWR, maxSGE: cfg.MaxSGE, timeout: cfg.Timeout,
		kick: make(chan struct{}, 1), exited: make(chan struct{})}
	if q.maxSend <= 0 {
		q.maxSend = defaultMaxWR
	}
	if q.maxSGE <= 0 {
		q.maxSGE = defaultMaxSGE
	}
	if q.timeout <= 0 {
		q.timeout = defaultTimeout
	}
	q.lateTimeout = q.timeout*time.Duration(max(cfg.RetryCount, 0)+1) + time.Second
	q.direct.Store(true)
	return q
}

// Unwrap returns the provider's QP.
func (q *QP) Unwrap() verbs.QP { return q.under }

// Num implements verbs.QP.
func (q *QP) Num() uint32 { return q.num }

// State implements verbs.QP.
func (q *QP) State() verbs.QPState { return q.under.State() }

// Endpoint implements verbs.QP.
func (q *QP) Endpoint() verbs.Endpoint { return q.under.Endpoint() }

// PostRecv implements verbs.QP; receives are never faulted.
func (q *QP) PostRecv(wr *verbs.RecvWR) (*verbs.RecvWR, error) { return q.under.PostRecv(wr) }

// Stats returns the QP's counters.
func (q *QP) Stats() Stats {
	q.mu.Lock()
	heldN := q.held.len()
	q.mu.Unlock()
	return Stats{Requests: q.requests.Load(), Bytes: q.bytes.Load(), Held: heldN,
		Late: q.late.Load(), Dropped: q.dropped.Load()}
}

// PostSend implements verbs.QP.
func (q *QP) PostSend(wr *verbs.SendWR) (*verbs.SendWR, error) {
	if q.direct.Load() {
		bad, err := q.under.PostSend(wr)
		for w := wr; w != nil && w != bad; w = w.Next {
			q.count(w)
		}
		return bad, err
	}
	q.mu.Lock()
	bad, err := q.postLocked(wr)
	q.mu.Unlock()
	return bad, err
}

func (q *QP) count(w *verbs.SendWR) {
	q.requests.Add(1)
	q.bytes.Add(w.Len())
}

// postLocked applies the fault to each request of the chain.
func (q *QP) postLocked(wr *verbs.SendWR) (*verbs.SendWR, error) {
	if q.closed {
		return wr, fmt.Errorf("fault: post send on qp %d: %w", q.num, verbs.ErrClosed)
	}
	now := time.Now()
	for w := wr; w != nil; w = w.Next {
		if st := q.under.State(); st != verbs.StateRTS {
			return w, fmt.Errorf("%w: fault: post send on qp %d in state %v, want RTS", verbs.ErrInvalidState, q.num, st)
		}
		if err := q.check(w); err != nil {
			return w, err
		}
		if q.held.len() >= q.maxSend {
			return w, fmt.Errorf("%w: fault: qp %d holds %d send requests", verbs.ErrQueueFull, q.num, q.held.len())
		}
		kind := q.fault.Kind
		if q.after > 0 {
			q.after--
			kind = None
		}
		switch kind {
		case Delay:
			q.hold(w).at = now.Add(q.fault.Delay)
		case Stall:
			q.hold(w).stalled = true
		case Drop:
			first := true
			for i := range q.held.len() {
				first = first && !q.held.at(i).drop
			}
			e := q.hold(w)
			e.drop = true
			if first {
				e.at = now.Add(q.timeout)
			}
			q.dropped.Add(1)
		default:
			if err := q.forward(w, now); err != nil {
				return w, err
			}
		}
		if q.fault.Kind == Kill && q.after == 0 {
			// The last request allowed through has gone: the QP dies
			// half-way through the chain, whose rest flushes.
			q.killLocked(w.Next)
			return nil, nil
		}
	}
	q.wake()
	return nil, nil
}

// check refuses what the provider would refuse at post time, since a held
// request reaches it only later.
func (q *QP) check(w *verbs.SendWR) error {
	switch w.Opcode {
	case verbs.OpWrite, verbs.OpWriteImm, verbs.OpSend:
	default:
		return fmt.Errorf("%w: fault: wr %d on qp %d has opcode %v", verbs.ErrInvalidArgument, w.ID, q.num, w.Opcode)
	}
	if len(w.SGL) > q.maxSGE {
		return fmt.Errorf("%w: fault: wr %d on qp %d has %d SGEs, QP allows %d", verbs.ErrInvalidArgument, w.ID, q.num, len(w.SGL), q.maxSGE)
	}
	return nil
}

// forward hands w to the provider now, or queues it behind held requests
// so that order is kept.
func (q *QP) forward(w *verbs.SendWR, now time.Time) error {
	if q.held.len() > 0 {
		q.hold(w).at = now
		return nil
	}
	return q.send(w)
}

// send hands one request to the provider.
func (q *QP) send(w *verbs.SendWR) error {
	q.scratch = *w
	q.scratch.Next = nil
	_, err := q.under.PostSend(&q.scratch)
	if err == nil {
		q.count(w)
	}
	return err
}

// hold queues a copy of w and makes sure the delivery goroutine runs.
func (q *QP) hold(w *verbs.SendWR) *held {
	q.direct.Store(false)
	if !q.running {
		q.running = true
		go q.deliver()
	}
	return q.held.push(w)
}

// wake tells the delivery goroutine to look at the queue again.
func (q *QP) wake() {
	select {
	case q.kick <- struct{}{}:
	default:
	}
}

// Inject changes the QP's fault from now on. Requests already delayed keep
// their delay; stalled ones are released unless f is a Stall too.
func (q *QP) Inject(f Fault) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.fault, q.after = f, max(f.After, 0)
	if f.Kind != Stall {
		now := time.Now()
		for i := range q.held.len() {
			if e := q.held.at(i); e.stalled {
				e.stalled, e.at = false, now
			}
		}
	}
	if f.Kind == Kill && q.after == 0 {
		q.killLocked(nil)
	}
	q.updateDirect()
	q.wake()
}

// updateDirect re-enables the direct path when nothing needs the wrapper.
func (q *QP) updateDirect() {
	q.direct.Store(q.fault.Kind == None && q.held.len() == 0 && !q.closed)
}

// killLocked moves the provider's QP to StateErr, flushes what the wrapper
// holds and then rest, and clears the fault: a Kill happens once.
func (q *QP) killLocked(rest *verbs.SendWR) {
	_ = q.under.Modify(verbs.StateErr, nil) // always allowed
	wcs := q.flushHeld(nil)
	for w := rest; w != nil; w = w.Next {
		wcs = append(wcs, q.wc(w, verbs.StatusWRFlush))
	}
	q.scq.push(wcs...)
	q.fault, q.after = Fault{}, 0
	q.updateDirect()
}

// flushHeld empties the queue into flush completions appended to wcs.
func (q *QP) flushHeld(wcs []verbs.WC) []verbs.WC {
	for i := range q.held.len() {
		wcs = append(wcs, q.wc(&q.held.at(i).wr, verbs.StatusWRFlush))
	}
	q.held.clear()
	return wcs
}

// wc is the completion the wrapper makes for w.
func (q *QP) wc(w *verbs.SendWR, st verbs.Status) verbs.WC {
	return verbs.WC{ID: w.ID, Status: st, Opcode: w.Opcode, QPN: q.num}
}

// Close implements verbs.QP. Held requests are flushed, not delivered.
func (q *QP) Close() error {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return fmt.Errorf("fault: close qp %d: %w", q.num, verbs.ErrClosed)
	}
	q.closed = true
	q.updateDirect()
	wcs := q.flushHeld(nil)
	running := q.running
	q.mu.Unlock()
	q.wake()
	if running {
		<-q.exited
	}
	err := q.under.Close()
	q.scq.push(wcs...)
	q.d.forget(q)
	return err
}
