package collectives

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/rdmacell/rdmacell/collectives/internal/memp2p"
	"github.com/rdmacell/rdmacell/comm"
	"github.com/stretchr/testify/require"
)

// TestValidation: bad arguments fail before any communication with an
// *ArgError naming the argument, on a group that stays usable.
func TestValidation(t *testing.T) {
	const n = 4
	w := newWorld(t, n, Options{})
	g := w.groups[1] // rank 1
	ctx := context.Background()
	buf := make([]float32, 16)
	cases := []struct {
		name string
		call func() error
		arg  string
		says string
	}{
		{"allreduce recv short", func() error { return AllReduce(ctx, g, buf[:8], buf[8:15], Sum) }, "recv", "has 7 elements, want 8"},
		{"allreduce recv nil", func() error { return AllReduce(ctx, g, buf[:8], nil, Sum) }, "recv", "is nil, want 8"},
		{"allreduce no op", func() error { return AllReduce(ctx, g, buf[:8], buf[8:], 0) }, "op", "none is not an op"},
		{"allreduce bad op", func() error { return AllReduce(ctx, g, buf[:8], buf[8:], Op(9)) }, "op", "op(9) is not an op"},
		{"allreduce overlap", func() error { return AllReduce(ctx, g, buf[:8], buf[4:12], Sum) }, "recv", "overlaps"},
		{"allgather recv", func() error { return AllGather(ctx, g, buf[:3], buf[3:14]) }, "recv", "want 12 (size 4 × len(send))"},
		{"allgather overlap", func() error { return AllGather(ctx, g, buf[0:4], buf[:16]) }, "send", "overlaps"},
		{"allgatherv counts length", func() error { return AllGatherV(ctx, g, buf[:1], buf[1:5], []int{1, 1, 1}) }, "counts", "has 3 entries, want 4"},
		{"allgatherv negative", func() error { return AllGatherV(ctx, g, buf[:1], buf[1:5], []int{2, 1, -1, 2}) }, "counts[2]", "-1 is negative"},
		{"allgatherv own count", func() error { return AllGatherV(ctx, g, buf[:2], buf[2:6], []int{1, 1, 1, 1}) }, "counts[1]", "want len(send) = 2"},
		{"allgatherv sum", func() error { return AllGatherV(ctx, g, buf[:1], buf[1:4], []int{1, 1, 1, 1}) }, "recv", "want 4 (the sum of counts)"},
		{"reducescatter divisible", func() error { return ReduceScatter(ctx, g, buf[:10], buf[10:12], Sum) }, "send", "not divisible into 4"},
		{"reducescatter recv", func() error { return ReduceScatter(ctx, g, buf[:8], buf[8:11], Sum) }, "recv", "want 2 (len(send) / size 4)"},
		{"alltoall divisible", func() error { return AllToAll(ctx, g, buf[:6], buf[6:12]) }, "send", "not divisible into 4"},
		{"alltoall recv", func() error { return AllToAll(ctx, g, buf[:8], buf[8:12]) }, "recv", "want 8 (len(send))"},
		{"alltoallv sum", func() error {
			return AllToAllV(ctx, g, buf[:3], []int{1, 1, 1, 1}, buf[4:8], []int{1, 1, 1, 1})
		}, "send", "has 3 elements, want 4 (the sum of sendCounts)"},
		{"alltoallv own", func() error {
			return AllToAllV(ctx, g, buf[:4], []int{1, 1, 1, 1}, buf[4:9], []int{1, 2, 1, 1})
		}, "recvCounts[1]", "want sendCounts[1] = 1"},
		{"broadcast root high", func() error { return Broadcast(ctx, g, buf, buf, 4) }, "root", "4 is out of range"},
		{"broadcast root negative", func() error { return Broadcast(ctx, g, buf, buf, -1) }, "root", "-1 is out of range"},
		{"broadcast nil at root", func() error { return Broadcast(ctx, g, nil, buf, 1) }, "send", "is nil at the root, want 16"},
		{"reduce recv at root", func() error { return Reduce(ctx, g, buf[:4], nil, Sum, 1) }, "recv", "is nil at the root, want 4"},
		{"reduce root", func() error { return Reduce(ctx, g, buf[:4], nil, Sum, 7) }, "root", "7 is out of range"},
		{"gather root", func() error { return Gather(ctx, g, buf[:2], nil, 4) }, "root", "4 is out of range, want 0 <= root < 4"},
		{"gather recv at root", func() error { return Gather(ctx, g, buf[:2], buf[2:9], 1) }, "recv", "has 7 elements at the root, want 8 (size 4 × len(send))"},
		{"gather overlap", func() error { return Gather(ctx, g, buf[1:3], buf[:8], 1) }, "send", "overlaps"},
		{"gatherv counts", func() error { return GatherV(ctx, g, buf[:1], buf[1:5], []int{1, 1}, 0) }, "counts", "has 2 entries, want 4"},
		{"gatherv nil counts", func() error { return GatherV(ctx, g, buf[:1], buf[1:5], nil, 0) }, "counts", "has 0 entries, want 4"},
		{"gatherv own", func() error { return GatherV(ctx, g, buf[:2], nil, []int{1, 1, 1, 1}, 0) }, "counts[1]", "is 1, want len(send) = 2"},
		{"gatherv negative", func() error { return GatherV(ctx, g, buf[:1], nil, []int{1, 1, -3, 1}, 0) }, "counts[2]", "-3 is negative"},
		{"gatherv recv", func() error { return GatherV(ctx, g, buf[:1], buf[1:4], []int{1, 1, 1, 2}, 1) }, "recv", "has 3 elements at the root, want 5 (the sum of counts)"},
		{"scatter root", func() error { return Scatter(ctx, g, nil, buf[:2], -2) }, "root", "-2 is out of range"},
		{"scatter send at root", func() error { return Scatter(ctx, g, nil, buf[:2], 1) }, "send", "is nil at the root, want 8 (size 4 × len(recv))"},
		{"scatter overlap", func() error { return Scatter(ctx, g, buf[:8], buf[7:9], 1) }, "recv", "overlaps"},
		{"scatterv own", func() error { return ScatterV(ctx, g, nil, buf[:2], []int{2, 3, 2, 2}, 0) }, "counts[1]", "is 3, want len(recv) = 2"},
		{"scatterv send", func() error { return ScatterV(ctx, g, buf[:5], buf[5:7], []int{2, 2, 2, 2}, 1) }, "send", "has 5 elements at the root, want 8 (the sum of counts)"},
		{"reducescatterv op", func() error { return ReduceScatterV(ctx, g, buf[:4], buf[4:5], []int{1, 1, 1, 1}, Op(0)) }, "op", "is not an op"},
		{"reducescatterv nil counts", func() error { return ReduceScatterV(ctx, g, buf[:4], buf[4:5], nil, Sum) }, "counts", "has 0 entries, want 4"},
		{"reducescatterv own", func() error { return ReduceScatterV(ctx, g, buf[:4], buf[4:6], []int{1, 1, 1, 1}, Sum) }, "counts[1]", "is 1, want len(recv) = 2"},
		{"reducescatterv send", func() error { return ReduceScatterV(ctx, g, buf[:3], buf[4:5], []int{1, 1, 1, 1}, Sum) }, "send", "has 3 elements, want 4 (the sum of counts)"},
		{"reducescatterv overlap", func() error { return ReduceScatterV(ctx, g, buf[:4], buf[2:3], []int{1, 1, 1, 1}, Sum) }, "recv", "overlaps"},
		{"igather root", func() error { _, err := IGather(ctx, g, buf[:1], nil, 9); return err }, "root", "9 is out of range"},
		{"iscatterv counts", func() error { _, err := IScatterV(ctx, g, nil, buf[:1], []int{1}, 0); return err }, "counts", "has 1 entries, want 4"},
		//lint:ignore SA1012 a nil context is what this case checks is refused
		{"nil context", func() error { return Barrier(nil, g) }, "ctx", "is nil"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.call()
			require.ErrorIs(t, err, ErrInvalidArgument)
			var ae *ArgError
			require.ErrorAs(t, err, &ae)
			require.Equal(t, 1, ae.Rank)
			require.Equal(t, c.arg, ae.Arg)
			require.Contains(t, err.Error(), c.says)
		})
	}
	err := AllReduce[float32](ctx, nil, nil, nil, Sum)
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.Contains(t, err.Error(), "g: is nil")
	// The other ranks' data and the group are untouched: the next
	// operation lines up on every rank.
	require.Zero(t, w.mem.Pending())
	suiteOf("float32").allReduce(t, w, 3, Sum, false)
}

