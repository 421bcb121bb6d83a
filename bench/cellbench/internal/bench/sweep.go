package bench

import (
	"context"
	"fmt"
	"unsafe"

	"github.com/rdmacell/rdmacell/collectives"
)

// sweep measures every size for element type T. Two registered buffers of
// the largest size serve every row, so pages are touched once, in the
// first calls, and every call moves data without a copy.
func sweep[T collectives.Element](b *bencher, c codec[T]) error {
	esize := int(unsafe.Sizeof(*new(T)))
	most := max(int(b.cfg.MaxBytes)/esize, 1)
	a, err := alloc[T](b, most)
	if err != nil {
		return err
	}
	defer b.comm.Free(asBytes(a))
	z, err := alloc[T](b, most)
	if err != nil {
		return err
	}
	defer b.comm.Free(asBytes(z))

	for _, size := range b.sizes {
		count := int(size) / esize
		if b.coll.blocks {
			count -= count % b.n
		}
		if count == 0 {
			continue
		}
		row := b.newRow(int64(count*esize), count)
		for _, inPlace := range []bool{false, true} {
			if inPlace && b.coll.name == "sendrecv" {
				// Sending a buffer while the peer writes into it is a
				// race when data moves without a copy: no in-place form.
				row.InPlace = Result{Wrong: -1, Skipped: true}
				continue
			}
			x := &xfer[T]{b: b, c: c, count: count, blk: count / b.n}
			x.views(a, z, inPlace)
			res, err := b.measure(row.Bytes, x.call, x.check)
			if err != nil {
				return fmt.Errorf("%s of %d bytes (in place %v): %w", b.coll.name, row.Bytes, inPlace, err)
			}
			if inPlace {
				row.InPlace = res
			} else {
				row.OutOfPlace = res
			}
		}
		b.emit(row)
	}
	return nil
}

func alloc[T collectives.Element](b *bencher, n int) ([]T, error) {
	raw, err := b.comm.Alloc(n * int(unsafe.Sizeof(*new(T))))
	if err != nil {
		return nil, fmt.Errorf("allocate registered memory: %w", err)
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(raw))), n), nil
}

func asBytes[T collectives.Element](s []T) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(*new(T))))
}

// xfer is one form (out-of-place or in-place) of a collective at one size.
type xfer[T collectives.Element] struct {
	b          *bencher
	c          codec[T]
	count, blk int
	send, recv []T
}

// views cuts the send and receive slices from the buffers a and z. The
// in-place forms place send inside recv as the collectives' API defines.
func (x *xfer[T]) views(a, z []T, inPlace bool) {
	rank, name := x.b.rank, x.b.coll.name
	sendCount, recvCount := x.count, x.count
	switch name {
	case "allgather", "gather":
		sendCount = x.blk
	case "reducescatter", "scatter":
		recvCount = x.blk
	}
	if !inPlace {
		x.send, x.recv = a[:sendCount], z[:recvCount]
		return
	}
	buf := z[:x.count]
	x.send, x.recv = buf, buf
	switch name {
	case "allgather", "gather":
		x.send = buf[rank*x.blk:][:x.blk]
	case "reducescatter", "scatter":
		x.recv = buf[rank*x.blk:][:x.blk]
	}
}

// call issues the collective once.
func (x *xfer[T]) call(ctx context.Context) error {
	b := x.b
	switch b.coll.name {
	case "allreduce":
		return collectives.AllReduce(ctx, b.group, x.send, x.recv, b.op)
	case "allgather":
		return collectives.AllGather(ctx, b.group, x.send, x.recv)
	case "alltoall":
		return collectives.AllToAll(ctx, b.group, x.send, x.recv)
	case "reducescatter":
		return collectives.ReduceScatter(ctx, b.group, x.send, x.recv, b.op)
	case "broadcast":
		return collectives.Broadcast(ctx, b.group, x.send, x.recv, b.cfg.Root)
	case "reduce":
		return collectives.Reduce(ctx, b.group, x.send, x.recv, b.op, b.cfg.Root)
	case "gather":
		return collectives.Gather(ctx, b.group, x.send, x.recv, b.cfg.Root)
	case "scatter":
		return collectives.Scatter(ctx, b.group, x.send, x.recv, b.cfg.Root)
	case "sendrecv":
		return b.sendRecv(ctx, asBytes(x.send), asBytes(x.recv))
	}
	return fmt.Errorf("collective %q has no call", b.coll.name)
}
