package collectives

import (
	"context"
	"errors"
	"fmt"
	"unsafe"

	"github.com/rdmacell/rdmacell/comm"
	"github.com/rdmacell/rdmacell/flight"
)

// run is the executor's state for the operation in progress. The group
// keeps one and reuses it.
type run struct {
	g     *Group
	op    *operation
	ctx   context.Context
	fp    fingerprint
	hash  uint64 // of fp
	base  uint64 // tag of the operation's data messages, without the step
	esize int
	cb    int // chunk size in bytes, a whole number of elements
	// aligned: the operation failed without leaving messages in the
	// ranks' streams (the fingerprint exchange found a disagreement and
	// every rank saw it), so the group stays usable.
	aligned bool
	rf      rankFold
	// h is the operation's record in the group's flight recorder.
	h flight.Handle
	// An operation riding on the fingerprint exchange (fused.go) works
	// on work, cut at off where it has blocks, and notes in badRide data
	// that came in with the wrong length.
	riding  bool
	work    []byte
	off     []int
	badRide string
}

// pending is a send whose completion is waited for later.
type pending struct {
	req        comm.Request
	peer, step int
}

// chunk is a piece of a pipelined transfer: the algorithm's step and a
// byte range.
type chunk struct{ step, lo, hi int }

func (x *run) begin(op *operation) {
	x.op, x.ctx, x.aligned = op, op.ctx, false
	x.riding, x.work, x.off, x.badRide = false, nil, nil, ""
	switch {
	case x.g.shm != nil && !op.kind.implements(x.g.algo):
		op.algo = Shared
	case x.g.hierarchical(op):
		op.algo = Hierarchical
	case op.algo == Hierarchical:
		// By the whole vector's size, from what every rank knows (Reduce
		// has no recv but at the root).
		bytes := op.count * max(op.dt.size(), 1)
		if op.kind == kAllGather || op.kind == kReduceScatter {
			bytes *= x.g.size
		}
		op.algo = choose(op.kind, Auto, x.g.size, bytes)
	}
	x.esize = max(op.dt.size(), 1)
	x.cb = max(x.g.chunk/x.esize, 1) * x.esize
	x.fp = fingerprint{
		seq: uint32(op.seq), root: int32(op.root), count: uint64(op.count),
		kind: op.kind, dt: op.dt, op: op.rop, algo: op.algo, mode: op.mode,
	}
	if op.algo == Ring || op.algo == Chain || op.mode != modeDefault && op.algo != Shared {
		// Only the pipelines' message counts depend on the chunk size.
		x.fp.chunk = uint32(x.g.chunk)
	}
	if op.kind.varies() {
		x.fp.vhash = hashInts(op.counts)
	}
	x.hash = x.fp.hash()
	x.base = dataTagBase(&x.fp, x.hash)
}

func (x *run) end() {
	x.op, x.ctx = nil, nil
	clear(x.g.sc.reqs)
	clear(x.g.sc.sends)
}

func (x *run) exec() error {
	op := x.op
	if err := x.ctx.Err(); err != nil {
		return x.fail(-1, -1, "", err)
	}
	if x.g.size == 1 {
		x.local()
		return nil
	}
	if s := x.g.shm; s != nil {
		// Every operation's first phase carries its fingerprint; a
		// Shared one moves data in it as well.
		x.fp.put(s.fp(s.me, s.step+1))
		*s.hash(s.me, s.step+1) = x.hash
		if op.algo == Shared {
			return x.shExec()
		}
		if x.g.verify {
			if err := x.shSync(0); err != nil {
				return err
			}
		}
	} else if x.g.verify {
		if x.rides() {
			return x.ride()
		}
		if err := x.verify(); err != nil {
			return err
		}
		if op.kind == kBarrier {
			// Every rank has every other's record: it has heard from all.
			return nil
		}
	}
	if op.mode != modeDefault {
		return x.reproExec()
	}
	if op.algo == Hierarchical {
		return x.hierExec()
	}
	switch op.kind {
	case kAllReduce:
		switch op.algo {
		case Ring:
			return x.ringAllReduce()
		case HalvingDoubling:
			return x.hdAllReduce()
		}
		return x.rdAllReduce()
	case kAllGather, kAllGatherV:
		return x.allGather()
	case kReduceScatter, kReduceScatterV:
		return x.reduceScatter()
	case kAllToAll, kAllToAllV:
		return x.allToAll()
	case kGather, kGatherV:
		return x.gather()
	case kScatter, kScatterV:
		return x.scatter()
	case kBroadcast:
		if op.algo == Chain {
			return x.chainBroadcast()
		}
		return x.treeBroadcast()
	case kReduce:
		if op.algo == Chain {
			return x.chainReduce()
		}
		return x.treeReduce()
	case kBarrier:
		return x.dissemination()
	}
	return fmt.Errorf("collectives: rank %d: unknown collective %d", x.g.rank, op.kind)
}

