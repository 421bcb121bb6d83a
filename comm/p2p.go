package comm

import (
	"context"
	"fmt"
)

// Request is a non-blocking point-to-point operation in flight.
type Request interface {
	// Wait blocks until the operation completes or ctx ends, and returns
	// the number of bytes sent or received.
	Wait(ctx context.Context) (n int, err error)
	// Test reports whether the operation has completed, without blocking.
	Test() (done bool, n int, err error)
}

// P2P is the point-to-point layer the collectives are built on. A
// communicator provides it through its ordered channel (Comm.P2P), on
// which the messages between two ranks are matched strictly in the order
// they were posted: the n-th receive a rank posts for a peer takes the n-th
// message that peer sent it on the channel. Collectives issue their
// operations in the same order on every rank, so a message whose tag is not
// the one the receiver expects at that position means the ranks disagree
// about the collective they are in; the receive then fails with a
// *MismatchError instead of waiting forever or taking the wrong bytes.
type P2P interface {
	// Rank is this process's rank in the group, Size the number of ranks.
	Rank() int
	Size() int
	// Isend starts sending buf to peer under tag. buf must not change
	// until the request completes.
	Isend(peer int, tag uint64, buf []byte) (Request, error)
	// Irecv starts receiving the next message from peer into buf; its tag
	// must be tag and its length at most len(buf).
	Irecv(peer int, tag uint64, buf []byte) (Request, error)
	// Alloc returns n bytes of registered memory, which moves without a
	// copy. Free returns it.
	Alloc(n int) ([]byte, error)
	Free(b []byte) error
}

// MismatchError reports that a message from Peer arrived where Rank
// expected another: the two ranks called different collectives, or the
// same one with different arguments. Want and Got are the tags, which
// collectives derive from the operation, element type, count, op and root.
type MismatchError struct {
	Rank, Peer int
	Want, Got  uint64
}

// Error names both ranks and both tags.
func (e *MismatchError) Error() string {
	return fmt.Sprintf("comm: rank %d expected message %#x from rank %d, got %#x: the ranks called different operations or arguments", e.Rank, e.Want, e.Peer, e.Got)
}
