package comm

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/rdmacell/rdmacell/flight"
	"github.com/rdmacell/rdmacell/verbs"
)

// Comm is a communicator: a group of ranks that exchange messages. Init
// returns the world communicator, with every rank of the job; Split makes
// smaller ones. Its methods are safe for concurrent use.
type Comm struct {
	w      *world
	id     uint64 // context id, carried by every message of the communicator
	rank   int
	ranks  []int       // rank in the communicator → rank in the job
	member map[int]int // rank in the job → rank in the communicator

	localRank, localSize int

	closed atomic.Bool
	// poison fails the ordered and internal channels: a rank of the
	// communicator is gone, so no collective can complete.
	poison atomic.Pointer[failure]

	// recvSeq numbers the receives of the user channel in post order,
	// which orders receives from any rank against the others.
	recvSeq atomic.Uint64

	mu      sync.Mutex
	splits  uint64
	shrinks uint64
}

// Rank is this process's rank in the communicator.
func (c *Comm) Rank() int { return c.rank }

// Size is the number of ranks in the communicator.
func (c *Comm) Size() int { return len(c.ranks) }

// LocalRank is this process's rank among the communicator's ranks on its
// host, and LocalSize their number.
func (c *Comm) LocalRank() int { return c.localRank }

// LocalSize is the number of the communicator's ranks on this host.
func (c *Comm) LocalSize() int { return c.localSize }

// Host is the host name rank peer registered with (see Options.Host), or
// "" if peer is out of range. Ranks with one host name share memory when
// the transport allows it.
func (c *Comm) Host(peer int) string {
	if peer < 0 || peer >= len(c.ranks) {
		return ""
	}
	return c.w.peers[c.ranks[peer]].host
}

// Recorder returns the flight recorder of this process, which every
// communicator of the job (Split's included) and its collectives record
// their operations in.
func (c *Comm) Recorder() *flight.Recorder { return c.w.rec }

// ID tells the communicator apart from the others of the job: it is the
// Comm of the operations its collectives record.
func (c *Comm) ID() uint64 { return c.id }

// Job is the id of the job the communicator belongs to.
func (c *Comm) Job() string { return c.w.opts.Job }

// WorldRank is the rank in the job (the world communicator) of the
// communicator's rank r, or -1 if r is out of range.
func (c *Comm) WorldRank(r int) int {
	if r < 0 || r >= len(c.ranks) {
		return -1
	}
	return c.ranks[r]
}

// Transport names how this rank reaches rank peer: "shm", "tcp", "ibv",
// or "self"; "" if peer is out of range.
func (c *Comm) Transport(peer int) string {
	if peer < 0 || peer >= len(c.ranks) {
		return ""
	}
	p := c.w.peers[c.ranks[peer]]
	if p.self {
		return "self"
	}
	return p.dev.String()
}

// Send sends buf to rank peer under tag and returns once buf may be used
// again: small messages once they have landed in the peer's memory, large
// ones once a receive has taken them and every byte has moved. Messages
// to one peer with one tag are received in the order they were sent; tag
// may be any value but AnyTag. If ctx ends first the send is given up; a
// large message from memory of Alloc may then still be read until it is
// finished or the communicator is closed.
func (c *Comm) Send(ctx context.Context, peer int, tag uint64, buf []byte) error {
	h, err := c.post(true, chanUser, peer, tag, buf, true)
	if err != nil {
		return err
	}
	_, err = c.wait(ctx, h)
	return err
}

// Recv receives the next message from rank peer with tag into buf and
// returns its length. peer may be AnySource and tag AnyTag, as in MPI: a
// message goes to the oldest receive posted that it fits, so the messages
// of one sender keep their order however specific and wildcard receives
// are mixed, and RecvStatus or Irecv's Handle.Status tell who sent it
// with which tag. A message longer than buf fails with a
// *TruncateError. If ctx ends first the receive is given up and takes no
// message; if a message was already moving into memory of Alloc, that
// memory may still be written until it is finished or the communicator is
// closed.
func (c *Comm) Recv(ctx context.Context, peer int, tag uint64, buf []byte) (int, error) {
	h, err := c.post(false, chanUser, peer, tag, buf, true)
	if err != nil {
		return 0, err
	}
	return c.wait(ctx, h)
}

// RecvStatus is Recv returning the Status of the message received: its
// sender, its tag and its length, which a receive from AnySource or with
// AnyTag needs. When the receive fails, Status names what is known of
// the message it took, if any.
func (c *Comm) RecvStatus(ctx context.Context, peer int, tag uint64, buf []byte) (Status, error) {
	h, err := c.post(false, chanUser, peer, tag, buf, true)
	if err != nil {
		return Status{Source: peer, Tag: tag}, err
	}
	return c.waitStatus(ctx, h)
}

// Isend starts sending buf to rank peer under tag. buf must not change
// until the handle completes.
func (c *Comm) Isend(peer int, tag uint64, buf []byte) (*Handle, error) {
	return c.post(true, chanUser, peer, tag, buf, false)
}

