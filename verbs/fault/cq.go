package fault

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/rdmacell/rdmacell/verbs"
)

// CQ wraps a provider's completion queue. Besides the provider's
// completions it holds those the wrapper makes itself, in order with them,
// and it recognises the marker completions by which a QP learns that its
// late copies have landed. It implements verbs.CQ.
//
// Taking completions from the provider's CQ is reserved to one goroutine
// at a time (the consume token): whoever holds it either hands what it took
// to its caller or puts it in the stash, which is always read first. That
// keeps a single consumer's view in order even while a QP drains the CQ
// to find its marker.
type CQ struct {
	under verbs.CQ

	// consume is the token: a send takes it, a receive gives it back.
	consume chan struct{}
	// wanted counts goroutines that need the token for wrapper work; a
	// Wait that holds it must not park in the provider's CQ meanwhile.
	wanted  atomic.Int32
	stashed atomic.Int32 // len of stash, read without mu
	nmarks  atomic.Int32 // len of marks, read without mu
	closed  atomic.Bool
	done    chan struct{} // closed by Close

	mu    sync.Mutex
	stash []verbs.WC // taken from under or made by the wrapper, not yet returned
	head  int        // stash[head:] is pending
	marks map[markKey]*mark
	// intr is cancelled to make a Wait parked in the provider's CQ return
	// the token; it is replaced after each interruption.
	intr       context.Context
	cancelIntr context.CancelFunc

	scratch [32]verbs.WC // used by the token holder when draining
}

var _ verbs.CQ = (*CQ)(nil)

// markKey names a marker completion: the marker's work request id on a QP.
type markKey struct {
	qpn uint32
	id  uint64
}

// mark is a late copy posted with a marker id in place of its own. Its
// completion is given back its id, or swallowed when the request was not
// signaled and succeeded, and closes done.
type mark struct {
	id       uint64
	signaled bool
	done     chan struct{}
}

func newCQ(under verbs.CQ) *CQ {
	c := &CQ{under: under, consume: make(chan struct{}, 1), done: make(chan struct{}), marks: make(map[markKey]*mark)}
	c.intr, c.cancelIntr = context.WithCancel(context.Background())
	return c
}

// Unwrap returns the provider's CQ.
func (c *CQ) Unwrap() verbs.CQ { return c.under }

func (c *CQ) tryAcquire() bool {
	select {
	case c.consume <- struct{}{}:
		return true
	default:
		return false
	}
}

func (c *CQ) release() { <-c.consume }

// Poll implements verbs.CQ.
func (c *CQ) Poll(wc []verbs.WC) int {
	if len(wc) == 0 {
		return 0
	}
	if !c.tryAcquire() {
		// The holder passes on whatever it takes; only the stash is ours.
		return c.takeStash(wc)
	}
	n := c.takeStash(wc)
	if n < len(wc) {
		m := c.under.Poll(wc[n:])
		n += c.filter(wc[n : n+m])
	}
	c.release()
	return n
}

// spinPolls is how many times Wait polls before it parks.
const spinPolls = 64

// Wait implements verbs.CQ. It parks in the provider's CQ, from which the
// wrapper interrupts it when it has completions of its own to add.
func (c *CQ) Wait(ctx context.Context, wc []verbs.WC) (int, error) {
	for i := 0; ; i++ {
		if n := c.Poll(wc); n > 0 {
			return n, nil
		}
		if c.closed.Load() {
			return 0, verbs.ErrClosed
		}
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		if i < spinPolls {
			// Parking costs two small allocations; a completion due in a
			// few microseconds is cheaper to catch by polling.
			runtime.Gosched()
			continue
		}
		select {
		case c.consume <- struct{}{}:
		case <-c.done:
			return 0, verbs.ErrClosed
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		intr := c.interruption()
		if c.wanted.Load() > 0 || c.stashed.Load() > 0 {
			c.release()
			continue
		}
		n, err := c.park(ctx, intr, wc)
		c.release()
		if n > 0 {
			return n, nil
		}
		switch {
		case errors.Is(err, verbs.ErrClosed) || c.closed.Load():
			return 0, verbs.ErrClosed
		case ctx.Err() != nil:
			return 0, ctx.Err()
		}
		// Interrupted, or everything taken was a swallowed marker.
	}
}

// park waits in the provider's CQ until ctx or intr ends. The caller
// holds the token.
func (c *CQ) park(ctx, intr context.Context, wc []verbs.WC) (int, error) {
	pctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(intr, cancel)
	n, err := c.under.Wait(pctx, wc)
	stop()
	cancel()
	return c.filter(wc[:n]), err
}

// interruption returns the context whose end interrupts a parked Wait.
// Callers take it before checking wanted, so an interruption cannot slip
// between the check and the park.
func (c *CQ) interruption() context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.intr
}

// interrupt makes a Wait parked in the provider's CQ give the token back.
func (c *CQ) interrupt() {
	c.mu.Lock()
	cancel := c.cancelIntr
	c.intr, c.cancelIntr = context.WithCancel(context.Background())
	c.mu.Unlock()
	cancel()
}

