// Package memp2p is an in-memory point-to-point layer for testing the
// collectives: a World of n ranks that run as goroutines of one process,
// each with an Endpoint that implements comm.P2P.
//
// It keeps the contract of the communicator's ordered channel: messages
// from one rank to another are matched strictly in posting order, and a
// receive whose expected tag differs from the tag of the message at its
// position fails with a *comm.MismatchError (the message is consumed). A
// message longer than the receive buffer fails both sides. Matching is a
// rendezvous: the bytes are copied when both sides have posted, and both
// requests complete then, so a program that waits for a send before
// posting the receive its peer needs deadlocks here as it could on a real
// transport.
//
// Requests are recycled when Wait returns their result, so that steady
// state allocates nothing: a request must be waited at most once, and not
// used after that.
package memp2p

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/rdmacell/rdmacell/comm"
	"github.com/rdmacell/rdmacell/flight"
)

// ErrTooLong is the error of a message longer than the receive buffer
// posted for it.
var ErrTooLong = errors.New("memp2p: message longer than the receive buffer")

// World is a set of ranks connected by ordered in-memory links.
type World struct {
	n     int
	hosts []string // per rank; nil: every rank on a host of its own
	links []link   // links[src*n+dst]
	eps   []*Endpoint

	sent atomic.Int64

	mu    sync.Mutex
	alloc map[*byte]int
}

// link is the ordered channel from one rank to another.
type link struct {
	mu    sync.Mutex
	sends []*Request
	recvs []*Request
	used  atomic.Bool // a message was sent on it
}

// New returns a world of n ranks.
func New(n int) *World {
	w := &World{n: n, links: make([]link, n*n), alloc: make(map[*byte]int)}
	for r := range n {
		w.eps = append(w.eps, &Endpoint{w: w, rank: r, rec: flight.New(0, nil)})
	}
	return w
}

// Host makes every endpoint report that its peers share its host (the
// transport "shm"), as the communicator's ordered channel does for ranks
// of one host, so that the collectives share memory among the ranks.
func (w *World) Host() *World {
	hosts := make([]string, w.n)
	for r := range hosts {
		hosts[r] = "host"
	}
	return w.Hosts(hosts...)
}

// Hosts places rank r on host names[r]: ranks with one name report each
// other over "shm", as the communicator does for ranks of one host, and
// the others over "mem".
func (w *World) Hosts(names ...string) *World {
	if len(names) != w.n {
		panic(fmt.Sprintf("memp2p: %d host names for %d ranks", len(names), w.n))
	}
	w.hosts = names
	return w
}

// Size is the number of ranks.
func (w *World) Size() int { return w.n }

// Peers returns the ranks rank has sent a message to: over a transport
// that connects on demand, those it connected to.
func (w *World) Peers(rank int) []int {
	var peers []int
	for dst := range w.n {
		if w.links[rank*w.n+dst].used.Load() {
			peers = append(peers, dst)
		}
	}
	return peers
}

// Sent counts the messages sent so far, by every rank.
func (w *World) Sent() int64 { return w.sent.Load() }

// Endpoint returns rank r's end.
func (w *World) Endpoint(r int) *Endpoint { return w.eps[r] }

// Pending counts posted sends and receives not yet matched, over all
// links: zero after a run in which every rank posted the same messages.
func (w *World) Pending() int {
	total := 0
	for i := range w.links {
		l := &w.links[i]
		l.mu.Lock()
		total += len(l.sends) + len(l.recvs)
		l.mu.Unlock()
	}
	return total
}

// Allocated is the number of bytes handed out by Alloc and not freed.
func (w *World) Allocated() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	total := 0
	for _, n := range w.alloc {
		total += n
	}
	return total
}

// Endpoint is one rank's view of the world; it implements comm.P2P.
// Like the communicator's ordered channel it has a flight recorder, in
// which the collectives record their operations.
type Endpoint struct {
	w    *World
	rank int
	rec  *flight.Recorder

	mu   sync.Mutex
	free []*Request
}

var _ comm.P2P = (*Endpoint)(nil)

// Rank returns the endpoint's rank.
func (e *Endpoint) Rank() int { return e.rank }

// Size returns the number of ranks of the world.
func (e *Endpoint) Size() int { return e.w.n }

// Recorder returns the endpoint's flight recorder.
func (e *Endpoint) Recorder() *flight.Recorder { return e.rec }

// ID is the id the collectives record their operations under.
func (e *Endpoint) ID() uint64 { return 1 }

// Transport is "shm" to a peer on this rank's host, "mem" to others.
func (e *Endpoint) Transport(peer int) string {
	if e.Host(peer) == e.Host(e.rank) {
		return "shm"
	}
	return "mem"
}

// Host is the host of peer (see Hosts).
func (e *Endpoint) Host(peer int) string {
	if e.w.hosts == nil {
		return "host-" + strconv.Itoa(peer)
	}
	return e.w.hosts[peer]
}

// Err is always nil: an in-memory world does not fail.
func (e *Endpoint) Err() error { return nil }