// Irecv starts receiving the next message from rank peer with tag into
// buf; peer may be AnySource and tag AnyTag (see Recv), and the Handle's
// Status then says what it took. Receives for one peer and tag take
// messages in the order they were posted; receives with different tags
// are independent.
func (c *Comm) Irecv(peer int, tag uint64, buf []byte) (*Handle, error) {
	return c.post(false, chanUser, peer, tag, buf, false)
}

// Alloc returns n bytes of registered memory, off the Go heap: messages
// from and into it move without a copy. It stays valid until Free or
// Close.
func (c *Comm) Alloc(n int) ([]byte, error) {
	switch {
	case n < 0:
		return nil, fmt.Errorf("%w: comm rank %d: Alloc(%d): want n >= 0", ErrInvalidArgument, c.rank, n)
	case n == 0:
		return []byte{}, nil
	}
	if err := c.w.failure(); err != nil {
		return nil, err
	}
	r, err := c.w.mem.alloc(n, true)
	if err != nil {
		return nil, fmt.Errorf("comm: rank %d: Alloc(%d): %w", c.rank, n, err)
	}
	return r.bytes(), nil
}

// Free releases memory from Alloc. It must not be in use by an operation
// in progress.
func (c *Comm) Free(b []byte) error { return c.w.mem.free(b) }

// Register makes b, memory the program already owns (a Go slice, memory
// of C or of another library), registered memory of the communicator
// without copying it: messages from and into it move without a staging
// copy over tcp and RDMA NICs, as those in memory of Alloc do. Over
// shared memory they are copied as before, since a peer process can map
// only memory of Alloc. The communicator keeps b reachable until
// Unregister or Close; its owner must not free it, nor grow it with
// append, meanwhile. b may not overlap other registered memory.
func (c *Comm) Register(b []byte) error {
	if len(b) == 0 {
		return fmt.Errorf("%w: comm rank %d: Register of no bytes", ErrInvalidArgument, c.rank)
	}
	if _, err := c.w.mem.adopt(b); err != nil {
		if errors.Is(err, verbs.ErrInvalidArgument) {
			err = fmt.Errorf("%w: %w", ErrInvalidArgument, err)
		}
		return fmt.Errorf("comm: rank %d: Register of %d bytes: %w", c.rank, len(b), err)
	}
	return nil
}

// Unregister ends Register of b, which must be exactly what was
// registered; no operation may still be using it. Afterwards b is the
// program's again, and messages on it are staged.
func (c *Comm) Unregister(b []byte) error { return c.w.mem.forget(b) }

// P2P returns the communicator's ordered channel, on which the
// collectives are built: its messages are matched strictly in posting
// order per pair of ranks, and a tag that differs from the receiver's is
// a *MismatchError. Its messages never mix with those of Send and Recv.
func (c *Comm) P2P() P2P { return ordered{c} }

// Abort fails every operation of the job, on this rank and on every rank
// it can reach, with an *AbortError naming this rank and err. It returns
// within about a second whatever the state of the other ranks; the
// communicator (and every one of the job) is unusable after it, and Close
// still releases its resources.
func (c *Comm) Abort(err error) { c.w.abort(err) }

// Close closes the communicator. Closing the world communicator releases
// everything: every connection, registered region (Alloc's included),
// shared-memory segment and the job membership; it first says goodbye to
// every rank and waits, at most Options.CloseTimeout, for theirs, so that
// nothing still moving between them is cut off. Operations in progress
// fail with ErrClosed. Closing a communicator from Split only ends its
// own operations. Close is idempotent.
func (c *Comm) Close() error {
	if c.id == worldID {
		return c.w.close()
	}
	if !c.closed.CompareAndSwap(false, true) {
		return nil
	}
	err := fmt.Errorf("comm: rank %d: %w", c.rank, ErrClosed)
	c.w.closedCtx.Store(c.id, true)
	for _, r := range c.ranks {
		p := c.w.peers[r]
		p.mu.Lock()
		p.cancelWhereLocked(err, func(h *Handle) bool { return h.c == c })
		for _, kind := range []uint8{chanUser, chanOrdered, chanInternal} {
			p.dropChannelLocked(chanKey{c.id, kind}, err)
		}
		p.progressLocked()
		p.mu.Unlock()
		p.wake()
	}
	c.w.wild.drop(c.id, err)
	c.w.mu.Lock()
	delete(c.w.comms, c.id)
	c.w.mu.Unlock()
	return nil
}