// acquire takes the token to add the wrapper's completions, interrupting
// a parked Wait. It fails only when the CQ is closed.
func (c *CQ) acquire() bool {
	c.wanted.Add(1)
	defer c.wanted.Add(-1)
	c.interrupt()
	select {
	case c.consume <- struct{}{}:
		return true
	case <-c.done:
		return false
	}
}

// Close implements verbs.CQ.
func (c *CQ) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	close(c.done)
	c.interrupt()
	return c.under.Close()
}

// takeStash moves pending stashed completions into wc.
func (c *CQ) takeStash(wc []verbs.WC) int {
	if c.stashed.Load() == 0 {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	n := copy(wc, c.stash[c.head:])
	c.head += n
	if c.head == len(c.stash) {
		c.stash, c.head = c.stash[:0], 0
	}
	c.stashed.Store(int32(len(c.stash) - c.head))
	return n
}

// drainLocked moves everything in the provider's CQ to the stash. The
// caller holds the token and mu.
func (c *CQ) drainLocked() {
	for {
		n := c.under.Poll(c.scratch[:])
		if n == 0 {
			return
		}
		c.stashLocked(c.scratch[:c.filterLocked(c.scratch[:n])])
	}
}

func (c *CQ) stashLocked(wcs []verbs.WC) {
	c.stash = append(c.stash, wcs...)
	c.stashed.Store(int32(len(c.stash) - c.head))
}

// push adds completions made by the wrapper, after everything the
// provider has already completed. It returns false if the CQ was closed.
func (c *CQ) push(wcs ...verbs.WC) bool {
	if len(wcs) == 0 {
		return true
	}
	if !c.acquire() {
		return false
	}
	c.mu.Lock()
	c.drainLocked()
	c.stashLocked(wcs)
	c.mu.Unlock()
	c.release()
	return true
}

// filter handles marker completions in wcs: it restores their ids or
// removes them, and returns how many completions are left.
func (c *CQ) filter(wcs []verbs.WC) int {
	if c.nmarks.Load() == 0 {
		return len(wcs)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.filterLocked(wcs)
}

func (c *CQ) filterLocked(wcs []verbs.WC) int {
	if len(c.marks) == 0 {
		return len(wcs)
	}
	n := 0
	for _, wc := range wcs {
		k := markKey{wc.QPN, wc.ID}
		if m := c.marks[k]; m != nil {
			delete(c.marks, k)
			c.nmarks.Store(int32(len(c.marks)))
			close(m.done)
			if !m.signaled && wc.Status == verbs.StatusSuccess {
				continue
			}
			wc.ID = m.id
		}
		wcs[n] = wc
		n++
	}
	return n
}

// addMark registers the marker id of a late copy of request id on qpn.
func (c *CQ) addMark(qpn uint32, markID, id uint64, signaled bool) *mark {
	m := &mark{id: id, signaled: signaled, done: make(chan struct{})}
	c.mu.Lock()
	c.marks[markKey{qpn, markID}] = m
	c.nmarks.Store(int32(len(c.marks)))
	c.mu.Unlock()
	return m
}

// removeMark forgets the marker markID of qpn, whose request never
// reached the provider.
func (c *CQ) removeMark(qpn uint32, markID uint64) {
	c.mu.Lock()
	delete(c.marks, markKey{qpn, markID})
	c.nmarks.Store(int32(len(c.marks)))
	c.mu.Unlock()
}

// dropMarks forgets the markers of qpn, whose requests a reset discarded.
func (c *CQ) dropMarks(qpn uint32) {
	c.mu.Lock()
	for k := range c.marks {
		if k.qpn == qpn {
			delete(c.marks, k)
		}
	}
	c.nmarks.Store(int32(len(c.marks)))
	c.mu.Unlock()
}

// await drains the provider's CQ into the stash until m's completion has
// been seen, by this goroutine or any other consumer, or until ctx ends.
// It does not interrupt a parked Wait: that Wait sees the marker as soon
// as it arrives, and handling it closes m.done.
func (c *CQ) await(ctx context.Context, m *mark) bool {
	for {
		if ctx.Err() != nil {
			return isDone(m)
		}
		select {
		case c.consume <- struct{}{}:
		case <-m.done:
			return true
		case <-ctx.Done():
			return isDone(m)
		case <-c.done:
			return isDone(m)
		}
		c.mu.Lock()
		c.drainLocked()
		c.mu.Unlock()
		intr := c.interruption()
		if !isDone(m) && c.wanted.Load() == 0 {
			n, _ := c.park(ctx, intr, c.scratch[:])
			c.mu.Lock()
			c.stashLocked(c.scratch[:n])
			c.mu.Unlock()
		}
		c.release()
		if isDone(m) {
			return true
		}
	}
}

func isDone(m *mark) bool {
	select {
	case <-m.done:
		return true
	default:
		return false
	}
}
