package collectives

import (
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmacell/rdmacell/collectives/internal/memp2p"
	"github.com/rdmacell/rdmacell/internal/syncbuf"
	"github.com/stretchr/testify/require"
)

// TestSharedOnlyOnOneHost: the ranks share memory when every one reaches
// every other over shm and they agree on the slot size; otherwise they
// keep to messages, and either way the collectives work.
func TestSharedOnlyOnOneHost(t *testing.T) {
	cases := []struct {
		name   string
		host   bool
		opts   func(r int) Options
		shared bool
	}{
		{"one host", true, func(int) Options { return Options{} }, true},
		{"not one host", false, func(int) Options { return Options{} }, false},
		{"slot sizes differ", true, func(r int) Options { return Options{ChunkBytes: 4096 << r} }, false},
		{"forced ring", true, func(int) Options { return Options{Algorithm: Ring} }, true},
		{"tiny chunks", true, func(int) Options { return Options{ChunkBytes: smallChunk} }, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := newWorldOn(t, 8, c.host, c.opts)
			suiteOf("float64").allReduce(t, w, 100, Sum, false)
			for r, g := range w.groups {
				require.Equal(t, c.shared, g.shm != nil, "rank %d", r)
			}
		})
	}
}

// TestNoShareVoteAcrossHosts: a group whose ranks span hosts knows it
// without asking: its first operation sends no more messages than the
// next one does.
func TestNoShareVoteAcrossHosts(t *testing.T) {
	w := newWorldOn(t, 4, false, func(int) Options { return Options{SkipVerify: true} })
	sent := w.mem.Sent()
	suiteOf("float64").allReduce(t, w, 100, Sum, false)
	first := w.mem.Sent() - sent
	sent = w.mem.Sent()
	suiteOf("float64").allReduce(t, w, 100, Sum, false)
	require.Equal(t, w.mem.Sent()-sent, first, "messages of the first AllReduce and of the second")
}

// TestSharedPeerGone: a rank that closes its group (or whose process
// exits) releases its lock on the segment, and a rank waiting for it
// fails naming it, long before its own deadline.
func TestSharedPeerGone(t *testing.T) {
	w := newWorld(t, 2, Options{Algorithm: Shared})
	ctx := testCtx(t)
	w.ok(t, "Barrier", func(r int, g *Group) error { return Barrier(ctx, g) })
	require.NoError(t, w.groups[1].Close())
	err := AllReduce(ctx, w.groups[0], make([]int32, 8), make([]int32, 8), Sum)
	require.ErrorIs(t, err, errGone)
	require.NoError(t, ctx.Err(), "the peer was found gone, not timed out")
	var oe *OpError
	require.ErrorAs(t, err, &oe)
	require.Equal(t, 1, oe.Peer)
	require.Contains(t, err.Error(), "rank 1")
}

// TestSharedPeerArrivedThenLeft: a rank that arrived at a barrier may go
// on, finish and close its group before a waiter, descheduled after it
// last looked, checks whether it is alive. That is not a departure.
func TestSharedPeerArrivedThenLeft(t *testing.T) {
	w := newWorld(t, 2, Options{Algorithm: Shared})
	ctx := testCtx(t)
	w.ok(t, "Barrier", func(r int, g *Group) error { return Barrier(ctx, g) })
	a, b := w.groups[0].shm, w.groups[1].shm
	a.arrive()
	require.Equal(t, 1, a.laggard(0), "rank 1 has not arrived yet")
	b.arrive()
	require.NoError(t, w.groups[1].Close())
	require.NoError(t, a.blocked(1), "rank 1 arrived before it left")
	r, err := a.await(ctx)
	require.NoError(t, err)
	require.Equal(t, -1, r)
}

// failing is an endpoint whose communicator can be made to fail.
type failing struct {
	*memp2p.Endpoint
	err atomic.Pointer[error]
}

func (f *failing) Err() error {
	if p := f.err.Load(); p != nil {
		return *p
	}
	return nil
}

