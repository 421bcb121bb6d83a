package collectives

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// A suite is the checks of every collective, instantiated for one element
// type, so that the tables below can range over types.
type suite struct {
	name          string
	allReduce     func(t *testing.T, w *world, count int, op Op, inPlace bool)
	reduce        func(t *testing.T, w *world, count int, op Op, root int, inPlace bool)
	reduceScatter func(t *testing.T, w *world, count int, op Op, inPlace bool)
	allGather     func(t *testing.T, w *world, count int, inPlace bool)
	allGatherV    func(t *testing.T, w *world, base int, inPlace bool)
	allToAll      func(t *testing.T, w *world, count int, inPlace bool)
	allToAllV     func(t *testing.T, w *world, base int, inPlace bool)
	broadcast     func(t *testing.T, w *world, count, root int, inPlace bool)
	// gather and scatter take counts (the V forms) or nil (the plain
	// forms, with count elements per rank).
	gather         func(t *testing.T, w *world, count int, counts []int, root int, inPlace bool)
	scatter        func(t *testing.T, w *world, count int, counts []int, root int, inPlace bool)
	reduceScatterV func(t *testing.T, w *world, counts []int, op Op, inPlace bool)
}

func suiteFor[T Element](name string) suite {
	return suite{
		name: name, allReduce: checkAllReduce[T], reduce: checkReduce[T], reduceScatter: checkReduceScatter[T],
		allGather: checkAllGather[T], allGatherV: checkAllGatherV[T], allToAll: checkAllToAll[T],
		allToAllV: checkAllToAllV[T], broadcast: checkBroadcast[T],
		gather: checkGather[T], scatter: checkScatter[T], reduceScatterV: checkReduceScatterV[T],
	}
}

var suites = []suite{
	suiteFor[float32]("float32"), suiteFor[float64]("float64"), suiteFor[int32]("int32"),
	suiteFor[int64]("int64"), suiteFor[uint8]("uint8"), suiteFor[Float16]("float16"), suiteFor[BFloat16]("bfloat16"),
}

func suiteOf(name string) suite {
	for _, s := range suites {
		if s.name == name {
			return s
		}
	}
	panic(name)
}

func inputs[T Element](n, count int, op Op) [][]T {
	in := make([][]T, n)
	for r := range in {
		in[r] = genVec[T](r, count, op)
	}
	return in
}

func checkAllReduce[T Element](t *testing.T, w *world, count int, op Op, inPlace bool) {
	t.Helper()
	ctx := testCtx(t)
	in := inputs[T](w.n, count, op)
	want := reference(in, op)
	outs := make([][]T, w.n)
	sends := make([][]T, w.n)
	what := caseName("AllReduce count=", count, " op=", op, " inPlace=", inPlace)
	w.ok(t, what, func(r int, g *Group) error {
		sends[r] = slices.Clone(in[r])
		outs[r] = sends[r]
		if !inPlace {
			outs[r] = make([]T, count)
		}
		return AllReduce(ctx, g, sends[r], outs[r], op)
	})
	for r := range w.n {
		sameElems(t, want, outs[r], "%s: rank %d", what, r)
		if !inPlace {
			sameElems(t, in[r], sends[r], "%s: rank %d: send changed", what, r)
		}
	}
}

func checkReduce[T Element](t *testing.T, w *world, count int, op Op, root int, inPlace bool) {
	t.Helper()
	ctx := testCtx(t)
	in := inputs[T](w.n, count, op)
	want := reference(in, op)
	var out []T
	sends := make([][]T, w.n)
	what := caseName("Reduce count=", count, " op=", op, " root=", root, " inPlace=", inPlace)
	w.ok(t, what, func(r int, g *Group) error {
		sends[r] = slices.Clone(in[r])
		var recv []T
		if r == root {
			recv = sends[r]
			if !inPlace {
				recv = make([]T, count)
			}
			out = recv
		}
		return Reduce(ctx, g, sends[r], recv, op, root)
	})
	sameElems(t, want, out, what)
	for r := range w.n {
		if r != root || !inPlace {
			sameElems(t, in[r], sends[r], "%s: rank %d: send changed", what, r)
		}
	}
}

func checkReduceScatter[T Element](t *testing.T, w *world, count int, op Op, inPlace bool) {
	t.Helper()
	ctx := testCtx(t)
	in := inputs[T](w.n, w.n*count, op)
	want := reference(in, op)
	outs := make([][]T, w.n)
	sends := make([][]T, w.n)
	what := caseName("ReduceScatter count=", count, " op=", op, " inPlace=", inPlace)
	w.ok(t, what, func(r int, g *Group) error {
		sends[r] = slices.Clone(in[r])
		if inPlace {
			outs[r] = sends[r][r*count : (r+1)*count]
		} else {
			outs[r] = make([]T, count)
		}
		return ReduceScatter(ctx, g, sends[r], outs[r], op)
	})
	for r := range w.n {
		sameElems(t, want[r*count:(r+1)*count], outs[r], "%s: rank %d", what, r)
		if !inPlace {
			sameElems(t, in[r], sends[r], "%s: rank %d: send changed", what, r)
		}
	}
}