// TestNonRootBuffersIgnored: Broadcast's send and Reduce's recv are only
// read at the root.
func TestNonRootBuffersIgnored(t *testing.T) {
	w := newWorld(t, 3, Options{})
	ctx := testCtx(t)
	got := make([][]int64, 3)
	w.ok(t, "Broadcast", func(r int, g *Group) error {
		got[r] = make([]int64, 2)
		var send []int64
		if r == 0 {
			send = []int64{4, 5}
		}
		return Broadcast(ctx, g, send, got[r], 0)
	})
	for r := range 3 {
		require.Equal(t, []int64{4, 5}, got[r])
	}
	var out []int64
	w.ok(t, "Reduce", func(r int, g *Group) error {
		send := []int64{int64(r), 1}
		if r == 2 {
			out = make([]int64, 2)
			return Reduce(ctx, g, send, out, Sum, 2)
		}
		return Reduce(ctx, g, send, nil, Sum, 2)
	})
	require.Equal(t, []int64{3, 3}, out)
}

func TestOptions(t *testing.T) {
	ep := memp2p.New(2).Endpoint(0)
	_, err := New(ep, Options{ChunkBytes: -1})
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.Contains(t, err.Error(), "Options.ChunkBytes")
	_, err = New(ep, Options{Algorithm: 99})
	require.ErrorIs(t, err, ErrInvalidArgument)
	_, err = New(nil, Options{})
	require.ErrorIs(t, err, ErrInvalidArgument)

	t.Setenv(EnvAlgorithm, "rinng")
	_, err = OptionsFromEnv()
	require.ErrorIs(t, err, ErrUnknownAlgorithm)
	require.Contains(t, err.Error(), `RDMACELL_ALGO="rinng"`)

	// New reads no environment: the options are the caller's.
	g, err := New(ep, Options{})
	require.NoError(t, err)
	require.Equal(t, Auto, g.algo)
	require.NoError(t, g.Close())

	t.Setenv(EnvAlgorithm, "Halving-Doubling")
	o, err := OptionsFromEnv()
	require.NoError(t, err)
	require.Equal(t, HalvingDoubling, o.Algorithm)
}

