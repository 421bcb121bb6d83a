package collectives

import (
	"context"
	"fmt"
	"unsafe"
)

// The collectives. Each has a blocking form and a non-blocking form (the
// same name with an I in front) that returns a Request. Both validate
// their arguments before any communication and return an *ArgError
// (errors.Is ErrInvalidArgument) naming the argument; nothing is issued
// then, and the group is unaffected. Lengths must match exactly: a count
// is always the length of a slice, and the other slices must fit it.
//
// Every rank must call the same collectives in the same order with the
// same element type, counts, op and root. When they do not, every rank
// gets a *MismatchError (errors.Is ErrMismatch) naming the ranks whose
// call differs, and the group stays usable (see Options.SkipVerify for
// the exception).
//
// Slices passed to a non-blocking call belong to the operation until it
// completes: do not read recv or change send before Wait returns.

// AllReduce combines send over all ranks with op, element by element, and
// leaves the result in recv on every rank. recv must have len(send)
// elements; passing the same slice for both is the in-place form. Every
// rank gets the same bits.
func AllReduce[T Element](ctx context.Context, g *Group, send, recv []T, op Op) error {
	o, err := allReduceOp(ctx, g, send, recv, op)
	if err != nil {
		return err
	}
	return g.call(ctx, o)
}

// IAllReduce is AllReduce, non-blocking.
func IAllReduce[T Element](ctx context.Context, g *Group, send, recv []T, op Op) (Request, error) {
	o, err := allReduceOp(ctx, g, send, recv, op)
	if err != nil {
		return Request{}, err
	}
	return g.start(ctx, o)
}

// AllGather concatenates every rank's send, in rank order, into recv on
// every rank. recv must have Size()×len(send) elements; the in-place form
// passes as send the slice of recv where this rank's block goes,
// recv[Rank()*len(send):][:len(send)].
func AllGather[T Element](ctx context.Context, g *Group, send, recv []T) error {
	o, err := allGatherOp(ctx, g, send, recv)
	if err != nil {
		return err
	}
	return g.call(ctx, o)
}

// IAllGather is AllGather, non-blocking.
func IAllGather[T Element](ctx context.Context, g *Group, send, recv []T) (Request, error) {
	o, err := allGatherOp(ctx, g, send, recv)
	if err != nil {
		return Request{}, err
	}
	return g.start(ctx, o)
}

// AllGatherV is AllGather with per-rank counts: rank i contributes
// counts[i] elements, and recv (sum(counts) elements) holds them in rank
// order. counts must be the same on every rank and counts[Rank()] must be
// len(send). The in-place form passes as send this rank's slice of recv.
func AllGatherV[T Element](ctx context.Context, g *Group, send, recv []T, counts []int) error {
	o, err := allGatherVOp(ctx, g, send, recv, counts)
	if err != nil {
		return err
	}
	return g.call(ctx, o)
}

// IAllGatherV is AllGatherV, non-blocking; counts too belong to the
// operation until it completes.
func IAllGatherV[T Element](ctx context.Context, g *Group, send, recv []T, counts []int) (Request, error) {
	o, err := allGatherVOp(ctx, g, send, recv, counts)
	if err != nil {
		return Request{}, err
	}
	return g.start(ctx, o)
}

// ReduceScatter combines send over all ranks with op and leaves block
// Rank() of the result in recv: send has Size() blocks of len(recv)
// elements. The in-place form passes as recv this rank's block of send,
// send[Rank()*len(recv):][:len(recv)]; the other blocks of send are then
// left with unspecified contents. The out-of-place form does not change
// send.
func ReduceScatter[T Element](ctx context.Context, g *Group, send, recv []T, op Op) error {
	o, err := reduceScatterOp(ctx, g, send, recv, op)
	if err != nil {
		return err
	}
	return g.call(ctx, o)
}

// IReduceScatter is ReduceScatter, non-blocking.
func IReduceScatter[T Element](ctx context.Context, g *Group, send, recv []T, op Op) (Request, error) {
	o, err := reduceScatterOp(ctx, g, send, recv, op)
	if err != nil {
		return Request{}, err
	}
	return g.start(ctx, o)
}

// AllToAll sends block i of send to rank i and puts the block from rank i
// in block i of recv; send and recv have Size() blocks of equal length.
// Passing the same slice for both is the in-place form.
func AllToAll[T Element](ctx context.Context, g *Group, send, recv []T) error {
	o, err := allToAllOp(ctx, g, send, recv)
	if err != nil {
		return err
	}
	return g.call(ctx, o)
}

// IAllToAll is AllToAll, non-blocking.
func IAllToAll[T Element](ctx context.Context, g *Group, send, recv []T) (Request, error) {
	o, err := allToAllOp(ctx, g, send, recv)
	if err != nil {
		return Request{}, err
	}
	return g.start(ctx, o)
}

