package collectives

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/rdmacell/rdmacell/comm"
)

// operation is one issued collective: its arguments as bytes, and its
// result. Operations are recycled through the group's free list, so a
// blocking call allocates nothing in steady state.
type operation struct {
	group *Group
	ctx   context.Context
	kind  kind
	dt    dtype
	rop   Op
	mode  mode // of a reduction: how it combines
	red   *reducer
	algo  Algorithm
	root  int
	count int // the count of the fingerprint
	send  []byte
	recv  []byte
	// counts, counts2: AllGatherV's counts; AllToAllV's send and receive
	// counts, in elements.
	counts, counts2 []int
	inPlace         bool
	seq             uint64

	err   error
	state atomic.Uint32
	gen   atomic.Uint64 // bumped by recycle, so stale Requests are caught
	done  chan struct{} // receives one token when the operation completes
}

const (
	opPending uint32 = iota
	opDone
	opAbandoned // the blocking caller gave up; whoever finishes recycles
)

// finish records the result of an operation run by the worker.
func (op *operation) finish(g *Group, err error) {
	op.err = err
	if op.state.CompareAndSwap(opPending, opDone) {
		op.done <- struct{}{}
		return
	}
	g.recycle(op)
}

// await waits for a queued blocking operation. If ctx ends first the
// operation is abandoned: it still runs (its own context is ctx, so it
// fails soon) and is recycled by the worker.
func (op *operation) await(g *Group, ctx context.Context) error {
	select {
	case <-op.done:
	case <-ctx.Done():
		if op.state.CompareAndSwap(opPending, opAbandoned) {
			return fmt.Errorf("collectives: rank %d: %s #%d: %w", g.rank, op.kind, op.seq, ctx.Err())
		}
		<-op.done
	}
	err := op.err
	g.recycle(op)
	return err
}

// Request is a non-blocking operation in flight: a collective, returned
// by the I functions (IAllReduce and so on), or a message, returned by
// Isend and Irecv. A collective runs in issue order after those issued
// before it. The context given when it was issued bounds the operation,
// the one given to Wait only the waiting.
//
// Wait takes the result once, after which the Request is spent; Test may
// be called any number of times before that. A Request is for one
// goroutine at a time.
type Request struct {
	op  *operation
	gen uint64
	msg *p2pOp // a message, when op is nil
}

// p2pOp is the message of a Request from Isend or Irecv.
type p2pOp struct {
	h     *comm.Handle
	stop  func() bool // detaches the issuing context; nil if it never ends
	spent bool
}

// messageRequest returns the Request of h, which ctx bounds.
func messageRequest(ctx context.Context, h *comm.Handle) Request {
	m := &p2pOp{h: h}
	if ctx.Done() != nil {
		m.stop = context.AfterFunc(ctx, func() { h.Cancel(ctx.Err()) })
	}
	return Request{msg: m}
}

// Wait blocks until the operation completes or ctx ends, and returns the
// operation's error. If ctx ends first the operation goes on, and Wait
// may be called again.
func (r Request) Wait(ctx context.Context) error {
	if m := r.msg; m != nil {
		if m.spent {
			return ErrRequestDone
		}
		if err := m.wait(ctx); err != nil {
			return err
		}
		return m.take()
	}
	op, err := r.live()
	if err != nil {
		return err
	}
	select {
	case <-op.done:
	case <-ctx.Done():
		return fmt.Errorf("collectives: waiting for %s #%d: %w", op.kind, op.seq, ctx.Err())
	}
	err = op.err
	op.group.recycle(op)
	return err
}

// Test reports whether the operation has completed and, if so, its error,
// without blocking.
func (r Request) Test() (done bool, err error) {
	if m := r.msg; m != nil {
		if m.spent {
			return true, ErrRequestDone
		}
		done, _, err := m.h.Test()
		return done, err
	}
	op, err := r.live()
	if err != nil {
		return true, err
	}
	if op.state.Load() != opDone {
		return false, nil
	}
	return true, op.err
}

// Status is what the message of a Request from Isend or Irecv moved, once
// Wait or Test has reported it complete: for a receive, who sent the
// message it took, with which tag, and its length in bytes. It is the
// zero Status for a collective.
func (r Request) Status() Status {
	if r.msg == nil {
		return Status{}
	}
	return r.msg.h.Status()
}

// active returns the collective of r, if r is one not spent yet, or its
// message, likewise; nil and nil for a spent or zero Request.
func (r Request) active() (*operation, *p2pOp) {
	if m := r.msg; m != nil {
		if m.spent {
			return nil, nil
		}
		return nil, m
	}
	op, err := r.live()
	if err != nil {
		return nil, nil
	}
	return op, nil
}

func (r Request) live() (*operation, error) {
	if r.op == nil {
		return nil, fmt.Errorf("collectives: zero Request: %w", ErrRequestDone)
	}
	if r.op.gen.Load() != r.gen {
		return nil, ErrRequestDone
	}
	return r.op, nil
}

// wait waits until the message is done, without spending it; the error,
// naming the message, is ctx's when it ended first.
func (m *p2pOp) wait(ctx context.Context) error {
	_, err := m.h.Wait(ctx)
	if done, _, _ := m.h.Test(); done {
		return nil
	}
	return err
}

// take spends the Request of a completed message and returns its error.
func (m *p2pOp) take() error {
	m.spent = true
	if m.stop != nil {
		m.stop()
	}
	_, _, err := m.h.Test()
	return err
}
