package collectives

import (
	"context"
	"fmt"
	"unsafe"
)

// Gather collects every rank's send, in rank order, into recv at the
// root, which must have Size()×len(send) elements there; elsewhere recv
// is not used and may be nil. Every rank sends the same number of
// elements. The in-place form, at the root only, passes as send the
// root's block of recv, recv[root*len(send):][:len(send)] (MPI_IN_PLACE).
func Gather[T Element](ctx context.Context, g *Group, send, recv []T, root int) error {
	o, err := gatherOp(ctx, g, kGather, send, recv, nil, root)
	if err != nil {
		return err
	}
	return g.call(ctx, o)
}

// IGather is Gather, non-blocking.
func IGather[T Element](ctx context.Context, g *Group, send, recv []T, root int) (Request, error) {
	o, err := gatherOp(ctx, g, kGather, send, recv, nil, root)
	if err != nil {
		return Request{}, err
	}
	return g.start(ctx, o)
}

// GatherV is Gather with per-rank counts: rank i sends counts[i]
// elements, and the root's recv (sum(counts) elements) holds them in rank
// order. counts must be the same on every rank, and counts[Rank()] must
// be len(send). The in-place form, at the root, passes as send the root's
// slice of recv.
func GatherV[T Element](ctx context.Context, g *Group, send, recv []T, counts []int, root int) error {
	o, err := gatherOp(ctx, g, kGatherV, send, recv, counts, root)
	if err != nil {
		return err
	}
	return g.call(ctx, o)
}

// IGatherV is GatherV, non-blocking; counts too belong to the operation
// until it completes.
func IGatherV[T Element](ctx context.Context, g *Group, send, recv []T, counts []int, root int) (Request, error) {
	o, err := gatherOp(ctx, g, kGatherV, send, recv, counts, root)
	if err != nil {
		return Request{}, err
	}
	return g.start(ctx, o)
}

// Scatter sends block i of the root's send to rank i, into its recv: send
// has Size() blocks of len(recv) elements at the root, and is not used
// elsewhere (it may be nil). Every rank receives the same number of
// elements. The in-place form, at the root only, passes as recv the
// root's block of send, send[root*len(recv):][:len(recv)], which is then
// left as it is (MPI_IN_PLACE).
func Scatter[T Element](ctx context.Context, g *Group, send, recv []T, root int) error {
	o, err := scatterOp(ctx, g, kScatter, send, recv, nil, root)
	if err != nil {
		return err
	}
	return g.call(ctx, o)
}

// IScatter is Scatter, non-blocking.
func IScatter[T Element](ctx context.Context, g *Group, send, recv []T, root int) (Request, error) {
	o, err := scatterOp(ctx, g, kScatter, send, recv, nil, root)
	if err != nil {
		return Request{}, err
	}
	return g.start(ctx, o)
}

// ScatterV is Scatter with per-rank counts: the root's send holds
// sum(counts) elements, the first counts[0] for rank 0, the next
// counts[1] for rank 1 and so on. counts must be the same on every rank,
// and counts[Rank()] must be len(recv). The in-place form, at the root,
// passes as recv the root's slice of send.
func ScatterV[T Element](ctx context.Context, g *Group, send, recv []T, counts []int, root int) error {
	o, err := scatterOp(ctx, g, kScatterV, send, recv, counts, root)
	if err != nil {
		return err
	}
	return g.call(ctx, o)
}

// IScatterV is ScatterV, non-blocking; counts too belong to the operation
// until it completes.
func IScatterV[T Element](ctx context.Context, g *Group, send, recv []T, counts []int, root int) (Request, error) {
	o, err := scatterOp(ctx, g, kScatterV, send, recv, counts, root)
	if err != nil {
		return Request{}, err
	}
	return g.start(ctx, o)
}

// ReduceScatterV is ReduceScatter with blocks of per-rank lengths:
// send (sum(counts) elements) is combined over all ranks with op, and
// rank i gets in recv the counts[i] elements of the result that follow
// the blocks of the ranks before it. counts must be the same on every
// rank and counts[Rank()] must be len(recv). The in-place form passes as
// recv this rank's block of send; the other blocks of send are then left
// with unspecified contents.
func ReduceScatterV[T Element](ctx context.Context, g *Group, send, recv []T, counts []int, op Op) error {
	o, err := reduceScatterVOp(ctx, g, send, recv, counts, op)
	if err != nil {
		return err
	}
	return g.call(ctx, o)
}

// IReduceScatterV is ReduceScatterV, non-blocking; counts too belong to
// the operation until it completes.
func IReduceScatterV[T Element](ctx context.Context, g *Group, send, recv []T, counts []int, op Op) (Request, error) {
	o, err := reduceScatterVOp(ctx, g, send, recv, counts, op)
	if err != nil {
		return Request{}, err
	}
	return g.start(ctx, o)
}

