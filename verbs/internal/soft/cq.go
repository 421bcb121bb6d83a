package soft

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/rdmacell/rdmacell/verbs"
)

// spinPolls is how many times Wait re-polls before it parks when the CQ
// has a progress hook: those polls do the provider's work (shm executes
// the peer's requests in them), so a completion that arrives within a few
// microseconds is picked up without a trip through the scheduler. Without
// a hook a completion can only come from another goroutine (tcp's
// receiver), which the spinning itself keeps from a processor on a busy
// machine (the yields took a fifth of a tcp ping-pong's profile, and a
// goroutine woken by the network poller may wait for a processor while
// others yield), so Wait looks only spinPollsPlain times before it parks.
// An idle CQ parks and burns nothing.
const (
	spinPolls      = 64
	spinPollsPlain = 2
)

// CQ is a completion queue in process memory.
type CQ struct {
	mu     sync.Mutex
	ring   []verbs.WC
	head   int
	count  atomic.Int64
	wake   chan struct{}
	closed atomic.Bool
	// progress, when set, runs at the start of every Poll; park, when
	// set, runs before Wait blocks.
	progress atomic.Pointer[func()]
	park     atomic.Pointer[func()]
}

// SetPark installs f to run each time Wait, having spun without finding a
// completion, is about to block; nil removes it. A provider whose polls
// do work that otherwise waits for another goroutine (see SetProgress)
// hooks in here to hand that work back at once, rather than notice the
// polls stopping on a timer. f must not block and must not call Poll.
func (c *CQ) SetPark(f func()) {
	if f == nil {
		c.park.Store(nil)
		return
	}
	c.park.Store(&f)
}

// SetProgress installs f to run at the start of every Poll (and so of
// every spin of Wait); nil removes it. A provider that can execute its
// work in the polling goroutine hooks in here, so that a busy poller
// completes requests without a hand-off to another goroutine. f must not
// block and must not call Poll.
func (c *CQ) SetProgress(f func()) {
	if f == nil {
		c.progress.Store(nil)
		return
	}
	c.progress.Store(&f)
}

// NewCQ returns a CQ with room for depth completions; it grows past that
// rather than lose one.
func NewCQ(depth int) (*CQ, error) {
	if depth <= 0 {
		return nil, fmt.Errorf("%w: CQ depth %d, want > 0", verbs.ErrInvalidArgument, depth)
	}
	return &CQ{ring: make([]verbs.WC, depth), wake: make(chan struct{}, 1)}, nil
}

// Push appends a completion and wakes a waiter.
func (c *CQ) Push(wc verbs.WC) {
	c.mu.Lock()
	n := int(c.count.Load())
	if n == len(c.ring) {
		grown := make([]verbs.WC, 2*len(c.ring))
		for i := 0; i < n; i++ {
			grown[i] = c.ring[(c.head+i)%len(c.ring)]
		}
		c.ring, c.head = grown, 0
	}
	c.ring[(c.head+n)%len(c.ring)] = wc
	c.count.Add(1)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Poll implements verbs.CQ.
func (c *CQ) Poll(wc []verbs.WC) int {
	if f := c.progress.Load(); f != nil {
		(*f)()
	}
	if c.count.Load() == 0 || len(wc) == 0 {
		return 0
	}
	c.mu.Lock()
	n := min(int(c.count.Load()), len(wc))
	for i := 0; i < n; i++ {
		wc[i] = c.ring[c.head]
		c.head = (c.head + 1) % len(c.ring)
	}
	c.count.Add(int64(-n))
	c.mu.Unlock()
	return n
}

// Passive implements verbs.PassiveCQ: polling does work only through a
// progress hook.
func (c *CQ) Passive() bool { return c.progress.Load() == nil }

// Wait implements verbs.CQ.
func (c *CQ) Wait(ctx context.Context, wc []verbs.WC) (int, error) {
	spins := spinPollsPlain
	if c.progress.Load() != nil {
		spins = spinPolls
	}
	for i := 0; ; i++ {
		if n := c.Poll(wc); n > 0 {
			return n, nil
		}
		if c.closed.Load() {
			return 0, verbs.ErrClosed
		}
		if i < spins {
			runtime.Gosched()
			continue
		}
		// Every block, not only the first: the Poll after a wake-up
		// polled again. Work the hook hands over ends in Push, which
		// fills c.wake, so nothing is lost between here and the select.
		if f := c.park.Load(); f != nil {
			(*f)()
		}
		select {
		case <-c.wake:
		case <-ctx.Done():
			if n := c.Poll(wc); n > 0 {
				return n, nil
			}
			return 0, ctx.Err()
		}
	}
}

// Close implements verbs.CQ.
func (c *CQ) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	select {
	case c.wake <- struct{}{}:
	default:
	}
	return nil
}