// AllToAllV is AllToAll with per-rank counts: the first sendCounts[0]
// elements of send go to rank 0, the next sendCounts[1] to rank 1, and so
// on; recv receives recvCounts[i] elements from rank i, in rank order.
// Rank i's sendCounts[j] must equal rank j's recvCounts[i]; a receive of
// another length fails with a *MismatchError naming the sender. Passing
// the same slice for both is the in-place form.
func AllToAllV[T Element](ctx context.Context, g *Group, send []T, sendCounts []int, recv []T, recvCounts []int) error {
	o, err := allToAllVOp(ctx, g, send, sendCounts, recv, recvCounts)
	if err != nil {
		return err
	}
	return g.call(ctx, o)
}

// IAllToAllV is AllToAllV, non-blocking; the counts too belong to the
// operation until it completes.
func IAllToAllV[T Element](ctx context.Context, g *Group, send []T, sendCounts []int, recv []T, recvCounts []int) (Request, error) {
	o, err := allToAllVOp(ctx, g, send, sendCounts, recv, recvCounts)
	if err != nil {
		return Request{}, err
	}
	return g.start(ctx, o)
}

// Broadcast copies the root's send into recv on every rank. send is read
// only at the root, where it must have len(recv) elements (the same slice
// as recv is the in-place form); elsewhere it may be nil.
func Broadcast[T Element](ctx context.Context, g *Group, send, recv []T, root int) error {
	o, err := broadcastOp(ctx, g, send, recv, root)
	if err != nil {
		return err
	}
	return g.call(ctx, o)
}

// IBroadcast is Broadcast, non-blocking.
func IBroadcast[T Element](ctx context.Context, g *Group, send, recv []T, root int) (Request, error) {
	o, err := broadcastOp(ctx, g, send, recv, root)
	if err != nil {
		return Request{}, err
	}
	return g.start(ctx, o)
}

// Reduce combines send over all ranks with op into recv at the root,
// which must have len(send) elements there (the same slice as send is the
// in-place form); elsewhere recv is not used and may be nil.
func Reduce[T Element](ctx context.Context, g *Group, send, recv []T, op Op, root int) error {
	o, err := reduceOp(ctx, g, send, recv, op, root)
	if err != nil {
		return err
	}
	return g.call(ctx, o)
}

// IReduce is Reduce, non-blocking.
func IReduce[T Element](ctx context.Context, g *Group, send, recv []T, op Op, root int) (Request, error) {
	o, err := reduceOp(ctx, g, send, recv, op, root)
	if err != nil {
		return Request{}, err
	}
	return g.start(ctx, o)
}

// Barrier returns once every rank has called it.
func Barrier(ctx context.Context, g *Group) error {
	o, err := barrierOp(ctx, g)
	if err != nil {
		return err
	}
	return g.call(ctx, o)
}

// IBarrier is Barrier, non-blocking: the Request completes once every
// rank has issued its barrier.
func IBarrier(ctx context.Context, g *Group) (Request, error) {
	o, err := barrierOp(ctx, g)
	if err != nil {
		return Request{}, err
	}
	return g.start(ctx, o)
}

// Validation and construction of the operations.

func precheck(ctx context.Context, g *Group, k kind) error {
	if g == nil {
		return &ArgError{Rank: -1, Op: k.String(), Arg: "g", Problem: "is nil, want a Group from New"}
	}
	if ctx == nil {
		return g.argErr(k, "ctx", "is nil, want a context")
	}
	return nil
}

func (g *Group) argErr(k kind, arg, format string, args ...any) error {
	return &ArgError{Rank: g.rank, Op: k.String(), Arg: arg, Problem: fmt.Sprintf(format, args...)}
}

func checkOp(g *Group, k kind, op Op) error {
	if !op.valid() {
		return g.argErr(k, "op", "%v is not an op, want Sum, Prod, Min, Max or Avg", op)
	}
	return nil
}

func checkRoot(g *Group, k kind, root int) error {
	if root < 0 || root >= g.size {
		return g.argErr(k, "root", "%d is out of range, want 0 <= root < %d", root, g.size)
	}
	return nil
}

// has describes a slice's length for an error message.
func has[T any](s []T) string {
	if s == nil {
		return "is nil"
	}
	return fmt.Sprintf("has %d elements", len(s))
}

// checkCounts validates a count vector and returns its sum.
func checkCounts(g *Group, k kind, name string, counts []int) (int, error) {
	if len(counts) != g.size {
		return 0, g.argErr(k, name, "has %d entries, want %d (one per rank)", len(counts), g.size)
	}
	sum := 0
	for i, c := range counts {
		if c < 0 {
			return 0, g.argErr(k, fmt.Sprintf("%s[%d]", name, i), "%d is negative", c)
		}
		sum += c
	}
	return sum, nil
}

