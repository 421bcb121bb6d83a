package bench

import (
	"context"

	"github.com/rdmacell/rdmacell/collectives"
)

// value is what rank q contributes at global element index i. Small
// integers keep every result exact in every type and every op (products
// stay powers of two), so a check can demand equality.
func (b *bencher) value(q, i int) float64 {
	if b.op == collectives.Prod {
		return float64(1 + (q+i)%2)
	}
	return float64(1 + (3*q+i)%7)
}

// check fills the buffers, calls the collective once and returns how many
// elements of this rank's result are wrong.
func (x *xfer[T]) check(ctx context.Context) (int64, error) {
	b, c := x.b, x.c
	zero := c.from(0)
	for j := range x.recv {
		x.recv[j] = zero
	}
	root := b.rank == b.cfg.Root
	// Scatter reads send at the root only, where the in-place form's recv
	// lies inside it; elsewhere filling it could pass for the result.
	if b.coll.name != "scatter" || root {
		for j := range x.send {
			i := j
			if b.coll.name == "allgather" || b.coll.name == "gather" {
				i = b.rank*x.blk + j
			}
			x.send[j] = c.from(b.value(b.rank, i))
		}
	}
	if err := x.call(ctx); err != nil {
		return 0, err
	}
	if (b.coll.name == "reduce" || b.coll.name == "gather") && !root {
		return 0, nil
	}
	var wrong int64
	for j, got := range x.recv {
		if c.to(got) != c.to(c.from(x.expected(j))) {
			wrong++
		}
	}
	return wrong, nil
}

// expected is the correct value of element j of this rank's result.
func (x *xfer[T]) expected(j int) float64 {
	b := x.b
	reduced := func(i int) float64 {
		return combine(b.op, b.n, x.c.integer, func(q int) float64 { return b.value(q, i) })
	}
	switch b.coll.name {
	case "allreduce", "reduce":
		return reduced(j)
	case "reducescatter":
		return reduced(b.rank*x.blk + j)
	case "allgather", "gather":
		return b.value(j/x.blk, j)
	case "scatter":
		return b.value(b.cfg.Root, b.rank*x.blk+j)
	case "alltoall":
		return b.value(j/x.blk, b.rank*x.blk+j%x.blk)
	case "broadcast":
		return b.value(b.cfg.Root, j)
	case "sendrecv":
		return b.value((b.rank+b.n-1)%b.n, j)
	}
	return 0
}
