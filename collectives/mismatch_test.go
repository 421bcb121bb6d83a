package collectives

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/rdmacell/rdmacell/comm"
	"github.com/stretchr/testify/require"
)

// call is what one rank does in a mismatch scenario.
type call func(ctx context.Context, g *Group) error

func allReduceF32(count int, op Op) call {
	return func(ctx context.Context, g *Group) error {
		buf := make([]float32, count)
		return AllReduce(ctx, g, buf, buf, op)
	}
}

func allReduceI32(count int) call {
	return func(ctx context.Context, g *Group) error {
		buf := make([]int32, count)
		return AllReduce(ctx, g, buf, buf, Sum)
	}
}

func broadcastF32(count, root int) call {
	return func(ctx context.Context, g *Group) error {
		buf := make([]float32, count)
		return Broadcast(ctx, g, buf, buf, root)
	}
}

func reduceF32(count, root int) call {
	return func(ctx context.Context, g *Group) error {
		buf := make([]float32, count)
		return Reduce(ctx, g, buf, buf, Sum, root)
	}
}

func barrier(ctx context.Context, g *Group) error { return Barrier(ctx, g) }

func gatherF32(count, root int) call {
	return func(ctx context.Context, g *Group) error {
		return Gather(ctx, g, make([]float32, count), make([]float32, g.Size()*count), root)
	}
}

func scatterF32(count, root int) call {
	return func(ctx context.Context, g *Group) error {
		return Scatter(ctx, g, make([]float32, g.Size()*count), make([]float32, count), root)
	}
}

// vCall is a V collective with counts[Rank()] elements of its own.
func vCall(k kind, counts []int) call {
	return func(ctx context.Context, g *Group) error {
		total := sumInts(counts)
		own := make([]float32, counts[g.Rank()])
		switch k {
		case kGatherV:
			return GatherV(ctx, g, own, make([]float32, total), counts, 0)
		case kScatterV:
			return ScatterV(ctx, g, make([]float32, total), own, counts, 0)
		}
		return ReduceScatterV(ctx, g, make([]float32, total), own, counts, Sum)
	}
}