// TestSharedCommFailure: a waiter on shared memory learns of the
// communicator's failure (an abort, a dead rank) from its Err.
func TestSharedCommFailure(t *testing.T) {
	mem := memp2p.New(2).Host()
	eps := []*failing{{Endpoint: mem.Endpoint(0)}, {Endpoint: mem.Endpoint(1)}}
	var gs []*Group
	for _, ep := range eps {
		g, err := New(ep, Options{})
		require.NoError(t, err)
		defer g.Close()
		gs = append(gs, g)
	}
	ctx := testCtx(t)
	errs := make(chan error, 2)
	for _, g := range gs {
		go func() { errs <- Barrier(ctx, g) }()
	}
	require.NoError(t, <-errs)
	require.NoError(t, <-errs)

	aborted := errors.New("rank 1 aborted the job")
	go func() { errs <- Barrier(ctx, gs[0]) }()
	time.Sleep(10 * time.Millisecond) // let it wait; the test holds either way
	eps[0].err.Store(&aborted)
	err := <-errs
	require.ErrorIs(t, err, aborted)
	require.NoError(t, ctx.Err())
}

// TestSharedBackToBack has every rank run a mix of operations without
// anything between them, so that a rank is often a phase ahead of
// another: a slot written while still being read would show up as a
// wrong value.
func TestSharedBackToBack(t *testing.T) {
	const rounds = 30
	for _, n := range []int{2, 3, 5} {
		w := newWorld(t, n, Options{Algorithm: Shared, ChunkBytes: 256})
		ctx := testCtx(t)
		small, large := 5, 1000 // the direct AllReduce, and the pipeline
		type result struct{ small, large, bcast, gather [][]int64 }
		res := make([]result, n)
		for r := range res {
			for range rounds {
				res[r].small = append(res[r].small, make([]int64, small))
				res[r].large = append(res[r].large, make([]int64, large))
				res[r].bcast = append(res[r].bcast, make([]int64, large))
				res[r].gather = append(res[r].gather, make([]int64, n*small))
			}
		}
		val := func(r, i, k int) int64 { return int64(r*1_000_000 + i*1000 + k) }
		fill := func(b []int64, r, i int) []int64 {
			for k := range b {
				b[k] = val(r, i, k)
			}
			return b
		}
		errs := w.run(func(r int, g *Group) error {
			for i := range rounds {
				rr := &res[r]
				steps := []error{
					AllReduce(ctx, g, fill(make([]int64, small), r, i), rr.small[i], Sum),
					AllReduce(ctx, g, fill(make([]int64, large), r, i), rr.large[i], Sum),
					Broadcast(ctx, g, fill(make([]int64, large), r, i), rr.bcast[i], i%n),
					AllGather(ctx, g, fill(make([]int64, small), r, i), rr.gather[i]),
				}
				if err := errors.Join(steps...); err != nil {
					return err
				}
			}
			return nil
		})
		for r, err := range errs {
			require.NoError(t, err, "rank %d", r)
		}
		for r := range n {
			for i := range rounds {
				for k := range large {
					var sum int64
					for q := range n {
						sum += val(q, i, k)
					}
					if k < small {
						require.Equal(t, sum, res[r].small[i][k], "rank %d round %d small[%d]", r, i, k)
					}
					require.Equal(t, sum, res[r].large[i][k], "rank %d round %d large[%d]", r, i, k)
					require.Equal(t, val(i%n, i, k), res[r].bcast[i][k], "rank %d round %d bcast[%d]", r, i, k)
				}
				for q := range n {
					for k := range small {
						require.Equal(t, val(q, i, k), res[r].gather[i][q*small+k], "rank %d round %d gather", r, i)
					}
				}
			}
		}
	}
}

// TestSharedAlwaysVerifies: the fingerprints are in the segment anyway,
// so a Shared operation catches a disagreement even with the exchange
// turned off.
func TestSharedAlwaysVerifies(t *testing.T) {
	w := newWorld(t, 3, Options{Algorithm: Shared, SkipVerify: true})
	ctx := testCtx(t)
	errs := w.run(func(r int, g *Group) error { return pick(r == 1, allReduceF32(9, Sum), allReduceF32(10, Sum))(ctx, g) })
	for r, err := range errs {
		var me *MismatchError
		require.ErrorAs(t, err, &me, "rank %d", r)
		require.Equal(t, []int{1}, me.Odd)
	}
	suiteOf("float32").allReduce(t, w, 5, Sum, false)
}

