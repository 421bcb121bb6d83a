package collectives

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// blockStarts returns the element offset of each block of counts, and
// their total.
func blockStarts(counts []int) ([]int, int) {
	at, total := make([]int, len(counts)), 0
	for i, c := range counts {
		at[i], total = total, total+c
	}
	return at, total
}

// uniform is n counts of count each.
func uniform(n, count int) []int {
	c := make([]int, n)
	for i := range c {
		c[i] = count
	}
	return c
}

// layoutOf is the blocks of a gather or scatter: counts, or count per
// rank when counts is nil, with their offsets and total.
func layoutOf(n, count int, counts []int) (cs, at []int, total int) {
	cs = counts
	if cs == nil {
		cs = uniform(n, count)
	}
	at, total = blockStarts(cs)
	return cs, at, total
}

func checkGather[T Element](t *testing.T, w *world, count int, counts []int, root int, inPlace bool) {
	t.Helper()
	ctx := testCtx(t)
	cs, at, total := layoutOf(w.n, count, counts)
	in := make([][]T, w.n)
	for r := range in {
		in[r] = genVec[T](r, cs[r], Sum)
	}
	want := slices.Concat(in...)
	var out []T
	sends := make([][]T, w.n)
	what := caseName("Gather counts=", counts, " count=", count, " root=", root, " inPlace=", inPlace)
	w.ok(t, what, func(r int, g *Group) error {
		sends[r] = slices.Clone(in[r])
		var recv []T
		if r == root {
			recv = make([]T, total)
			if inPlace {
				sends[r] = recv[at[r] : at[r]+cs[r]]
				copy(sends[r], in[r])
			}
			out = recv
		}
		if counts == nil {
			return Gather(ctx, g, sends[r], recv, root)
		}
		return GatherV(ctx, g, sends[r], recv, counts, root)
	})
	sameElems(t, want, out, what)
	for r := range w.n {
		sameElems(t, in[r], sends[r], "%s: rank %d: send changed", what, r)
	}
}

func checkScatter[T Element](t *testing.T, w *world, count int, counts []int, root int, inPlace bool) {
	t.Helper()
	ctx := testCtx(t)
	cs, at, total := layoutOf(w.n, count, counts)
	in := genVec[T](root, total, Sum)
	outs := make([][]T, w.n)
	var send []T
	what := caseName("Scatter counts=", counts, " count=", count, " root=", root, " inPlace=", inPlace)
	w.ok(t, what, func(r int, g *Group) error {
		outs[r] = make([]T, cs[r])
		var s []T
		if r == root {
			s = slices.Clone(in)
			if inPlace {
				outs[r] = s[at[r] : at[r]+cs[r]]
			}
			send = s
		}
		if counts == nil {
			return Scatter(ctx, g, s, outs[r], root)
		}
		return ScatterV(ctx, g, s, outs[r], counts, root)
	})
	for r := range w.n {
		sameElems(t, in[at[r]:at[r]+cs[r]], outs[r], "%s: rank %d", what, r)
	}
	sameElems(t, in, send, "%s: the root's send changed", what)
}

func checkReduceScatterV[T Element](t *testing.T, w *world, counts []int, op Op, inPlace bool) {
	t.Helper()
	ctx := testCtx(t)
	at, total := blockStarts(counts)
	in := inputs[T](w.n, total, op)
	want := reference(in, op)
	outs := make([][]T, w.n)
	sends := make([][]T, w.n)
	what := caseName("ReduceScatterV counts=", counts, " op=", op, " inPlace=", inPlace)
	w.ok(t, what, func(r int, g *Group) error {
		sends[r] = slices.Clone(in[r])
		if inPlace {
			outs[r] = sends[r][at[r] : at[r]+counts[r]]
		} else {
			outs[r] = make([]T, counts[r])
		}
		return ReduceScatterV(ctx, g, sends[r], outs[r], counts, op)
	})
	for r := range w.n {
		sameElems(t, want[at[r]:at[r]+counts[r]], outs[r], "%s: rank %d", what, r)
		if !inPlace {
			sameElems(t, in[r], sends[r], "%s: rank %d: send changed", what, r)
		}
	}
}

// rootedCases runs check (a suite's gather or scatter) at every count, with
// uneven counts (zeros among them) for the V form, from every root of
// roots, in and out of place.
func rootedCases(t *testing.T, w *world, check func(t *testing.T, w *world, count int, counts []int, root int, inPlace bool)) {
	for _, root := range roots(w.n) {
		for _, inPlace := range []bool{false, true} {
			for _, count := range []int{0, 1, 7, 30} {
				check(t, w, count, nil, root, inPlace)
			}
			for base := range 3 {
				check(t, w, 0, vCounts(w.n, base), root, inPlace)
			}
			check(t, w, 0, make([]int, w.n), root, inPlace)
		}
	}
}