func checkAllGather[T Element](t *testing.T, w *world, count int, inPlace bool) {
	t.Helper()
	ctx := testCtx(t)
	in := inputs[T](w.n, count, Sum)
	want := slices.Concat(in...)
	outs := make([][]T, w.n)
	what := caseName("AllGather count=", count, " inPlace=", inPlace)
	w.ok(t, what, func(r int, g *Group) error {
		outs[r] = make([]T, w.n*count)
		send := slices.Clone(in[r])
		if inPlace {
			send = outs[r][r*count : (r+1)*count]
			copy(send, in[r])
		}
		return AllGather(ctx, g, send, outs[r])
	})
	for r := range w.n {
		sameElems(t, want, outs[r], "%s: rank %d", what, r)
	}
}

// vCounts are per-rank counts for the V collectives, zeros included.
func vCounts(n, base int) []int {
	c := make([]int, n)
	for i := range c {
		c[i] = (base + 3*i) % 7
	}
	return c
}

func checkAllGatherV[T Element](t *testing.T, w *world, base int, inPlace bool) {
	t.Helper()
	ctx := testCtx(t)
	counts := vCounts(w.n, base)
	in := make([][]T, w.n)
	for r := range in {
		in[r] = genVec[T](r, counts[r], Sum)
	}
	want := slices.Concat(in...)
	outs := make([][]T, w.n)
	what := caseName("AllGatherV counts=", counts, " inPlace=", inPlace)
	w.ok(t, what, func(r int, g *Group) error {
		outs[r] = make([]T, len(want))
		send := slices.Clone(in[r])
		if inPlace {
			at := 0
			for _, c := range counts[:r] {
				at += c
			}
			send = outs[r][at : at+counts[r]]
			copy(send, in[r])
		}
		return AllGatherV(ctx, g, send, outs[r], counts)
	})
	for r := range w.n {
		sameElems(t, want, outs[r], "%s: rank %d", what, r)
	}
}

func checkAllToAll[T Element](t *testing.T, w *world, count int, inPlace bool) {
	t.Helper()
	ctx := testCtx(t)
	n := w.n
	in := inputs[T](n, n*count, Sum)
	outs := make([][]T, n)
	what := caseName("AllToAll count=", count, " inPlace=", inPlace)
	w.ok(t, what, func(r int, g *Group) error {
		send := slices.Clone(in[r])
		outs[r] = send
		if !inPlace {
			outs[r] = make([]T, n*count)
		}
		return AllToAll(ctx, g, send, outs[r])
	})
	for r := range n {
		for from := range n {
			sameElems(t, in[from][r*count:(r+1)*count], outs[r][from*count:(from+1)*count], "%s: rank %d, block from %d", what, r, from)
		}
	}
}

func checkAllToAllV[T Element](t *testing.T, w *world, base int, inPlace bool) {
	t.Helper()
	ctx := testCtx(t)
	n := w.n
	// Rank i sends (base+i+2j)%5 elements to rank j.
	cnt := func(i, j int) int { return (base + i + 2*j) % 5 }
	in := make([][]T, n)
	for i := range n {
		total := 0
		for j := range n {
			total += cnt(i, j)
		}
		in[i] = genVec[T](i, total, Sum)
	}
	outs := make([][]T, n)
	what := caseName("AllToAllV base=", base, " inPlace=", inPlace)
	w.ok(t, what, func(r int, g *Group) error {
		sc, rc := make([]int, n), make([]int, n)
		total := 0
		for j := range n {
			sc[j], rc[j] = cnt(r, j), cnt(j, r)
			total += rc[j]
		}
		send := slices.Clone(in[r])
		outs[r] = send
		if !inPlace || len(send) != total { // the in-place form needs equal totals
			outs[r] = make([]T, total)
		}
		return AllToAllV(ctx, g, send, sc, outs[r], rc)
	})
	for r := range n {
		at := 0
		for from := range n {
			sendAt := 0
			for j := range r {
				sendAt += cnt(from, j)
			}
			c := cnt(from, r)
			sameElems(t, in[from][sendAt:sendAt+c], outs[r][at:at+c], "%s: rank %d, block from %d", what, r, from)
			at += c
		}
	}
}

func checkBroadcast[T Element](t *testing.T, w *world, count, root int, inPlace bool) {
	t.Helper()
	ctx := testCtx(t)
	want := genVec[T](root, count, Sum)
	outs := make([][]T, w.n)
	what := caseName("Broadcast count=", count, " root=", root, " inPlace=", inPlace)
	w.ok(t, what, func(r int, g *Group) error {
		outs[r] = make([]T, count)
		var send []T
		if r == root {
			send = slices.Clone(want)
			if inPlace {
				outs[r] = send
			}
		}
		return Broadcast(ctx, g, send, outs[r], root)
	})
	for r := range w.n {
		sameElems(t, want, outs[r], "%s: rank %d", what, r)
	}
}

// sameElems compares element for element; nil and empty are the same.
func sameElems[T Element](t *testing.T, want, got []T, msgAndArgs ...any) {
	t.Helper()
	if len(want) == 0 && len(got) == 0 {
		return
	}
	require.Equal(t, want, got, msgAndArgs...)
}