// post validates and starts a send or receive on a channel. A pooled
// handle is for a blocking call, which recycles it.
func (c *Comm) post(send bool, kind uint8, peer int, tag uint64, buf []byte, pooled bool) (*Handle, error) {
	if kind == chanUser {
		switch {
		case send && tag == AnyTag:
			return nil, fmt.Errorf("%w: comm rank %d: send to peer %d with tag AnyTag (%#x): want a tag a receive can name", ErrInvalidArgument, c.rank, peer, tag)
		case !send && peer == AnySource:
			return c.postAny(tag, buf, pooled)
		}
	}
	if peer < 0 || peer >= len(c.ranks) {
		op, alt := "receive from", ""
		switch {
		case send:
			op = "send to"
		case kind == chanUser:
			alt = " or AnySource"
		}
		return nil, fmt.Errorf("%w: comm rank %d: %s peer %d: want 0 <= peer < size %d%s", ErrInvalidArgument, c.rank, op, peer, len(c.ranks), alt)
	}
	p := c.w.peers[c.ranks[peer]]
	var h *Handle
	if pooled {
		h = handles.Get().(*Handle)
	} else {
		h = newHandle()
	}
	h.p, h.c, h.peerCR, h.send, h.chKind, h.ctx, h.tag, h.gotTag, h.buf = p, c, peer, send, kind, c.id, tag, tag, buf
	h.reg, h.regOff = c.w.mem.lookup(buf, p.dev)
	h.epoch = c.w.epoch.Load()
	if kind == chanUser && !send {
		h.seq = c.recvSeq.Add(1)
	}
	p.mu.Lock()
	err := c.check(p, kind)
	switch {
	case err == nil && send:
		p.connectLocked()
		p.postSendLocked(h)
	case err == nil:
		p.connectLocked()
		p.postRecvLocked(h)
	case !send && err == p.err && p.takeArrivedLocked(h):
		// A message the peer sent before it left.
	default:
		p.mu.Unlock()
		if pooled {
			*h = Handle{sig: h.sig}
			handles.Put(h)
		}
		return nil, err
	}
	p.mu.Unlock()
	return h, nil
}

// check says why an operation with p on a channel kind cannot start.
func (c *Comm) check(p *peer, kind uint8) error {
	if err := c.channelErr(kind); err != nil {
		return err
	}
	return p.err
}

// channelErr is why no operation on c's channels of the kind can proceed,
// whatever the peer: the job failed, c is closed, or (for the ordered and
// internal channels) a member of c died.
func (c *Comm) channelErr(kind uint8) error {
	if err := c.w.failure(); err != nil {
		return err
	}
	if c.closed.Load() {
		return fmt.Errorf("comm: rank %d: %w", c.rank, ErrClosed)
	}
	if kind != chanUser {
		if f := c.poison.Load(); f != nil {
			return f.err
		}
	}
	return nil
}

// wait waits for the handle of a blocking call, gives it up if ctx ends
// first, and recycles it.
func (c *Comm) wait(ctx context.Context, h *Handle) (int, error) {
	st, err := c.waitStatus(ctx, h)
	return st.Len, err
}

// waitStatus is wait returning the handle's Status.
func (c *Comm) waitStatus(ctx context.Context, h *Handle) (Status, error) {
	_, err := h.Wait(ctx)
	if h.any && !h.done() && c.w.wild.cancel(h, err) {
		h.recycleLocked() // no message took it: nothing else names it
		return Status{Source: AnySource, Tag: h.tag}, err
	}
	p := h.p // a receive from any rank that completed or was claimed has one
	if p == nil {
		// A receive from any rank that no message took, given up by
		// Close, a failure or the watchdog.
		st, err := h.Status(), h.err
		h.recycleLocked()
		return st, err
	}
	p.mu.Lock()
	done := h.done()
	st := h.Status()
	if done {
		err = h.err
	} else {
		st = Status{Source: h.peerCR, Tag: h.gotTag} // stable under the lock
		h.cancelLocked(err)
	}
	h.recycleLocked()
	p.mu.Unlock()
	if !done {
		// A receive given up may owe the peer a NACK, which the pump
		// sends. A completed handle leaves it nothing to do, and waking
		// it would cost every blocking call a spurious wake-up.
		p.wake()
	}
	return st, err
}

// poisonOrdered fails the ordered and internal channels of c with err.
func (c *Comm) poisonOrdered(err error) {
	if !c.poison.CompareAndSwap(nil, &failure{err}) {
		return
	}
	for _, r := range c.ranks {
		q := c.w.peers[r]
		q.mu.Lock()
		q.cancelWhereLocked(err, func(h *Handle) bool { return h.c == c && h.chKind != chanUser })
		q.mu.Unlock()
		q.wake()
	}
}

// idle reports that nothing is in progress and every goroutine of the
// communicator's peers is parked: an idle communicator uses no CPU.
func (c *Comm) idle() bool {
	for _, p := range c.w.peers {
		if p.self {
			continue
		}
		p.mu.Lock()
		busy := p.live != nil || p.pend.len() > 0 || p.sdone != p.sseq || p.brecvF.len() > 0 || p.bsendF.len() > 0
		p.mu.Unlock()
		if busy || !p.parked.Load() {
			return false
		}
		for _, l := range []link{p.ctl, p.bulk} {
			if l != nil && !l.progress().Parked {
				return false
			}
		}
	}
	return true
}