func TestGather(t *testing.T) {
	forEach(t, []Algorithm{Auto, Tree, Linear, Shared}, func(t *testing.T, w *world) {
		for _, s := range suites {
			t.Run(s.name, func(t *testing.T) { rootedCases(t, w, s.gather) })
		}
	})
}

func TestScatter(t *testing.T) {
	forEach(t, []Algorithm{Auto, Tree, Linear, Shared}, func(t *testing.T, w *world) {
		for _, s := range suites {
			t.Run(s.name, func(t *testing.T) { rootedCases(t, w, s.scatter) })
		}
	})
}

func TestReduceScatterV(t *testing.T) {
	forEach(t, []Algorithm{Auto, Ring, HalvingDoubling, Shared}, func(t *testing.T, w *world) {
		for _, s := range suites {
			t.Run(s.name, func(t *testing.T) {
				for base := range 3 {
					for _, op := range allOps {
						for _, inPlace := range []bool{false, true} {
							s.reduceScatterV(t, w, vCounts(w.n, base), op, inPlace)
						}
					}
				}
				s.reduceScatterV(t, w, make([]int, w.n), Sum, false)
				s.reduceScatterV(t, w, uniform(w.n, 5), Max, true)
			})
		}
	})
}

// TestGatherScatterLarge moves blocks of many chunks, the linear and
// shared algorithms' pipelines, and the tree's staging of a wrapped
// subtree at the root.
func TestGatherScatterLarge(t *testing.T) {
	const count = 1 << 14
	for _, n := range []int{3, 8} {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			t.Parallel()
			f32, u8 := suiteOf("float32"), suiteOf("uint8")
			for _, algo := range []Algorithm{Auto, Tree, Linear, Shared} {
				w := newWorld(t, n, Options{Algorithm: algo, ChunkBytes: 16 << 10})
				f32.gather(t, w, count, nil, n-1, false)
				f32.scatter(t, w, count, nil, 1, true)
				u8.gather(t, w, 0, vCounts(n, 1), 1, true)
				u8.scatter(t, w, 0, []int{count, 0, 3*count + 1, 2, 1, 0, count, 9}[:n], n-1, false)
			}
			for _, algo := range []Algorithm{Ring, HalvingDoubling, Shared} {
				w := newWorld(t, n, Options{Algorithm: algo, ChunkBytes: 16 << 10})
				f32.reduceScatterV(t, w, []int{count, 0, 3 * count, 2, 1, 0, count, 9}[:n], Sum, false)
			}
		})
	}
}

// TestReduceScatterVReproducible: in the reproducible and exact modes
// ReduceScatterV folds in rank order over messages and through shared
// memory alike.
func TestReduceScatterVReproducible(t *testing.T) {
	for _, o := range []Options{{Reproducible: true}, {Exact: true}, {Reproducible: true, Algorithm: Shared}, {Exact: true, Algorithm: Shared}} {
		for _, n := range []int{1, 3, 5} {
			t.Run(fmt.Sprintf("%s/exact=%v/n=%d", o.Algorithm, o.Exact, n), func(t *testing.T) {
				o.ChunkBytes = smallChunk
				w := newWorld(t, n, o)
				for _, s := range []suite{suiteOf("float32"), suiteOf("float64"), suiteOf("bfloat16")} {
					for _, op := range allOps {
						s.reduceScatterV(t, w, vCounts(n, 2), op, op == Max)
					}
				}
			})
		}
	}
}

// TestWaitAll issues a mix of the new non-blocking collectives on every
// rank and waits for all of them at once.
func TestWaitAll(t *testing.T) {
	const n, count = 4, 50
	w := newWorld(t, n, Options{})
	ctx := testCtx(t)
	type result struct {
		gathered, scattered, reduced []int32
	}
	res := make([]result, n)
	counts := []int{3, 0, 5, 2}
	total := 10
	w.ok(t, "WaitAll", func(r int, g *Group) error {
		x := &res[r]
		x.scattered = make([]int32, count)
		x.reduced = make([]int32, counts[r])
		if r == 2 {
			x.gathered = make([]int32, n*count)
		}
		var scatterSend []int32
		if r == 1 {
			scatterSend = genVec[int32](1, n*count, Sum)
		}
		g1, err1 := IGather(ctx, g, genVec[int32](r, count, Sum), x.gathered, 2)
		s1, err2 := IScatter(ctx, g, scatterSend, x.scattered, 1)
		r1, err3 := IReduceScatterV(ctx, g, genVec[int32](r, total, Sum), x.reduced, counts, Sum)
		if err := errors.Join(err1, err2, err3); err != nil {
			return err
		}
		if err := WaitAll(ctx, r1, Request{}, s1, g1); err != nil {
			return err
		}
		// Spent now: inactive for WaitAll and WaitAny, spent for Wait.
		if err := WaitAll(ctx, g1, s1); err != nil {
			return err
		}
		if i, err := WaitAny(ctx, g1, s1, r1); i != -1 || err != nil {
			return fmt.Errorf("WaitAny over spent requests: %d, %v", i, err)
		}
		if err := g1.Wait(ctx); !errors.Is(err, ErrRequestDone) {
			return fmt.Errorf("Wait after WaitAll: %v", err)
		}
		return nil
	})
	var gin [][]int32
	for r := range n {
		gin = append(gin, genVec[int32](r, count, Sum))
	}
	require.Equal(t, slices.Concat(gin...), res[2].gathered)
	sin := genVec[int32](1, n*count, Sum)
	want := reference(inputs[int32](n, total, Sum), Sum)
	at, _ := blockStarts(counts)
	for r := range n {
		require.Equal(t, sin[r*count:(r+1)*count], res[r].scattered, "rank %d", r)
		sameElems(t, want[at[r]:at[r]+counts[r]], res[r].reduced, "rank %d", r)
	}
}