func TestParseAlgorithm(t *testing.T) {
	for a := Auto; a <= lastAlgorithm; a++ {
		got, err := ParseAlgorithm(a.String())
		require.NoError(t, err)
		require.Equal(t, a, got)
	}
	got, err := ParseAlgorithm("")
	require.NoError(t, err)
	require.Equal(t, Auto, got)
	_, err = ParseAlgorithm("bogus")
	require.ErrorIs(t, err, ErrUnknownAlgorithm)
}

// TestEnvAlgorithm forces the ring through the environment, and checks
// that the operation ran it.
func TestEnvAlgorithm(t *testing.T) {
	t.Setenv(EnvAlgorithm, "ring")
	o, err := OptionsFromEnv()
	require.NoError(t, err)
	w := newWorld(t, 3, o)
	require.Equal(t, Ring, choose(kAllReduce, w.groups[0].algo, 3, 4))
	require.Equal(t, Tree, choose(kBroadcast, w.groups[0].algo, 3, 4), "collectives without a ring choose for themselves")
	suiteOf("float32").allReduce(t, w, 10, Sum, false)
}

// TestOpenReadsEnv: with no world size, Open takes the environment's
// algorithm unless the options force one, and turns Reproducible on if
// either asks; with a world size it reads no environment.
func TestOpenReadsEnv(t *testing.T) {
	t.Setenv(EnvAlgorithm, "ring")
	t.Setenv("RDMACELL_REPRODUCIBLE", "1")
	got, err := withEnv(Options{})
	require.NoError(t, err)
	require.Equal(t, Ring, got.Algorithm)
	require.True(t, got.Reproducible)
	got, err = withEnv(Options{Algorithm: Tree})
	require.NoError(t, err)
	require.Equal(t, Tree, got.Algorithm, "the options' algorithm stands")
	got, err = withEnv(Options{Comm: comm.Options{WorldSize: 2}})
	require.NoError(t, err)
	require.Equal(t, Auto, got.Algorithm)
	require.False(t, got.Reproducible)
	t.Setenv(EnvAlgorithm, "bogus")
	_, err = withEnv(Options{})
	require.ErrorIs(t, err, ErrUnknownAlgorithm)
}

