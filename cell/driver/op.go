package driver

import (
	"context"

	"github.com/rdmacell/rdmacell/cell"
)

// Op is a send or receive range in flight on a connection. It completes
// exactly once, when the engine hands the range back (cell.Sent or
// cell.Received) or the connection fails; only then is the range's memory
// the caller's again. Its methods are safe for concurrent use.
type Op struct {
	kind cell.EventKind
	done chan struct{}
	// n and err are written once, before done is closed.
	n   int64
	err error
}

func newOp(kind cell.EventKind) *Op {
	return &Op{kind: kind, done: make(chan struct{})}
}

func (o *Op) complete(n int64, err error) {
	o.n, o.err = n, err
	close(o.done)
}

// Kind says whether o is a send (cell.Sent) or a receive (cell.Received).
func (o *Op) Kind() cell.EventKind { return o.kind }

// Done is closed when o completes.
func (o *Op) Done() <-chan struct{} { return o.done }

// Wait blocks until o completes or ctx ends, and returns the number of
// bytes moved: for a receive, the length the sender wrote. When ctx ends
// first, the range is still in flight and its memory still the
// connection's; abort the connection to take it back at once.
func (o *Op) Wait(ctx context.Context) (int, error) {
	select {
	case <-o.done:
		return int(o.n), o.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// Test reports without blocking whether o has completed, and if so its
// result as Wait returns it.
func (o *Op) Test() (done bool, n int, err error) {
	select {
	case <-o.done:
		return true, int(o.n), o.err
	default:
		return false, 0, nil
	}
}

// opTable maps the engine's range tags to Ops. A tag is a slot index; the
// engine reports each range exactly once, so a slot is free again after
// its event.
type opTable struct {
	slots        []*Op
	free         []uint32
	sends, recvs int // ranges outstanding in each direction
}

func (t *opTable) init(n int) {
	t.slots = make([]*Op, n)
	t.free = make([]uint32, n)
	for i := range t.free {
		t.free[i] = uint32(n - 1 - i)
	}
}

func (t *opTable) live() int { return t.sends + t.recvs }

// put stores o and returns its tag; ok is false when the table is full.
func (t *opTable) put(o *Op) (tag uint64, ok bool) {
	if len(t.free) == 0 {
		return 0, false
	}
	i := t.free[len(t.free)-1]
	t.free = t.free[:len(t.free)-1]
	t.slots[i] = o
	if o.kind == cell.Sent {
		t.sends++
	} else {
		t.recvs++
	}
	return uint64(i), true
}

// take removes and returns the Op of tag, or nil.
func (t *opTable) take(tag uint64) *Op {
	if tag >= uint64(len(t.slots)) || t.slots[tag] == nil {
		return nil
	}
	o := t.slots[tag]
	t.slots[tag] = nil
	t.free = append(t.free, uint32(tag))
	if o.kind == cell.Sent {
		t.sends--
	} else {
		t.recvs--
	}
	return o
}

// failAll completes every Op still in the table with err.
func (t *opTable) failAll(err error) {
	for i, o := range t.slots {
		if o != nil {
			t.take(uint64(i)).complete(0, err)
		}
	}
}