// TestMismatch has ranks disagree about an operation in each way the
// fingerprint covers. Every rank must fail with a *MismatchError that
// names the same odd ranks, before its context ends, and the group must
// still work afterwards.
func TestMismatch(t *testing.T) {
	const n = 4
	cases := []struct {
		name  string
		calls func(r int) call
		opts  func(r int) Options
		odd   []int
		says  string
	}{
		{
			name:  "different collectives",
			calls: func(r int) call { return pick(r == 2, broadcastF32(10, 0), allReduceF32(10, Sum)) },
			odd:   []int{2}, says: "rank 2 called Broadcast(float32 ×10, root 0",
		},
		{
			name:  "large reduce against large allreduce",
			calls: func(r int) call { return pick(r == 0, reduceF32(1<<20, 0), allReduceF32(1<<20, Sum)) },
			odd:   []int{0}, says: "rank 0 called Reduce(",
		},
		{
			name:  "count",
			calls: func(r int) call { return pick(r == 1, allReduceF32(9, Sum), allReduceF32(10, Sum)) },
			odd:   []int{1}, says: "rank 1 called AllReduce(float32 ×9",
		},
		{
			name:  "root",
			calls: func(r int) call { return pick(r == 3, broadcastF32(10, 1), broadcastF32(10, 0)) },
			odd:   []int{3}, says: "root 1",
		},
		{
			name:  "op",
			calls: func(r int) call { return pick(r == 0, allReduceF32(10, Max), allReduceF32(10, Sum)) },
			odd:   []int{0}, says: "max",
		},
		{
			name:  "element type",
			calls: func(r int) call { return pick(r == 2, allReduceI32(10), allReduceF32(10, Sum)) },
			odd:   []int{2}, says: "int32",
		},
		{
			name:  "barrier against data",
			calls: func(r int) call { return pick(r == 1, barrier, allReduceF32(3, Sum)) },
			odd:   []int{1}, says: "Barrier(",
		},
		{
			name:  "two against two",
			calls: func(r int) call { return pick(r >= 2, allReduceF32(10, Max), allReduceF32(10, Sum)) },
			odd:   []int{2, 3}, says: "ranks 2, 3 called",
		},
		{
			name:  "gather root",
			calls: func(r int) call { return pick(r == 1, gatherF32(4, 2), gatherF32(4, 0)) },
			odd:   []int{1}, says: "rank 1 called Gather(float32 ×4, root 2",
		},
		{
			name:  "scatter count",
			calls: func(r int) call { return pick(r == 3, scatterF32(5, 1), scatterF32(4, 1)) },
			odd:   []int{3}, says: "rank 3 called Scatter(float32 ×5, root 1",
		},
		{
			name:  "gather against scatter",
			calls: func(r int) call { return pick(r == 0, scatterF32(4, 0), gatherF32(4, 0)) },
			odd:   []int{0}, says: "rank 0 called Scatter(",
		},
		{
			// The totals agree; only the hash of the counts tells.
			name: "gatherv counts",
			calls: func(r int) call {
				return pick(r == 2, vCall(kGatherV, []int{1, 2, 3, 4}), vCall(kGatherV, []int{2, 1, 3, 4}))
			},
			odd: []int{2}, says: "rank 2 called GatherV(float32 ×10 in all, counts",
		},
		{
			name: "scatterv counts",
			calls: func(r int) call {
				return pick(r == 1, vCall(kScatterV, []int{0, 4, 3, 3}), vCall(kScatterV, []int{4, 0, 3, 3}))
			},
			odd: []int{1}, says: "rank 1 called ScatterV(",
		},
		{
			name: "reducescatterv counts",
			calls: func(r int) call {
				return pick(r >= 2, vCall(kReduceScatterV, []int{2, 2, 3, 3}), vCall(kReduceScatterV, []int{2, 2, 2, 4}))
			},
			odd: []int{2, 3}, says: "ranks 2, 3 called ReduceScatterV(float32 ×10 in all, counts",
		},
		{
			name:  "forced algorithm",
			calls: func(int) call { return broadcastF32(10, 0) },
			opts:  func(r int) Options { return pick(r == 1, Options{Algorithm: Chain}, Options{}) },
			odd:   []int{1}, says: "rank 1 called Broadcast(float32 ×10, root 0, chain",
		},
		{
			name:  "chunk size of a pipeline",
			calls: func(int) call { return broadcastF32(10, 0) },
			opts: func(r int) Options {
				return pick(r == 3, Options{Algorithm: Chain, ChunkBytes: 1024}, Options{Algorithm: Chain})
			},
			odd: []int{3}, says: "chunk 1024",
		},
	}
	for _, c := range cases {
		for _, host := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/host=%v", c.name, host), func(t *testing.T) {
				t.Parallel()
				opts := c.opts
				if opts == nil {
					opts = func(int) Options { return Options{} }
				}
				w := newWorldOn(t, n, host, opts)
				ctx := testCtx(t)
				errs := w.run(func(r int, g *Group) error { return c.calls(r)(ctx, g) })
				for r, err := range errs {
					require.ErrorIs(t, err, ErrMismatch, "rank %d", r)
					require.NotErrorIs(t, err, context.DeadlineExceeded, "rank %d", r)
					var me *MismatchError
					require.ErrorAs(t, err, &me, "rank %d", r)
					require.Equal(t, r, me.Rank)
					require.Equal(t, c.odd, me.Odd, "rank %d: %v", r, err)
					require.Contains(t, err.Error(), c.says, "rank %d", r)
				}
				// Nothing was left in the streams: the group goes on.
				require.Zero(t, w.mem.Pending())
				f32 := suiteOf("float32")
				f32.allReduce(t, w, 5, Sum, false)
			})
		}
	}
}

// TestMismatchEverySize has the last rank call another count, over
// world sizes that are powers of two (the exchange pairs ranks) and ones
// that are not (Bruck's pattern): every rank names it, and the group
// goes on.
func TestMismatchEverySize(t *testing.T) {
	for _, n := range []int{2, 3, 5, 6, 8} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, n, Options{})
			ctx := testCtx(t)
			errs := w.run(func(r int, g *Group) error { return allReduceF32(pick(r == n-1, 7, 6), Sum)(ctx, g) })
			for r, err := range errs {
				var me *MismatchError
				require.ErrorAs(t, err, &me, "rank %d", r)
				require.Equal(t, []int{n - 1}, me.Odd, "rank %d: %v", r, err)
			}
			require.Zero(t, w.mem.Pending())
			suiteOf("float32").allReduce(t, w, 5, Sum, false)
		})
	}
}

// TestVerifyPartnersAreTheData: with a power-of-two world, an 8-byte
// AllReduce (recursive doubling), a Barrier and their fingerprint
// exchanges talk to the same log2(n) peers, so a rank connects to no
// more; Bruck's exchange or the barrier's rank±2^k would add log2(n)-1
// others.
func TestVerifyPartnersAreTheData(t *testing.T) {
	const n = 16
	w := newWorldOn(t, n, false, func(int) Options { return Options{} })
	suiteOf("float64").allReduce(t, w, 1, Sum, false)
	for _, err := range w.run(func(_ int, g *Group) error { return Barrier(testCtx(t), g) }) {
		require.NoError(t, err)
	}
	for r := range n {
		want := []int{}
		for d := 1; d < n; d *= 2 {
			want = append(want, r^d)
		}
		slices.Sort(want)
		require.Equal(t, want, w.mem.Peers(r), "rank %d's peers", r)
	}
}

func pick[T any](cond bool, a, b T) T {
	if cond {
		return a
	}
	return b
}

