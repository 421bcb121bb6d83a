package collectives

import (
	"context"
	"fmt"
	"math/bits"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRidesOnTheExchange counts the messages of small operations that
// ride on the fingerprint exchange: one per rank and round, where each
// would send its data in further messages without riding. In a
// power-of-two world that is AllReduce, AllGather, Broadcast, Reduce
// and Gather, from every root; with two ranks every collective but
// AllToAllV; a Barrier of any size is the exchange alone. The results
// are checked too, so riding is not bought with wrong data.
func TestRidesOnTheExchange(t *testing.T) {
	for _, n := range []int{2, 3, 4, 5, 8} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			t.Parallel()
			w := newWorldOn(t, n, false, func(int) Options { return Options{} })
			exchange := int64(n) * int64(bits.Len(uint(n-1)))
			rides := func(what string, fn func()) {
				t.Helper()
				before := w.mem.Sent()
				fn()
				require.Equal(t, exchange, w.mem.Sent()-before, "messages of %s", what)
			}
			f32 := suiteOf("float32")
			rides("a Barrier", func() {
				w.ok(t, "Barrier", func(_ int, g *Group) error { return Barrier(testCtx(t), g) })
			})
			if n&(n-1) != 0 {
				return
			}
			for _, elems := range []int{1, 1000, fuseMax/4 - 1} {
				for _, in := range []bool{false, true} {
					rides(fmt.Sprintf("AllReduce ×%d in place %v", elems, in), func() { f32.allReduce(t, w, elems, Sum, in) })
				}
			}
			for _, in := range []bool{false, true} {
				rides("AllGather", func() { f32.allGather(t, w, 3, in) })
				rides("AllGather of fuseMax bytes", func() { f32.allGather(t, w, fuseMax/4/n, in) })
				for root := range n {
					what := fmt.Sprintf("root %d in place %v", root, in)
					rides("Broadcast "+what, func() { f32.broadcast(t, w, 7, root, in) })
					rides("Reduce "+what, func() { f32.reduce(t, w, 7, Max, root, in) })
					rides("Gather "+what, func() { f32.gather(t, w, 5, nil, root, in) })
					rides("GatherV "+what, func() { f32.gather(t, w, 0, vcounts(n), root, in) })
				}
				if n != 2 {
					continue
				}
				for root := range n {
					what := fmt.Sprintf("root %d in place %v", root, in)
					rides("Scatter "+what, func() { f32.scatter(t, w, 5, nil, root, in) })
					rides("ScatterV "+what, func() { f32.scatter(t, w, 0, vcounts(n), root, in) })
				}
				rides("ReduceScatter", func() { f32.reduceScatter(t, w, 9, Sum, in) })
				rides("AllToAll", func() { f32.allToAll(t, w, 4, in) })
			}

			// Recursive doubling forced on a vector one element over
			// fuseMax: the exchange, then the data.
			rd := newWorldOn(t, n, false, func(int) Options { return Options{Algorithm: RecursiveDoubling} })
			before := rd.mem.Sent()
			f32.allReduce(t, rd, fuseMax/4, Sum, false)
			require.Equal(t, exchange, rd.mem.Sent()-before, "messages of a forced recursive doubling of fuseMax bytes")
			before = rd.mem.Sent()
			f32.allReduce(t, rd, fuseMax/4+1, Sum, false)
			require.Equal(t, 2*exchange, rd.mem.Sent()-before, "a larger AllReduce does not ride")
		})
	}
}

// vcounts is a V collective's counts over n ranks, one of them 0.
func vcounts(n int) []int {
	c := make([]int, n)
	for i := range c {
		c[i] = (i * 3) % 5
	}
	return c
}

// TestRideMismatchMovesNothing has ranks disagree about operations that
// ride, or that ride on some ranks and not on others: every rank reports
// the disagreement, its buffers hold what they held before (an in-place
// AllReduce's input is not half combined), and the group goes on.
func TestRideMismatchMovesNothing(t *testing.T) {
	big := fuseMax/4 + 16
	cases := []struct {
		name       string
		n, odd     int
		elems, alt int // the others' count and the odd rank's
		// gathers says which ranks call AllGather; the others AllReduce.
		gathers func(r int) bool
	}{
		{name: "allreduce count", n: 2, odd: 1, elems: 2, alt: 3},
		{name: "allreduce rides against one that does not", n: 4, odd: 2, elems: 10, alt: big},
		{name: "allreduce does not ride against ones that do", n: 4, odd: 0, elems: big, alt: 10},
		{name: "allgather count", n: 8, odd: 5, elems: 4, alt: 5, gathers: func(int) bool { return true }},
		{name: "allgather against allreduce", n: 4, odd: 0, elems: 8, alt: 8, gathers: func(r int) bool { return r == 0 }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			w := newWorldOn(t, c.n, false, func(int) Options { return Options{} })
			ctx := testCtx(t)
			gathers := func(r int) bool { return c.gathers != nil && c.gathers(r) }
			bufs := make([][]float32, c.n)
			errs := w.run(func(r int, g *Group) error {
				elems := pick(r == c.odd, c.alt, c.elems)
				if gathers(r) {
					send := fill(elems, r)
					bufs[r] = make([]float32, c.n*elems)
					copy(bufs[r], send)
					err := AllGather(ctx, g, send, bufs[r])
					require.Equal(t, fill(elems, r), send, "rank %d's send buffer", r)
					return err
				}
				bufs[r] = fill(elems, r)
				return AllReduce(ctx, g, bufs[r], bufs[r], Sum)
			})
			for r, err := range errs {
				var me *MismatchError
				require.ErrorAs(t, err, &me, "rank %d", r)
				require.Equal(t, []int{c.odd}, me.Odd, "rank %d: %v", r, err)
				elems := len(bufs[r])
				if gathers(r) {
					elems /= c.n
					require.Equal(t, make([]float32, len(bufs[r])-elems), bufs[r][elems:], "rank %d's receive buffer beyond its own block", r)
				}
				require.Equal(t, fill(elems, r), bufs[r][:elems], "rank %d's buffer", r)
			}
			require.Zero(t, w.mem.Pending())
			suiteOf("float32").allReduce(t, w, 5, Sum, true)
		})
	}
}