func (x *run) shExec() error {
	switch x.op.kind {
	case kAllReduce:
		return x.shAllReduce()
	case kAllGather, kAllGatherV, kGather, kGatherV:
		return x.shGather()
	case kReduceScatter, kReduceScatterV:
		return x.shReduceScatter()
	case kScatter, kScatterV:
		return x.shScatter()
	case kAllToAll:
		return x.shAllToAll()
	case kAllToAllV:
		return x.shAllToAllV()
	case kBroadcast:
		return x.shBroadcast()
	case kReduce:
		return x.shReduce()
	}
	return x.shBarrier()
}

// local is every collective on one rank: a copy at most.
func (x *run) local() {
	op := x.op
	switch op.kind {
	case kBarrier:
	case kAllReduce, kReduce, kReduceScatter, kReduceScatterV:
		if op.mode != modeDefault {
			// The fold of one value, so that a NaN is the one any
			// world size gives.
			x.foldRanks(op.recv, func(int) []byte { return op.send })
			return
		}
		copyUnlessSame(op.recv, op.send[:len(op.recv)])
	default:
		copyUnlessSame(op.recv, op.send)
	}
}

// copyUnlessSame copies src to dst unless they are the same memory.
func copyUnlessSame(dst, src []byte) {
	if len(src) > 0 && !same(dst, src) {
		copy(dst, src)
	}
}

// same reports whether a and b start at the same address.
func same(a, b []byte) bool {
	return len(a) > 0 && len(b) > 0 && unsafe.SliceData(a) == unsafe.SliceData(b)
}