// TestSharedLarge checks every collective on vectors and blocks of many
// chunks, with ragged ends.
func TestSharedLarge(t *testing.T) {
	for _, n := range []int{2, 3, 5} {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, n, Options{Algorithm: Shared, ChunkBytes: 64 << 10})
			vec, blk := 1<<17+5, 1<<16+3
			f32, f64 := suiteOf("float32"), suiteOf("float64")
			for _, inPlace := range []bool{false, true} {
				f32.allReduce(t, w, vec, Sum, inPlace)
				f64.allReduce(t, w, vec, Avg, inPlace)
				f32.reduceScatter(t, w, blk, Max, inPlace)
				f32.allGather(t, w, blk, inPlace)
				f32.allToAll(t, w, blk, inPlace)
				f32.broadcast(t, w, vec, n-1, inPlace)
				f64.reduce(t, w, vec, Prod, n/2, inPlace)
			}
			f32.allGatherV(t, w, blk, false)
			for _, inPlace := range []bool{false, true} {
				checkLargeAllToAllV(t, w, blk/n, inPlace)
			}
		})
	}
}

// checkLargeAllToAllV: rank i sends rank j unit×(1+(i+2j)%3) int64s,
// each naming its sender, receiver and index.
func checkLargeAllToAllV(t *testing.T, w *world, unit int, inPlace bool) {
	t.Helper()
	ctx := testCtx(t)
	n := w.n
	cnt := func(i, j int) int { return unit * (1 + (i+2*j)%3) }
	val := func(i, j, k int) int64 { return int64(i)<<40 | int64(j)<<32 | int64(k) }
	outs := make([][]int64, n)
	w.ok(t, "AllToAllV", func(r int, g *Group) error {
		sc, rc := make([]int, n), make([]int, n)
		stotal, rtotal := 0, 0
		for j := range n {
			sc[j], rc[j] = cnt(r, j), cnt(j, r)
			stotal += sc[j]
			rtotal += rc[j]
		}
		send, recv := make([]int64, stotal), make([]int64, rtotal)
		if inPlace {
			buf := make([]int64, max(stotal, rtotal))
			send, recv = buf[:stotal], buf[:rtotal]
		}
		off := 0
		for j := range n {
			for k := range sc[j] {
				send[off+k] = val(r, j, k)
			}
			off += sc[j]
		}
		outs[r] = recv
		return AllToAllV(ctx, g, send, sc, recv, rc)
	})
	for r := range n {
		off := 0
		for i := range n {
			for k := range cnt(i, r) {
				require.Equal(t, val(i, r, k), outs[r][off+k], "rank %d from %d [%d]", r, i, k)
			}
			off += cnt(i, r)
		}
	}
}

// logged is an endpoint with a logger.
type logged struct {
	*memp2p.Endpoint
	log *slog.Logger
}

func (l logged) Logger() *slog.Logger { return l.log }

// TestSharedWarnsWhenNotSharing: ranks that share a host but end up not
// sharing memory (here: their chunk sizes differ) say so, since their
// collectives are then far slower than the user would expect.
func TestSharedWarnsWhenNotSharing(t *testing.T) {
	const n = 3
	mem := memp2p.New(n).Host()
	var out syncbuf.Buffer
	log := slog.New(slog.NewTextHandler(&out, nil))
	gs := make([]*Group, n)
	for r := range n {
		g, err := New(logged{mem.Endpoint(r), log.With("rank", r)}, Options{ChunkBytes: 4096 << r})
		require.NoError(t, err)
		defer g.Close()
		gs[r] = g
	}
	ctx := testCtx(t)
	errs := make(chan error, n)
	for _, g := range gs {
		go func() { errs <- Barrier(ctx, g) }()
	}
	for range n {
		require.NoError(t, <-errs)
	}
	for r, g := range gs {
		require.Nil(t, g.shm, "rank %d", r)
	}
	require.Contains(t, out.String(), "rank=1 why=\"Options.ChunkBytes gives 8192-byte slots here, 4096 at rank 0\"")
	require.Contains(t, out.String(), "rank=2 why=\"Options.ChunkBytes gives 16384-byte slots here, 4096 at rank 0\"")
}