// TestMismatchByTag turns the fingerprint exchange off: ranks that receive
// a message of another operation report a *MismatchError wrapping the
// transport's *comm.MismatchError, and every other rank fails when its
// context ends, instead of hanging. The broadcast's root only sends, so
// it may not notice: the weakness the fingerprint exchange removes.
func TestMismatchByTag(t *testing.T) {
	const n = 4
	w := newWorld(t, n, Options{SkipVerify: true})
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	errs := w.run(func(r int, g *Group) error {
		return pick(r == 2, broadcastF32(10, 2), allReduceF32(10, Sum))(ctx, g)
	})
	tagged := 0
	for r, err := range errs {
		if r == 2 && err == nil {
			continue
		}
		require.Error(t, err, "rank %d", r)
		var cm *comm.MismatchError
		if errors.As(err, &cm) {
			tagged++
			var me *MismatchError
			require.ErrorAs(t, err, &me)
			require.Equal(t, []int{cm.Peer}, me.Odd)
			require.Contains(t, err.Error(), "a message of Broadcast", "rank %d decodes the tags", r)
			continue
		}
		require.ErrorIs(t, err, context.DeadlineExceeded, "rank %d", r)
	}
	require.NotZero(t, tagged, "some rank must see the wrong tag")
	// The streams now hold stray messages: later operations fail fast.
	err := Barrier(context.Background(), w.groups[0])
	require.ErrorIs(t, err, ErrGroupFailed)
}

// TestMismatchSequence decodes records that differ only in the sequence
// number: a rank that skipped an operation.
func TestMismatchSequence(t *testing.T) {
	f := fingerprint{seq: 7, count: 10, chunk: 64, kind: kAllReduce, dt: dtFloat32, op: Sum, algo: Ring}
	late := f
	late.seq = 6
	e := disagreement(1, f, []fingerprint{f, f, late})
	require.Equal(t, []int{2}, e.Odd)
	require.Equal(t, "ranks 0, 1 called AllReduce(float32 ×10, sum, ring, chunk 64) #7; rank 2 called AllReduce(float32 ×10, sum, ring, chunk 64) #6", e.Detail)
}

// TestDeadlineBreaksGroup has one rank not call at all: the others fail
// when their contexts end, and their groups refuse later operations. On
// one host they wait on shared memory, not on messages, and name the rank
// they waited for.
func TestDeadlineBreaksGroup(t *testing.T) {
	for _, host := range []bool{false, true} {
		t.Run(fmt.Sprintf("host=%v", host), func(t *testing.T) {
			w := newWorldOn(t, 3, host, func(int) Options { return Options{} })
			bg := testCtx(t)
			w.ok(t, "Barrier", func(r int, g *Group) error { return Barrier(bg, g) })
			ctx, cancel := context.WithTimeout(bg, 200*time.Millisecond)
			defer cancel()
			errs := w.run(func(r int, g *Group) error {
				if r == 2 {
					return nil
				}
				return allReduceF32(4, Sum)(ctx, g)
			})
			for r := range 2 {
				require.ErrorIs(t, errs[r], context.DeadlineExceeded)
				var oe *OpError
				require.ErrorAs(t, errs[r], &oe)
				require.Equal(t, r, oe.Rank)
				require.Equal(t, "AllReduce", oe.Op)
				if host {
					require.Equal(t, Shared, oe.Algorithm)
					require.Equal(t, 2, oe.Peer, "rank %d names the rank it waited for", r)
				}
				require.ErrorIs(t, Barrier(bg, w.groups[r]), ErrGroupFailed)
			}
		})
	}
}

// TestAllToAllVCounts: counts are per rank by nature, so the fingerprint
// cannot compare them. Over messages the receiver of a message of the
// wrong length reports the sender; on one host every rank sees every
// rank's counts, all report the pair, and the group goes on.
func TestAllToAllVCounts(t *testing.T) {
	const n = 3
	for _, host := range []bool{false, true} {
		t.Run(fmt.Sprintf("host=%v", host), func(t *testing.T) {
			w := newWorldOn(t, n, host, func(int) Options { return Options{} })
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			errs := w.run(func(r int, g *Group) error {
				sc, rc := []int{1, 1, 1}, []int{1, 1, 1}
				if r == 1 {
					rc[0] = 2 // rank 0 sends it one element
				}
				return AllToAllV(ctx, g, make([]float32, 3), sc, make([]float32, sumInts(rc)), rc)
			})
			var me *MismatchError
			require.ErrorAs(t, errs[1], &me)
			require.Equal(t, []int{0}, me.Odd)
			if !host {
				require.Contains(t, me.Error(), "rank 0 sent 1 elements where this rank expected 2")
				return
			}
			for r, err := range errs {
				require.ErrorAs(t, err, &me, "rank %d", r)
				require.Equal(t, []int{0}, me.Odd)
				require.Contains(t, me.Error(), "rank 0 sends 1 elements to rank 1, which expects 2")
			}
			suiteOf("float32").allToAllV(t, w, 2, false)
		})
	}
}

func sumInts(v []int) int {
	s := 0
	for _, x := range v {
		s += x
	}
	return s
}