// overlap reports whether a and b share any byte.
func overlap(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	pa, pb := uintptr(unsafe.Pointer(unsafe.SliceData(a))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return pa < pb+uintptr(len(b)) && pb < pa+uintptr(len(a))
}

func mod(a, n int) int { return ((a % n) + n) % n }

// combine writes a op b into dst.
func (x *run) combine(dst, a, b []byte) { x.op.red.combine(dst, a, b) }

// finish applies the op's final step (Avg's division) to a fully reduced
// range.
func (x *run) finish(b []byte) {
	if f := x.op.red.finish; f != nil && len(b) > 0 {
		f(b, x.g.size)
	}
}

func (x *run) tag(step int) uint64 { return x.base | uint64(uint32(step)) }

func (x *run) isend(peer, step int, b []byte) (comm.Request, error) {
	req, err := x.g.p.Isend(peer, x.tag(step), b)
	if err != nil {
		return nil, x.fail(step, peer, "send", err)
	}
	return req, nil
}

func (x *run) irecv(peer, step int, b []byte) (comm.Request, error) {
	req, err := x.g.p.Irecv(peer, x.tag(step), b)
	if err != nil {
		return nil, x.fail(step, peer, "receive", err)
	}
	return req, nil
}

// waiting records that the operation waits for peer at step.
func (x *run) waiting(step, peer int, d flight.Dir) {
	if r := x.g.rec; r != nil {
		r.Wait(x.h, step, peer, d)
	}
}

func (x *run) waitSend(req comm.Request, peer, step int) error {
	x.waiting(step, peer, flight.Send)
	if _, err := req.Wait(x.ctx); err != nil {
		return x.fail(step, peer, "send", err)
	}
	return nil
}

// waitRecv waits for a receive that must bring exactly want bytes.
func (x *run) waitRecv(req comm.Request, peer, step, want int) error {
	x.waiting(step, peer, flight.Recv)
	n, err := req.Wait(x.ctx)
	if err != nil {
		return x.fail(step, peer, "receive", err)
	}
	if n != want {
		return &MismatchError{Rank: x.g.rank, Op: x.op.kind.String(), Seq: x.op.seq, Odd: []int{peer},
			Detail: fmt.Sprintf("at step %d rank %d sent %d elements where this rank expected %d", step, peer, n/x.esize, want/x.esize)}
	}
	return nil
}

// sendrecv sends sb to one peer while receiving rb from another (or the
// same) and waits for both.
func (x *run) sendrecv(to int, sb []byte, from int, rb []byte, step int) error {
	rq, err := x.irecv(from, step, rb)
	if err != nil {
		return err
	}
	sq, err := x.isend(to, step, sb)
	if err != nil {
		return err
	}
	if err := x.waitRecv(rq, from, step, len(rb)); err != nil {
		return err
	}
	return x.waitSend(sq, to, step)
}

// send sends b and waits for it.
func (x *run) send(to, step int, b []byte) error {
	sq, err := x.isend(to, step, b)
	if err != nil {
		return err
	}
	return x.waitSend(sq, to, step)
}

// recv receives exactly len(b) bytes and waits for them.
func (x *run) recv(from, step int, b []byte) error {
	rq, err := x.irecv(from, step, b)
	if err != nil {
		return err
	}
	return x.waitRecv(rq, from, step, len(b))
}

// later posts a send whose completion flush waits for.
func (x *run) later(to, step int, b []byte) error {
	sq, err := x.isend(to, step, b)
	if err != nil {
		return err
	}
	x.g.sc.sends = append(x.g.sc.sends, pending{sq, to, step})
	return nil
}

// flush waits for the sends posted with later.
func (x *run) flush() error {
	s := x.g.sc.sends
	for i, p := range s {
		if err := x.waitSend(p.req, p.peer, p.step); err != nil {
			return err
		}
		s[i].req = nil
	}
	x.g.sc.sends = s[:0]
	return nil
}

// requests returns n request slots from scratch.
func (x *run) requests(n int) []comm.Request {
	if cap(x.g.sc.reqs) < n {
		x.g.sc.reqs = make([]comm.Request, n)
	}
	return x.g.sc.reqs[:n]
}

// fail wraps err with where it happened. A transport's mismatch becomes a
// *MismatchError that decodes both tags.
func (x *run) fail(step, peer int, dir string, err error) error {
	var cm *comm.MismatchError
	if errors.As(err, &cm) {
		return &MismatchError{Rank: x.g.rank, Op: x.op.kind.String(), Seq: x.op.seq, Odd: []int{peer},
			Detail: fmt.Sprintf("rank %d sent %s where this rank, at step %d of %s, expected %s",
				peer, describeTag(cm.Got), step, x.fp, describeTag(cm.Want)),
			Err: err}
	}
	if dir != "" {
		err = fmt.Errorf("%s: %w", dir, err)
	}
	return &OpError{Rank: x.g.rank, Op: x.op.kind.String(), Seq: x.op.seq, Algorithm: x.op.algo, Step: step, Peer: peer, Err: err}
}

// offsets returns n+1 byte offsets from slot i: block b is
// [off[b], off[b+1]). With counts nil the blocks split total elements as
// evenly as possible (the first total%n get one more); with counts they
// are counts[b] elements each.
func (x *run) offsets(i, total int, counts []int) []int {
	n := x.g.size
	off := x.g.sc.intsN(i, n+1)
	for b := range n {
		c := 0
		if counts != nil {
			c = counts[b]
		} else {
			c = total / n
			if b < total%n {
				c++
			}
		}
		off[b+1] = off[b] + c*x.esize
	}
	return off
}

// equalOffsets returns offsets of n blocks of count elements each.
func (x *run) equalOffsets(i, count int) []int {
	n := x.g.size
	off := x.g.sc.intsN(i, n+1)
	for b := range n {
		off[b+1] = off[b] + count*x.esize
	}
	return off
}

// plan lists, in order, the chunks of a ring phase of steps steps whose
// step s covers block mod(first-s, n), each cut into chunks of x.cb.
func (x *run) plan(off []int, first, steps int) []chunk {
	n := x.g.size
	cs := x.g.sc.chunks[:0]
	for s := range steps {
		b := mod(first-s, n)
		for lo := off[b]; lo < off[b+1]; lo += x.cb {
			cs = append(cs, chunk{s, lo, min(lo+x.cb, off[b+1])})
		}
	}
	x.g.sc.chunks = cs
	return cs
}