func TestChoose(t *testing.T) {
	cases := []struct {
		k     kind
		n, b  int
		want  Algorithm
		force Algorithm
	}{
		{kAllReduce, 8, 1 << 10, RecursiveDoubling, Auto},
		{kAllReduce, 8, 256 << 10, HalvingDoubling, Auto},
		{kAllReduce, 8, 4 << 20, Ring, Auto},
		{kAllReduce, 2, 256 << 10, HalvingDoubling, Auto},
		{kAllReduce, 2, 64 << 20, HalvingDoubling, Auto},
		{kAllReduce, 3, 64 << 20, Ring, Auto},
		{kAllReduce, 8, 4 << 20, RecursiveDoubling, RecursiveDoubling},
		{kAllReduce, 8, 4 << 20, Ring, Chain},
		{kAllGather, 8, 64 << 10, RecursiveDoubling, Auto},
		{kAllGather, 8, 1 << 20, Ring, Auto},
		{kReduceScatter, 8, 64 << 10, HalvingDoubling, Auto},
		{kReduceScatter, 8, 1 << 20, Ring, Auto},
		{kBroadcast, 8, 1 << 10, Tree, Auto},
		{kReduce, 8, 1 << 20, Chain, Auto},
		{kAllToAllV, 8, 1 << 20, Pairwise, Ring},
		{kBarrier, 8, 0, Dissemination, Auto},
		{kGather, 8, 8 * 4 << 10, Tree, Auto},
		{kScatterV, 8, 8 * 32 << 10, Linear, Auto},
		{kScatter, 8, 1 << 10, Linear, Linear},
		{kGatherV, 8, 1 << 30, Tree, Tree},
		{kGather, 8, 1 << 10, Tree, Ring},
		{kReduceScatterV, 8, 64 << 10, HalvingDoubling, Auto},
		{kReduceScatterV, 8, 1 << 20, Ring, Auto},
		{kReduceScatterV, 8, 1 << 10, Ring, Ring},
	}
	for _, c := range cases {
		require.Equal(t, c.want, choose(c.k, c.force, c.n, c.b), "%s n=%d bytes=%d forced %s", c.k, c.n, c.b, c.force)
	}
}

// TestNonBlocking issues a mix of operations on every rank without
// waiting, then waits for them last to first: each must be correct, and
// once one is done every operation issued before it is done too.
func TestNonBlocking(t *testing.T) {
	for _, n := range []int{4, 5} {
		w := newWorld(t, n, Options{ChunkBytes: 1 << 10})
		ctx := testCtx(t)
		const count = 3000
		type result struct {
			ar, bc, ag, rs, big []float32
			red                 []int32
		}
		res := make([]result, n)
		ins := inputs[float32](n, n*count, Sum)
		w.ok(t, "non-blocking", func(r int, g *Group) error {
			x := &res[r]
			x.ar = slices.Clone(ins[r][:count])
			x.bc = make([]float32, count)
			x.ag = make([]float32, n*count)
			x.rs = make([]float32, count)
			x.big = slices.Clone(ins[r])
			x.red = make([]int32, 2)
			var bsend []float32
			if r == 1 {
				bsend = ins[1][:count]
			}
			var reqs []Request
			add := func(q Request, err error) error {
				reqs = append(reqs, q)
				return err
			}
			if err := errors.Join(
				add(IAllReduce(ctx, g, x.ar, x.ar, Sum)),
				add(IBroadcast(ctx, g, bsend, x.bc, 1)),
				add(IAllGather(ctx, g, ins[r][:count], x.ag)),
				add(IBarrier(ctx, g)),
				add(IReduceScatter(ctx, g, ins[r], x.rs, Sum)),
				add(IReduce(ctx, g, []int32{int32(r), 1}, pick(r == 0, x.red, nil), Sum, 0)),
				add(IAllReduce(ctx, g, x.big, x.big, Max)),
			); err != nil {
				return err
			}
			// A blocking call queues behind them.
			if err := AllReduce(ctx, g, []int32{1}, make([]int32, 1), Sum); err != nil {
				return err
			}
			for i := len(reqs) - 1; i >= 0; i-- {
				if err := reqs[i].Wait(ctx); err != nil {
					return err
				}
				for j := range i {
					if done, err := reqs[j].Test(); !done || err != nil {
						return errors.New("an earlier operation is not done")
					}
				}
			}
			return nil
		})
		arWant := reference(sliceEach(ins, 0, count), Sum)
		for r := range n {
			x := res[r]
			require.Equal(t, arWant, x.ar, "rank %d", r)
			require.Equal(t, ins[1][:count], x.bc, "rank %d", r)
			require.Equal(t, slices.Concat(sliceEach(ins, 0, count)...), x.ag, "rank %d", r)
			require.Equal(t, reference(ins, Sum)[r*count:(r+1)*count], x.rs, "rank %d", r)
			require.Equal(t, reference(ins, Max), x.big, "rank %d", r)
		}
		require.Equal(t, []int32{int32(n * (n - 1) / 2), int32(n)}, res[0].red)
	}
}

