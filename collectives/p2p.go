package collectives

import (
	"context"

	"github.com/rdmacell/rdmacell/comm"
)

// The point-to-point calls of a group: messages between two ranks, on a
// channel of their own that the collectives never see, matched by source
// and tag as in MPI. They need the group's communicator, so they work on
// a group from Open, Split or Shrink, or from New over Comm.P2P; any
// other group gets an *ArgError. Buffers of AllocSlice move without a
// copy.

// Status tells who sent the message a receive took or a probe found,
// with which tag, and its length in bytes (divide by the element size
// for a count). It is MPI_Status.
type Status = comm.Status

// AnySource and AnyTag are the wildcards of a receive or probe, MPI's
// MPI_ANY_SOURCE and MPI_ANY_TAG. AnySource is not -1, so that a peer
// computed wrong (rank-1 on rank 0) stays an error.
const (
	AnySource = comm.AnySource
	AnyTag    = comm.AnyTag
)

// Send sends buf to rank peer under tag and returns once buf may be used
// again (see comm.Comm.Send). Messages to one peer with one tag are
// received in the order they were sent; tag may be any value but AnyTag.
// If ctx ends first the send is given up.
func Send[T Element](ctx context.Context, g *Group, peer int, tag uint64, buf []T) error {
	c, err := g.communicator("Send")
	if err != nil {
		return err
	}
	return c.Send(ctx, peer, tag, asBytes(buf))
}

// Recv receives the next message from rank peer (or AnySource) with tag
// (or AnyTag) into buf and returns its Status: who sent it, with which
// tag, and how many bytes. A message goes to the oldest receive posted
// that it fits, so one sender's messages keep their order however
// specific and wildcard receives are mixed. A message longer than buf
// fails with a *comm.TruncateError. If ctx ends first the receive is
// given up and takes no message.
func Recv[T Element](ctx context.Context, g *Group, peer int, tag uint64, buf []T) (Status, error) {
	c, err := g.communicator("Recv")
	if err != nil {
		return Status{Source: peer, Tag: tag}, err
	}
	return c.RecvStatus(ctx, peer, tag, asBytes(buf))
}

// Sendrecv sends send to rank to and receives the next message from rank
// from into recv, both at once, as MPI_Sendrecv does, and returns the
// Status of the message received: every rank of a ring may shift its data
// to its neighbour with one call without deadlock. send and recv must not
// overlap. If ctx ends first both are given up.
func Sendrecv[T Element](ctx context.Context, g *Group, to int, sendTag uint64, send []T, from int, recvTag uint64, recv []T) (Status, error) {
	c, err := g.communicator("Sendrecv")
	if err != nil {
		return Status{Source: from, Tag: recvTag}, err
	}
	return c.SendrecvStatus(ctx, to, sendTag, asBytes(send), from, recvTag, asBytes(recv))
}

// Isend is Send, non-blocking: buf belongs to the send until its Request
// completes. ctx bounds the send, as it bounds a non-blocking collective:
// when it ends first, the send is given up and the Request completes with
// ctx's error.
func Isend[T Element](ctx context.Context, g *Group, peer int, tag uint64, buf []T) (Request, error) {
	c, err := g.communicator("Isend")
	if err != nil {
		return Request{}, err
	}
	h, err := c.Isend(peer, tag, asBytes(buf))
	if err != nil {
		return Request{}, err
	}
	return messageRequest(ctx, h), nil
}

// Irecv is Recv, non-blocking: buf belongs to the receive until its
// Request completes, and the Request's Status then says what it took.
// Receives for one peer and tag take messages in the order they were
// posted. ctx bounds the receive: when it ends first, the receive is
// given up, takes no message, and completes with ctx's error.
func Irecv[T Element](ctx context.Context, g *Group, peer int, tag uint64, buf []T) (Request, error) {
	c, err := g.communicator("Irecv")
	if err != nil {
		return Request{}, err
	}
	h, err := c.Irecv(peer, tag, asBytes(buf))
	if err != nil {
		return Request{}, err
	}
	return messageRequest(ctx, h), nil
}

// Probe waits until a message from rank source (or AnySource) with tag
// (or AnyTag) is waiting to be received and returns its Status, without
// receiving it. The next receive posted that fits it takes it: another
// goroutine's receive may take it first unless the program serialises
// them, as in MPI.
func (g *Group) Probe(ctx context.Context, source int, tag uint64) (Status, error) {
	c, err := g.communicator("Probe")
	if err != nil {
		return Status{}, err
	}
	return c.Probe(ctx, source, tag)
}

// Iprobe is Probe without waiting: ok says whether such a message is
// waiting.
func (g *Group) Iprobe(source int, tag uint64) (st Status, ok bool, err error) {
	c, err := g.communicator("Iprobe")
	if err != nil {
		return Status{}, false, err
	}
	return c.Iprobe(source, tag)
}