// inPlaceAt reports whether send is exactly recv's block at byte offset
// at, and rejects any other overlap.
func inPlaceAt(g *Group, k kind, send, recv []byte, at int, arg string) (bool, error) {
	if len(send) > 0 && at < len(recv) && unsafe.SliceData(send) == unsafe.SliceData(recv[at:]) {
		return true, nil
	}
	if overlap(send, recv) {
		return false, g.argErr(k, arg, "overlaps the other buffer without being the in-place form")
	}
	return false, nil
}

func newOpFor[T Element](ctx context.Context, g *Group, k kind, send, recv []byte, count int, bytes int) *operation {
	o := g.newOp(ctx, k)
	o.dt = dtypeOf[T]()
	o.send, o.recv, o.count = send, recv, count
	o.algo = choose(k, g.algo, g.size, bytes)
	o.mode = modeDefault
	return o
}

func (op *operation) setOp(rop Op) {
	op.rop = rop
	op.red = &reducers[op.dt][rop]
	op.mode = opMode(op.group.mode, op.dt, rop)
}

func allReduceOp[T Element](ctx context.Context, g *Group, send, recv []T, op Op) (*operation, error) {
	const k = kAllReduce
	if err := precheck(ctx, g, k); err != nil {
		return nil, err
	}
	if err := checkOp(g, k, op); err != nil {
		return nil, err
	}
	if len(recv) != len(send) {
		return nil, g.argErr(k, "recv", "%s, want %d (len(send))", has(recv), len(send))
	}
	sb, rb := asBytes(send), asBytes(recv)
	in, err := inPlaceAt(g, k, sb, rb, 0, "recv")
	if err != nil {
		return nil, err
	}
	o := newOpFor[T](ctx, g, k, sb, rb, len(send), len(sb))
	o.setOp(op)
	o.inPlace = in
	return o, nil
}

func allGatherOp[T Element](ctx context.Context, g *Group, send, recv []T) (*operation, error) {
	const k = kAllGather
	if err := precheck(ctx, g, k); err != nil {
		return nil, err
	}
	if len(recv) != g.size*len(send) {
		return nil, g.argErr(k, "recv", "%s, want %d (size %d × len(send))", has(recv), g.size*len(send), g.size)
	}
	sb, rb := asBytes(send), asBytes(recv)
	in, err := inPlaceAt(g, k, sb, rb, g.rank*len(sb), "send")
	if err != nil {
		return nil, err
	}
	o := newOpFor[T](ctx, g, k, sb, rb, len(send), len(rb))
	o.inPlace = in
	return o, nil
}

func allGatherVOp[T Element](ctx context.Context, g *Group, send, recv []T, counts []int) (*operation, error) {
	const k = kAllGatherV
	if err := precheck(ctx, g, k); err != nil {
		return nil, err
	}
	total, err := checkCounts(g, k, "counts", counts)
	if err != nil {
		return nil, err
	}
	if counts[g.rank] != len(send) {
		return nil, g.argErr(k, fmt.Sprintf("counts[%d]", g.rank), "is %d, want len(send) = %d", counts[g.rank], len(send))
	}
	if len(recv) != total {
		return nil, g.argErr(k, "recv", "%s, want %d (the sum of counts)", has(recv), total)
	}
	at := 0
	for _, c := range counts[:g.rank] {
		at += c
	}
	sb, rb := asBytes(send), asBytes(recv)
	in, err := inPlaceAt(g, k, sb, rb, at*int(unsafe.Sizeof(*new(T))), "send")
	if err != nil {
		return nil, err
	}
	o := newOpFor[T](ctx, g, k, sb, rb, total, len(rb))
	o.counts = counts
	o.inPlace = in
	return o, nil
}

func reduceScatterOp[T Element](ctx context.Context, g *Group, send, recv []T, op Op) (*operation, error) {
	const k = kReduceScatter
	if err := precheck(ctx, g, k); err != nil {
		return nil, err
	}
	if err := checkOp(g, k, op); err != nil {
		return nil, err
	}
	if len(send)%g.size != 0 {
		return nil, g.argErr(k, "send", "has %d elements, not divisible into %d equal blocks (one per rank)", len(send), g.size)
	}
	if len(recv) != len(send)/g.size {
		return nil, g.argErr(k, "recv", "%s, want %d (len(send) / size %d)", has(recv), len(send)/g.size, g.size)
	}
	sb, rb := asBytes(send), asBytes(recv)
	in, err := inPlaceAt(g, k, rb, sb, g.rank*len(rb), "recv")
	if err != nil {
		return nil, err
	}
	o := newOpFor[T](ctx, g, k, sb, rb, len(recv), len(sb))
	o.setOp(op)
	o.inPlace = in
	return o, nil
}