// Isend posts buf for peer under tag.
func (e *Endpoint) Isend(peer int, tag uint64, buf []byte) (comm.Request, error) {
	if err := e.check(peer); err != nil {
		return nil, err
	}
	e.w.sent.Add(1)
	r := e.get(true, peer, tag, buf)
	l := &e.w.links[e.rank*e.w.n+peer]
	l.used.Store(true)
	l.mu.Lock()
	if len(l.recvs) > 0 {
		rv := pop(&l.recvs)
		l.mu.Unlock()
		match(r, rv)
		return r, nil
	}
	l.sends = append(l.sends, r)
	l.mu.Unlock()
	return r, nil
}

// Irecv posts buf for the next message from peer, which must carry tag.
func (e *Endpoint) Irecv(peer int, tag uint64, buf []byte) (comm.Request, error) {
	if err := e.check(peer); err != nil {
		return nil, err
	}
	r := e.get(false, peer, tag, buf)
	l := &e.w.links[peer*e.w.n+e.rank]
	l.mu.Lock()
	if len(l.sends) > 0 {
		s := pop(&l.sends)
		l.mu.Unlock()
		match(s, r)
		return r, nil
	}
	l.recvs = append(l.recvs, r)
	l.mu.Unlock()
	return r, nil
}

// Alloc returns n bytes of zeroed memory.
func (e *Endpoint) Alloc(n int) ([]byte, error) {
	if n <= 0 {
		return nil, fmt.Errorf("memp2p: rank %d: Alloc(%d): want a positive size", e.rank, n)
	}
	b := make([]byte, n)
	e.w.mu.Lock()
	e.w.alloc[unsafe.SliceData(b)] = n
	e.w.mu.Unlock()
	return b, nil
}

// Free returns memory from Alloc.
func (e *Endpoint) Free(b []byte) error {
	e.w.mu.Lock()
	defer e.w.mu.Unlock()
	p := unsafe.SliceData(b)
	if _, ok := e.w.alloc[p]; !ok {
		return fmt.Errorf("memp2p: rank %d: Free of memory that Alloc did not return", e.rank)
	}
	delete(e.w.alloc, p)
	return nil
}

func (e *Endpoint) check(peer int) error {
	if peer < 0 || peer >= e.w.n || peer == e.rank {
		return fmt.Errorf("memp2p: rank %d: peer %d: want another rank in [0, %d)", e.rank, peer, e.w.n)
	}
	return nil
}

func (e *Endpoint) get(send bool, peer int, tag uint64, buf []byte) *Request {
	e.mu.Lock()
	var r *Request
	if k := len(e.free); k > 0 {
		r = e.free[k-1]
		e.free = e.free[:k-1]
	} else {
		r = &Request{ep: e, done: make(chan struct{}, 1)}
	}
	e.mu.Unlock()
	r.send, r.peer, r.tag, r.buf = send, peer, tag, buf
	return r
}

// pop takes the head of a FIFO, keeping its backing array.
func pop(q *[]*Request) *Request {
	r := (*q)[0]
	copy(*q, (*q)[1:])
	(*q)[len(*q)-1] = nil
	*q = (*q)[:len(*q)-1]
	return r
}

// match completes a send and the receive at its position.
func match(s, r *Request) {
	switch {
	case s.tag != r.tag:
		r.complete(0, &comm.MismatchError{Rank: r.ep.rank, Peer: s.ep.rank, Want: r.tag, Got: s.tag})
		s.complete(len(s.buf), nil)
	case len(s.buf) > len(r.buf):
		err := fmt.Errorf("%w: rank %d sent %d bytes to rank %d, which posted %d", ErrTooLong, s.ep.rank, len(s.buf), r.ep.rank, len(r.buf))
		r.complete(0, err)
		s.complete(0, err)
	default:
		n := copy(r.buf, s.buf)
		r.complete(n, nil)
		s.complete(n, nil)
	}
}

// Request is a posted send or receive.
type Request struct {
	ep    *Endpoint
	send  bool
	peer  int
	tag   uint64
	buf   []byte
	n     int
	err   error
	state atomic.Bool
	done  chan struct{}
}

func (r *Request) complete(n int, err error) {
	r.n, r.err = n, err
	r.state.Store(true)
	r.done <- struct{}{}
}

// Wait blocks until the request completes or ctx ends. A completed
// request is recycled: do not use it again.
func (r *Request) Wait(ctx context.Context) (int, error) {
	select {
	case <-r.done:
	case <-ctx.Done():
		dir := "receive from"
		if r.send {
			dir = "send to"
		}
		return 0, fmt.Errorf("memp2p: rank %d: %s rank %d: %w", r.ep.rank, dir, r.peer, ctx.Err())
	}
	n, err := r.n, r.err
	r.buf, r.err = nil, nil
	r.state.Store(false)
	e := r.ep
	e.mu.Lock()
	e.free = append(e.free, r)
	e.mu.Unlock()
	return n, err
}

// Test reports whether the request has completed.
func (r *Request) Test() (bool, int, error) {
	if !r.state.Load() {
		return false, 0, nil
	}
	return true, r.n, r.err
}
