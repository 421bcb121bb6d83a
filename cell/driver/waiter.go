package driver

import (
	"context"
	"sync"
	"time"
)

// waiter makes the contexts the progress goroutine waits in the CQ with.
// A context is reused for the next wait as long as it has not ended, so
// that waiting allocates nothing unless a wait times out or is woken: a
// fresh context per wait would cost several allocations between most two
// completions of a transfer. One timer serves every wait; one that fires
// late, for an earlier wait, ends the current one early, which only costs
// another poll.
type waiter struct {
	mu    sync.Mutex
	cur   *waitCtx
	timer *time.Timer
}

// waitCtx is one context of a waiter. Once ended it stays ended, as the
// context contract requires.
type waitCtx struct {
	w    *waiter
	done chan struct{}
	err  error // guarded by w.mu
}

var _ context.Context = (*waitCtx)(nil)

func newWaiter() *waiter {
	w := &waiter{}
	w.cur = w.fresh()
	w.timer = time.AfterFunc(time.Hour, func() { w.end(context.DeadlineExceeded) })
	w.timer.Stop()
	return w
}

func (w *waiter) fresh() *waitCtx { return &waitCtx{w: w, done: make(chan struct{})} }

// arm returns the context of a wait that ends after d, or only on end if
// d is 0.
func (w *waiter) arm(d time.Duration) context.Context {
	w.mu.Lock()
	if w.cur.err != nil {
		w.cur = w.fresh()
	}
	ctx := w.cur
	w.mu.Unlock()
	if d > 0 {
		w.timer.Reset(d)
	}
	return ctx
}

// disarm stops the timer of the wait that just ended.
func (w *waiter) disarm() { w.timer.Stop() }

// end ends the current wait with err.
func (w *waiter) end(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if c := w.cur; c.err == nil {
		c.err = err
		close(c.done)
	}
}

// Deadline implements context.Context: the timer is not a deadline the
// waiting code could plan with.
func (c *waitCtx) Deadline() (time.Time, bool) { return time.Time{}, false }

// Done implements context.Context.
func (c *waitCtx) Done() <-chan struct{} { return c.done }

// Err implements context.Context.
func (c *waitCtx) Err() error {
	c.w.mu.Lock()
	defer c.w.mu.Unlock()
	return c.err
}

// Value implements context.Context; it carries no values.
func (c *waitCtx) Value(any) any { return nil }