// blockLayout checks the counts of a V collective against own, the
// length of this rank's block, and returns the number of elements of the
// whole vector and the element offset of this rank's block in it. For the
// plain forms every block is own long.
func blockLayout(g *Group, k kind, counts []int, own int, ownArg string) (total, at int, err error) {
	if !k.varies() {
		return g.size * own, g.rank * own, nil
	}
	if total, err = checkCounts(g, k, "counts", counts); err != nil {
		return 0, 0, err
	}
	if counts[g.rank] != own {
		return 0, 0, g.argErr(k, fmt.Sprintf("counts[%d]", g.rank), "is %d, want len(%s) = %d", counts[g.rank], ownArg, own)
	}
	for _, c := range counts[:g.rank] {
		at += c
	}
	return total, at, nil
}

// wantTotal says what length the whole vector must have, for errors.
func wantTotal(k kind, total, size int, own string) string {
	if !k.varies() {
		return fmt.Sprintf("%d (size %d × len(%s))", total, size, own)
	}
	return fmt.Sprintf("%d (the sum of counts)", total)
}

// fpCount is the count a gathering or scattering collective's
// fingerprint carries: a V collective's total (its counts are hashed
// beside it), the plain form's per-rank count.
func fpCount(k kind, own, total int) int {
	if k.varies() {
		return total
	}
	return own
}

func gatherOp[T Element](ctx context.Context, g *Group, k kind, send, recv []T, counts []int, root int) (*operation, error) {
	if err := precheck(ctx, g, k); err != nil {
		return nil, err
	}
	if err := checkRoot(g, k, root); err != nil {
		return nil, err
	}
	total, at, err := blockLayout(g, k, counts, len(send), "send")
	if err != nil {
		return nil, err
	}
	sb := asBytes(send)
	var rb []byte
	in := false
	if g.rank == root {
		if len(recv) != total {
			return nil, g.argErr(k, "recv", "%s at the root, want %s", has(recv), wantTotal(k, total, g.size, "send"))
		}
		rb = asBytes(recv)
		if in, err = inPlaceAt(g, k, sb, rb, at*int(unsafe.Sizeof(*new(T))), "send"); err != nil {
			return nil, err
		}
	}
	o := newOpFor[T](ctx, g, k, sb, rb, fpCount(k, len(send), total), total*int(unsafe.Sizeof(*new(T))))
	o.root, o.counts, o.inPlace = root, counts, in
	return o, nil
}

func scatterOp[T Element](ctx context.Context, g *Group, k kind, send, recv []T, counts []int, root int) (*operation, error) {
	if err := precheck(ctx, g, k); err != nil {
		return nil, err
	}
	if err := checkRoot(g, k, root); err != nil {
		return nil, err
	}
	total, at, err := blockLayout(g, k, counts, len(recv), "recv")
	if err != nil {
		return nil, err
	}
	rb := asBytes(recv)
	var sb []byte
	in := false
	if g.rank == root {
		if len(send) != total {
			return nil, g.argErr(k, "send", "%s at the root, want %s", has(send), wantTotal(k, total, g.size, "recv"))
		}
		sb = asBytes(send)
		if in, err = inPlaceAt(g, k, rb, sb, at*int(unsafe.Sizeof(*new(T))), "recv"); err != nil {
			return nil, err
		}
	}
	o := newOpFor[T](ctx, g, k, sb, rb, fpCount(k, len(recv), total), total*int(unsafe.Sizeof(*new(T))))
	o.root, o.counts, o.inPlace = root, counts, in
	return o, nil
}

func reduceScatterVOp[T Element](ctx context.Context, g *Group, send, recv []T, counts []int, op Op) (*operation, error) {
	const k = kReduceScatterV
	if err := precheck(ctx, g, k); err != nil {
		return nil, err
	}
	if err := checkOp(g, k, op); err != nil {
		return nil, err
	}
	total, at, err := blockLayout(g, k, counts, len(recv), "recv")
	if err != nil {
		return nil, err
	}
	if len(send) != total {
		return nil, g.argErr(k, "send", "%s, want %d (the sum of counts)", has(send), total)
	}
	sb, rb := asBytes(send), asBytes(recv)
	in, err := inPlaceAt(g, k, rb, sb, at*int(unsafe.Sizeof(*new(T))), "recv")
	if err != nil {
		return nil, err
	}
	o := newOpFor[T](ctx, g, k, sb, rb, total, len(sb))
	o.setOp(op)
	o.counts, o.inPlace = counts, in
	return o, nil
}
