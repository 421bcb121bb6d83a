package comm

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
)

// Handle is a send or receive in flight, as Isend and Irecv return it. It
// implements Request. Its methods are safe for concurrent use.
type Handle struct {
	// Fields below are guarded by the lock of the peer the operation
	// involves, except where noted.
	p      *peer
	c      *Comm
	peerCR int // the peer's rank in c
	send   bool
	chKind uint8
	ctx    uint64
	tag    uint64
	buf    []byte
	reg    *region // the region buf lies in, nil when buf is not registered
	regOff int

	// seq orders the user channel's receives of c as they were posted.
	// gotTag is the tag of the message a receive took.
	seq    uint64
	gotTag uint64
	// A receive from AnySource (any) has no peer until a message claims
	// it: until then it waits in its communicator's queue (queued, linked
	// by next) and scan is how many of c's ranks it has looked at for a
	// message already waiting, guarded by the world's wildcards lock; the
	// message that claims it sets p and peerCR, under both locks.
	any    bool
	queued bool
	scan   int

	// next links the handle into its channel's queue of posted receives;
	// prevLive and nextLive into its peer's list of live handles.
	next               *Handle
	prevLive, nextLive *Handle
	live               bool

	// Rendezvous state.
	id       uint64 // the message id: ours for a send, the sender's for a receive
	total    int    // the message's length (a receive knows it once matched)
	issued   int    // receive: bytes asked for; send: unused
	moved    int    // bytes moved
	chunks   int    // ranges completed
	inflight int    // ranges and slots in flight that hold the handle's memory
	asked    bool   // receive: every chunk has been asked for
	zero     bool   // receive: the whole message moves in one range
	// abandoned: the caller or a failure gave it up; no more bytes of buf
	// may be read or written. failErr is what it finishes with once
	// nothing is in flight any more.
	abandoned bool
	failErr   error

	// epoch is the watchdog's tick count when the handle was posted: how
	// old it is, to a tick (see watchdog.go).
	epoch uint64

	// Completion: state, n and err are written once, before sig.
	state atomic.Uint32
	sig   chan struct{}
	n     int
	err   error
}

func newHandle() *Handle { return &Handle{sig: make(chan struct{}, 1)} }

// handles recycles the handles of Send and Recv, which never leave the
// communicator: a blocking call in steady use allocates nothing of its
// own.
var handles = sync.Pool{New: func() any { return newHandle() }}

// recycleLocked returns a finished handle of a blocking call to the pool.
// A handle that was given up may still be named by a queue (a control
// message not sent yet, a chunk in flight) and is left to the garbage
// collector instead. The caller holds the lock of h's peer, under which
// every queue reads its handles.
func (h *Handle) recycleLocked() {
	if !h.done() || h.abandoned || h.live {
		return
	}
	sig := h.sig
	select {
	case <-sig:
	default:
	}
	*h = Handle{sig: sig}
	handles.Put(h)
}

// Wait blocks until the operation completes or ctx ends, and returns the
// number of bytes sent or received. When ctx ends first the operation is
// still in flight and buf still belongs to it; Wait may be called again.
func (h *Handle) Wait(ctx context.Context) (int, error) {
	if h.state.Load() != 0 {
		return h.n, h.err
	}
	select {
	case <-h.sig:
		h.signal() // for any other waiter
		return h.n, h.err
	case <-ctx.Done():
		return 0, fmt.Errorf("comm: rank %d: %s: %w", h.c.rank, h.describe(), ctx.Err())
	}
}

// Cancel gives the operation up, as a blocking call gives its own up
// when its context ends: unless it has completed already, it finishes
// with an error wrapping cause once nothing in flight still uses its
// buffer, and a receive that no message took then takes none. Wait
// reports that error. Cancel may be called at any time, more than once.
func (h *Handle) Cancel(cause error) {
	if h.done() {
		return
	}
	err := fmt.Errorf("comm: rank %d: %s: %w", h.c.rank, h.describe(), cause)
	if h.any && h.c.w.wild.cancel(h, err) {
		return
	}
	// A receive from any rank that was not queued any more was claimed by
	// a message, under the wildcards lock cancel took: its peer is set.
	p := h.p
	if p == nil {
		return // finished alone, by Close or a failure
	}
	p.mu.Lock()
	h.cancelLocked(err)
	p.mu.Unlock()
	p.wake()
}

// Status tells who sent the message a receive took, with which tag, and
// how many bytes of it were received: what a receive from AnySource or
// with AnyTag needs to know. It is valid once Wait or Test has reported
// the handle complete; a receive that took no message reports Source
// AnySource if it was from any rank. For a send it names the peer,
// the tag and the bytes sent.
func (h *Handle) Status() Status {
	if h.state.Load() == 0 {
		return Status{Source: AnySource}
	}
	if h.send {
		return Status{Source: h.peerCR, Tag: h.tag, Len: h.n}
	}
	return Status{Source: h.peerCR, Tag: h.gotTag, Len: h.n}
}

// Test reports without blocking whether the operation has completed, and
// if so its result as Wait returns it.
func (h *Handle) Test() (done bool, n int, err error) {
	if h.state.Load() != 0 {
		return true, h.n, h.err
	}
	return false, 0, nil
}

func (h *Handle) signal() {
	select {
	case h.sig <- struct{}{}:
	default:
	}
}

func (h *Handle) done() bool { return h.state.Load() != 0 }

// finishLocked completes the handle and takes it off its peer's live list.
func (h *Handle) finishLocked(n int, err error) {
	if h.state.Load() != 0 {
		return
	}
	if h.live {
		h.p.unlinkLive(h)
	}
	if h.send && h.id != 0 {
		delete(h.p.tx, h.id)
	}
	h.n, h.err = n, err
	if err == nil {
		h.p.counts.done(h.send, n)
	}
	h.state.Store(1)
	h.signal()
}

// cancelLocked gives the handle up with err: it finishes at once unless
// ranges holding its memory are still in flight, and then when the last
// of them completes. Queues that still name it skip it.
func (h *Handle) cancelLocked(err error) {
	if h.done() {
		return
	}
	h.abandoned = true
	if h.failErr == nil {
		h.failErr = err
	}
	if h.inflight == 0 {
		h.finishLocked(0, h.failErr)
	}
}

// settleLocked finishes a handle whose last range completed, if it was
// given up.
func (h *Handle) settleLocked() bool {
	if h.abandoned && h.inflight == 0 {
		h.finishLocked(0, h.failErr)
		return true
	}
	return false
}

// describe names the operation in errors.
func (h *Handle) describe() string {
	ch := ""
	switch h.chKind {
	case chanOrdered:
		ch = "ordered "
	case chanInternal:
		ch = "internal "
	}
	if h.send {
		return fmt.Sprintf("%ssend of %d bytes to rank %d with tag %#x", ch, len(h.buf), h.peerCR, h.tag)
	}
	if h.chKind != chanUser {
		return fmt.Sprintf("%sreceive of up to %d bytes from rank %d with tag %#x", ch, len(h.buf), h.peerCR, h.tag)
	}
	// A receive from any rank gets its peer when a message claims it,
	// which may happen while this runs: it is named by what it asked for.
	from := AnySource
	if !h.any {
		from = h.peerCR
	}
	return fmt.Sprintf("%sreceive of up to %d bytes from %s", ch, len(h.buf), describeMatch(from, h.tag))
}

var _ Request = (*Handle)(nil)
