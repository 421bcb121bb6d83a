package comm

import (
	"context"
	"errors"
	"fmt"
	"unsafe"
)

// Sendrecv sends send to rank to under sendTag and receives the next
// message from rank from with recvTag into recv, both at once, and
// returns the length of the message received, as MPI_Sendrecv does. The
// receive is posted before the send, and neither waits for the other, so
// every rank of a ring may shift its data to its neighbour with one call
// without deadlock, whatever the message sizes. to and from may be the
// same rank, or this one.
//
// It returns once both are done; the error joins those of the two
// halves. If ctx ends first both are given up, as Send and Recv give
// theirs up. send and recv must not overlap.
func (c *Comm) Sendrecv(ctx context.Context, to int, sendTag uint64, send []byte, from int, recvTag uint64, recv []byte) (int, error) {
	st, err := c.SendrecvStatus(ctx, to, sendTag, send, from, recvTag, recv)
	return st.Len, err
}

// SendrecvStatus is Sendrecv returning the Status of the message
// received, which a receive from AnySource or with AnyTag needs.
func (c *Comm) SendrecvStatus(ctx context.Context, to int, sendTag uint64, send []byte, from int, recvTag uint64, recv []byte) (Status, error) {
	none := Status{Source: from, Tag: recvTag}
	if overlap(send, recv) {
		return none, fmt.Errorf("%w: comm rank %d: Sendrecv: recv overlaps send, want separate buffers", ErrInvalidArgument, c.rank)
	}
	rh, err := c.post(false, chanUser, from, recvTag, recv, true)
	if err != nil {
		return none, err
	}
	sh, err := c.post(true, chanUser, to, sendTag, send, true)
	if err != nil {
		// Nothing was sent: give the receive up rather than leave it to
		// take a message its caller never sees.
		_, _ = c.wait(cancelled, rh)
		return none, err
	}
	st, rerr := c.waitStatus(ctx, rh)
	_, serr := c.wait(ctx, sh)
	return st, errors.Join(rerr, serr)
}

// cancelled is a context that has ended, for giving an operation up at
// once.
var cancelled = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// overlap reports whether a and b share any byte.
func overlap(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	pa, pb := uintptr(unsafe.Pointer(unsafe.SliceData(a))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return pa < pb+uintptr(len(b)) && pb < pa+uintptr(len(a))
}