// TestWaitAllContext: a WaitAll whose context ends spends nothing; the
// requests can be waited for again once the operations can complete.
func TestWaitAllContext(t *testing.T) {
	w := newWorld(t, 2, Options{})
	ctx := testCtx(t)
	q, err := IBarrier(ctx, w.groups[0])
	require.NoError(t, err)
	done, err := IBarrier(ctx, w.groups[0]) // queued behind q
	require.NoError(t, err)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, WaitAll(cancelled, q, done), context.Canceled)
	i, err := WaitAny(cancelled, q, done)
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, -1, i)
	w.ok(t, "rank 1's barriers", func(r int, g *Group) error {
		if r == 0 {
			return nil
		}
		return errors.Join(Barrier(ctx, g), Barrier(ctx, g))
	})
	require.NoError(t, WaitAll(ctx, q, done))
}

// TestWaitAny collects the results of requests of one group and of two,
// in completion order, until none is active.
func TestWaitAny(t *testing.T) {
	const n = 3
	a, b := newWorld(t, n, Options{}), newWorld(t, n, Options{})
	ctx := testCtx(t)
	errs := make([]error, n)
	seen := make([][]int, n)
	done := make(chan struct{})
	for r := range n {
		go func() {
			defer func() { done <- struct{}{} }()
			var reqs []Request
			for i := range 4 {
				g := a.groups[r]
				if i%2 == 1 {
					g = b.groups[r]
				}
				q, err := IAllReduce(ctx, g, []int64{int64(i)}, make([]int64, 1), Sum)
				if err != nil {
					errs[r] = err
					return
				}
				reqs = append(reqs, q)
			}
			for {
				i, err := WaitAny(ctx, reqs...)
				if err != nil {
					errs[r] = err
					return
				}
				if i < 0 {
					return
				}
				seen[r] = append(seen[r], i)
			}
		}()
	}
	for range n {
		<-done
	}
	for r := range n {
		require.NoError(t, errs[r], "rank %d", r)
		require.ElementsMatch(t, []int{0, 1, 2, 3}, seen[r], "rank %d: every request once", r)
		// Within a group, in issue order.
		require.Less(t, slices.Index(seen[r], 0), slices.Index(seen[r], 2), "rank %d", r)
		require.Less(t, slices.Index(seen[r], 1), slices.Index(seen[r], 3), "rank %d", r)
	}
}

// TestGatherNoAllocations: in steady state Gather, Scatter and
// ReduceScatterV allocate nothing on any rank, over messages (tree and
// linear) and through shared memory.
func TestGatherNoAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	const n, count = 4, 1000
	counts := []int{300, 0, 500, 200}
	for _, algo := range []Algorithm{Tree, Linear, Shared} {
		t.Run(algo.String(), func(t *testing.T) {
			w := newWorld(t, n, Options{Algorithm: algo, ChunkBytes: 4 << 10})
			ctx := testCtx(t)
			ins, outs := make([][]float32, n), make([][]float32, n)
			for r := range n {
				ins[r], outs[r] = make([]float32, n*count), make([]float32, n*count)
			}
			calls := func(r int, g *Group) error {
				in, out := ins[r], outs[r]
				if err := Gather(ctx, g, in[:count], pick(r == 2, out, nil), 2); err != nil {
					return err
				}
				if err := Scatter(ctx, g, pick(r == 1, in, nil), out[:count], 1); err != nil {
					return err
				}
				if err := GatherV(ctx, g, in[:counts[r]], pick(r == 0, out[:count], nil), counts, 0); err != nil {
					return err
				}
				return ReduceScatterV(ctx, g, in[:count], out[:counts[r]], counts, Sum)
			}
			step := w.lockstep(t, calls)
			step() // grows the scratch buffers
			require.Zero(t, testing.AllocsPerRun(10, step))
		})
	}
}