// fill is n values that name rank r.
func fill(n, r int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r*1000 + i + 1)
	}
	return v
}

// TestRideHonoursContext: a rank whose partner never calls fails when its
// context ends, in the exchange, and names the partner.
func TestRideHonoursContext(t *testing.T) {
	w := newWorldOn(t, 2, false, func(int) Options { return Options{} })
	ctx, cancel := context.WithTimeout(testCtx(t), 100*time.Millisecond)
	defer cancel()
	err := AllReduce(ctx, w.groups[0], []float32{1}, make([]float32, 1), Sum)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	var oe *OpError
	require.ErrorAs(t, err, &oe)
	require.Equal(t, 1, oe.Peer)
}

// TestRideMismatchTwoRanks has two ranks call each pair of different
// operations that ride with two ranks, or one that rides against one
// that does not: both report the disagreement and the group goes on.
func TestRideMismatchTwoRanks(t *testing.T) {
	calls := map[string]call{
		"allreduce":     allReduceF32(6, Sum),
		"large":         allReduceF32(fuseMax, Sum),
		"broadcast":     broadcastF32(6, 1),
		"reduce":        reduceF32(6, 0),
		"gather":        gatherF32(3, 1),
		"scatter":       scatterF32(3, 0),
		"barrier":       barrier,
		"reducescatter": vCall(kReduceScatterV, []int{2, 4}),
		"alltoall": func(ctx context.Context, g *Group) error {
			return AllToAll(ctx, g, make([]float32, 6), make([]float32, 6))
		},
	}
	for a, ca := range calls {
		for b, cb := range calls {
			if a == b {
				continue
			}
			t.Run(a+"/"+b, func(t *testing.T) {
				t.Parallel()
				w := newWorldOn(t, 2, false, func(int) Options { return Options{} })
				ctx := testCtx(t)
				errs := w.run(func(r int, g *Group) error { return pick(r == 0, ca, cb)(ctx, g) })
				for r, err := range errs {
					require.ErrorIs(t, err, ErrMismatch, "rank %d", r)
				}
				require.Zero(t, w.mem.Pending())
				suiteOf("float32").allReduce(t, w, 5, Sum, true)
			})
		}
	}
}

// TestWithoutRiding runs the small operations that would ride on the
// fingerprint exchange with the exchange turned off, so that the
// message algorithms riding replaces in power-of-two worlds (recursive
// doubling, the binomial trees, the single exchanges of two ranks) stay
// tested there.
func TestWithoutRiding(t *testing.T) {
	for _, algo := range []Algorithm{Auto, RecursiveDoubling, Tree} {
		for _, n := range []int{2, 4, 8} {
			t.Run(fmt.Sprintf("%s/n=%d", algo, n), func(t *testing.T) {
				t.Parallel()
				w := newWorldOn(t, n, false, func(int) Options { return Options{Algorithm: algo, SkipVerify: true} })
				for _, s := range []suite{suiteOf("float32"), suiteOf("float16")} {
					for _, count := range []int{1, 7, 100} {
						for _, in := range []bool{false, true} {
							s.allReduce(t, w, count, Sum, in)
							s.allGather(t, w, count, in)
							s.reduceScatter(t, w, count, Max, in)
							s.allToAll(t, w, count, in)
							for _, root := range []int{0, n - 1} {
								s.broadcast(t, w, count, root, in)
								s.reduce(t, w, count, Sum, root, in)
								s.gather(t, w, count, nil, root, in)
								s.scatter(t, w, count, nil, root, in)
							}
						}
					}
				}
				before := w.mem.Sent()
				suiteOf("float32").allReduce(t, w, 1, Sum, false)
				require.Equal(t, int64(n)*int64(bits.Len(uint(n-1))), w.mem.Sent()-before, "an AllReduce without the exchange")
			})
		}
	}
}