func sliceEach[T any](in [][]T, lo, hi int) [][]T {
	out := make([][]T, len(in))
	for i := range in {
		out[i] = in[i][lo:hi]
	}
	return out
}

func TestRequest(t *testing.T) {
	w := newWorld(t, 1, Options{})
	g := w.groups[0]
	ctx := context.Background()
	q, err := IBarrier(ctx, g)
	require.NoError(t, err)
	require.NoError(t, q.Wait(ctx))
	require.ErrorIs(t, q.Wait(ctx), ErrRequestDone)
	_, err = q.Test()
	require.ErrorIs(t, err, ErrRequestDone)
	require.ErrorIs(t, Request{}.Wait(ctx), ErrRequestDone)

	// A Wait whose context ends leaves the operation going.
	w2 := newWorld(t, 2, Options{})
	q, err = IBarrier(ctx, w2.groups[0])
	require.NoError(t, err)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, q.Wait(cancelled), context.Canceled)
	require.NoError(t, Barrier(ctx, w2.groups[1]))
	require.NoError(t, q.Wait(ctx))

	// A context that has ended before the call issues nothing.
	require.ErrorIs(t, Barrier(cancelled, g), context.Canceled)
	_, err = IBarrier(cancelled, g)
	require.ErrorIs(t, err, context.Canceled)
	require.NoError(t, Barrier(ctx, g))
}

// TestClose: Close lets issued operations finish, then refuses new ones.
func TestClose(t *testing.T) {
	mem := memp2p.New(2)
	g0, err := New(mem.Endpoint(0), Options{})
	require.NoError(t, err)
	g1, err := New(mem.Endpoint(1), Options{})
	require.NoError(t, err)
	ctx := testCtx(t)
	buf := []float64{1, 2}
	q, err := IAllReduce(ctx, g0, buf, buf, Sum)
	require.NoError(t, err)
	closed := make(chan error)
	go func() { closed <- g0.Close() }()
	require.NoError(t, AllReduce(ctx, g1, []float64{3, 4}, make([]float64, 2), Sum))
	require.NoError(t, <-closed)
	require.NoError(t, q.Wait(ctx))
	require.Equal(t, []float64{4, 6}, buf)
	require.ErrorIs(t, Barrier(ctx, g0), ErrClosed)
	require.NoError(t, g0.Close(), "Close twice")
	require.NoError(t, g1.Close())
	require.Zero(t, mem.Allocated())
}

// TestNoAllocations: in steady state an AllReduce, blocking or not,
// allocates nothing on any rank, with every algorithm (the in-memory
// transport recycles its requests too).
func TestNoAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	const n = 4
	for _, c := range []struct {
		algo Algorithm
		m    mode
	}{{Ring, 0}, {RecursiveDoubling, 0}, {HalvingDoubling, 0}, {Shared, 0},
		{Ring, modeReproducible}, {Shared, modeReproducible}, {HalvingDoubling, modeExact}, {Shared, modeExact}} {
		algo := c.algo
		t.Run(algo.String()+"/"+c.m.String(), func(t *testing.T) {
			call := func(ctx context.Context, g *Group, buf []float32) error {
				if algo == Ring { // the ring goes through the queue
					q, err := IAllReduce(ctx, g, buf, buf, Avg)
					if err != nil {
						return err
					}
					return q.Wait(ctx)
				}
				return AllReduce(ctx, g, buf, buf, Avg)
			}
			w := newWorld(t, n, Options{Algorithm: algo, ChunkBytes: 4 << 10, Reproducible: c.m == modeReproducible, Exact: c.m == modeExact})
			ctx := context.Background()
			bufs := make([][]float32, n)
			for r := range n {
				bufs[r] = make([]float32, 10000)
			}
			step := w.lockstep(t, func(r int, g *Group) error { return call(ctx, g, bufs[r]) })
			step() // grows the scratch buffers
			require.Zero(t, testing.AllocsPerRun(20, step))
			require.Len(t, w.mem.Endpoint(0).Recorder().Ops(), 22, "the operations measured were recorded")
		})
	}
}
