package collectives

import (
	"context"
	"fmt"
	"sync"
	"testing"
)

// BenchmarkAllReduce measures AllReduce of float32 sums over the
// in-memory transport with 4 ranks (each a goroutine: on a machine with
// fewer cores the ranks share them, and the transport's copies dominate).
// Bytes per op are those of one rank's vector (algorithm bandwidth).
func BenchmarkAllReduce(b *testing.B) {
	const n = 4
	for _, size := range []int{4 << 10, 256 << 10, 16 << 20} {
		for _, algo := range []Algorithm{Auto, Ring, RecursiveDoubling, HalvingDoubling} {
			b.Run(fmt.Sprintf("%dKiB/%s", size>>10, algo), func(b *testing.B) {
				w := newWorld(b, n, Options{Algorithm: algo})
				benchRanks(b, w, int64(size), func(ctx context.Context, r int, g *Group, buf []float32) error {
					return AllReduce(ctx, g, buf, buf, Sum)
				}, size/4)
			})
		}
	}
}

// BenchmarkBroadcast compares the tree and the chain.
func BenchmarkBroadcast(b *testing.B) {
	const n = 4
	for _, size := range []int{4 << 10, 16 << 20} {
		for _, algo := range []Algorithm{Tree, Chain} {
			b.Run(fmt.Sprintf("%dKiB/%s", size>>10, algo), func(b *testing.B) {
				w := newWorld(b, n, Options{Algorithm: algo})
				benchRanks(b, w, int64(size), func(ctx context.Context, r int, g *Group, buf []float32) error {
					return Broadcast(ctx, g, buf, buf, 0)
				}, size/4)
			})
		}
	}
}

// BenchmarkBarrier measures the latency of an operation with no data:
// the fingerprint exchange and the dissemination rounds.
func BenchmarkBarrier(b *testing.B) {
	for _, skip := range []bool{false, true} {
		b.Run(fmt.Sprintf("verify=%v", !skip), func(b *testing.B) {
			w := newWorld(b, 8, Options{SkipVerify: skip})
			benchRanks(b, w, 0, func(ctx context.Context, r int, g *Group, _ []float32) error {
				return Barrier(ctx, g)
			}, 0)
		})
	}
}

// benchRanks runs fn b.N times on every rank, each rank in its own
// goroutine for the whole benchmark.
func benchRanks(b *testing.B, w *world, bytes int64, fn func(ctx context.Context, r int, g *Group, buf []float32) error, count int) {
	ctx := context.Background()
	b.SetBytes(bytes)
	b.ReportAllocs()
	var wg sync.WaitGroup
	errs := make([]error, w.n)
	bufs := make([][]float32, w.n)
	for r := range bufs {
		bufs[r] = make([]float32, count)
	}
	// One operation first, outside the timing: it sets the group up
	// (shared memory, scratch buffers) and touches the buffers' pages.
	for r := range w.n {
		wg.Go(func() { errs[r] = fn(ctx, r, w.groups[r], bufs[r]) })
	}
	wg.Wait()
	iters := b.N
	b.ResetTimer()
	for r := range w.n {
		wg.Go(func() {
			if errs[r] != nil {
				return
			}
			for range iters {
				if err := fn(ctx, r, w.groups[r], bufs[r]); err != nil {
					errs[r] = err
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	for r, err := range errs {
		if err != nil {
			b.Fatalf("rank %d: %v", r, err)
		}
	}
}

// BenchmarkShared measures the Shared algorithm with two ranks, each a
// goroutine (on two processors, each has one): the latency of an 8-byte
// AllReduce and the bandwidth of large ones.
func BenchmarkShared(b *testing.B) {
	for _, size := range []int{8, 1 << 20, 64 << 20} {
		b.Run(fmt.Sprintf("AllReduce/%dB", size), func(b *testing.B) {
			w := newWorld(b, 2, Options{Algorithm: Shared})
			benchRanks(b, w, int64(size), func(ctx context.Context, r int, g *Group, buf []float32) error {
				return AllReduce(ctx, g, buf, buf, Sum)
			}, size/4)
		})
	}
}

// BenchmarkRecording is the flight recorder's cost on an 8-byte AllReduce
// of two ranks through shared memory, the cheapest there is: with the
// recorder and without (the groups' recorders taken away), interleaved.
func BenchmarkRecording(b *testing.B) {
	for _, rec := range []bool{true, false, true, false} {
		b.Run(fmt.Sprintf("recorded=%v", rec), func(b *testing.B) {
			w := newWorld(b, 2, Options{Algorithm: Shared})
			if !rec {
				for _, g := range w.groups {
					g.rec = nil
				}
			}
			benchRanks(b, w, 8, func(ctx context.Context, r int, g *Group, buf []float32) error {
				return AllReduce(ctx, g, buf, buf, Sum)
			}, 2)
		})
	}
}