func allToAllOp[T Element](ctx context.Context, g *Group, send, recv []T) (*operation, error) {
	const k = kAllToAll
	if err := precheck(ctx, g, k); err != nil {
		return nil, err
	}
	if len(send)%g.size != 0 {
		return nil, g.argErr(k, "send", "has %d elements, not divisible into %d equal blocks (one per rank)", len(send), g.size)
	}
	if len(recv) != len(send) {
		return nil, g.argErr(k, "recv", "%s, want %d (len(send))", has(recv), len(send))
	}
	sb, rb := asBytes(send), asBytes(recv)
	in, err := inPlaceAt(g, k, sb, rb, 0, "recv")
	if err != nil {
		return nil, err
	}
	o := newOpFor[T](ctx, g, k, sb, rb, len(send)/g.size, len(sb))
	o.inPlace = in
	return o, nil
}

func allToAllVOp[T Element](ctx context.Context, g *Group, send []T, sendCounts []int, recv []T, recvCounts []int) (*operation, error) {
	const k = kAllToAllV
	if err := precheck(ctx, g, k); err != nil {
		return nil, err
	}
	stotal, err := checkCounts(g, k, "sendCounts", sendCounts)
	if err != nil {
		return nil, err
	}
	rtotal, err := checkCounts(g, k, "recvCounts", recvCounts)
	if err != nil {
		return nil, err
	}
	if len(send) != stotal {
		return nil, g.argErr(k, "send", "%s, want %d (the sum of sendCounts)", has(send), stotal)
	}
	if len(recv) != rtotal {
		return nil, g.argErr(k, "recv", "%s, want %d (the sum of recvCounts)", has(recv), rtotal)
	}
	if r := g.rank; sendCounts[r] != recvCounts[r] {
		return nil, g.argErr(k, fmt.Sprintf("recvCounts[%d]", r), "is %d, want sendCounts[%d] = %d (what this rank sends itself)", recvCounts[r], r, sendCounts[r])
	}
	sb, rb := asBytes(send), asBytes(recv)
	in, err := inPlaceAt(g, k, sb, rb, 0, "recv")
	if err != nil {
		return nil, err
	}
	// The counts differ from rank to rank by nature; the lengths of the
	// messages check them, not the fingerprint.
	o := newOpFor[T](ctx, g, k, sb, rb, 0, len(sb))
	o.counts, o.counts2 = sendCounts, recvCounts
	o.inPlace = in
	return o, nil
}

func broadcastOp[T Element](ctx context.Context, g *Group, send, recv []T, root int) (*operation, error) {
	const k = kBroadcast
	if err := precheck(ctx, g, k); err != nil {
		return nil, err
	}
	if err := checkRoot(g, k, root); err != nil {
		return nil, err
	}
	var sb []byte
	rb := asBytes(recv)
	in := false
	if g.rank == root {
		if len(send) != len(recv) {
			return nil, g.argErr(k, "send", "%s at the root, want %d (len(recv))", has(send), len(recv))
		}
		sb = asBytes(send)
		var err error
		if in, err = inPlaceAt(g, k, sb, rb, 0, "recv"); err != nil {
			return nil, err
		}
	}
	o := newOpFor[T](ctx, g, k, sb, rb, len(recv), len(rb))
	o.root, o.inPlace = root, in
	return o, nil
}

func reduceOp[T Element](ctx context.Context, g *Group, send, recv []T, op Op, root int) (*operation, error) {
	const k = kReduce
	if err := precheck(ctx, g, k); err != nil {
		return nil, err
	}
	if err := checkOp(g, k, op); err != nil {
		return nil, err
	}
	if err := checkRoot(g, k, root); err != nil {
		return nil, err
	}
	sb := asBytes(send)
	var rb []byte
	in := false
	if g.rank == root {
		if len(recv) != len(send) {
			return nil, g.argErr(k, "recv", "%s at the root, want %d (len(send))", has(recv), len(send))
		}
		rb = asBytes(recv)
		var err error
		if in, err = inPlaceAt(g, k, sb, rb, 0, "recv"); err != nil {
			return nil, err
		}
	}
	o := newOpFor[T](ctx, g, k, sb, rb, len(send), len(sb))
	o.setOp(op)
	o.root, o.inPlace = root, in
	return o, nil
}

func barrierOp(ctx context.Context, g *Group) (*operation, error) {
	if err := precheck(ctx, g, kBarrier); err != nil {
		return nil, err
	}
	o := g.newOp(ctx, kBarrier)
	o.algo = Dissemination
	return o, nil
}
