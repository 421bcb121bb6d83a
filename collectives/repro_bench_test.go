package collectives

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// BenchmarkReproducible compares a float32 Sum AllReduce in the default,
// reproducible and exact modes, over messages (the in-memory transport,
// Auto's choice of algorithm) and through shared memory, with 2 and 4
// ranks. The vectors hold what gradients look like: elements of many
// magnitudes (2^-15 to 2^15), each of a similar magnitude on every rank.
func BenchmarkReproducible(b *testing.B) {
	for _, path := range []string{"messages", "shm"} {
		for _, n := range []int{2, 4} {
			for _, size := range []int{1 << 20, 64 << 20} {
				for _, m := range []mode{modeDefault, modeReproducible, modeExact} {
					b.Run(fmt.Sprintf("%s/n=%d/%dMiB/%s", path, n, size>>20, m), func(b *testing.B) {
						opts := Options{Reproducible: m == modeReproducible, Exact: m == modeExact}
						w := newWorldOn(b, n, path == "shm", func(int) Options { return opts })
						sends := make([][]float32, n)
						for r := range sends {
							scale, val := rand.New(rand.NewPCG(1, 0)), rand.New(rand.NewPCG(2, uint64(r)))
							sends[r] = make([]float32, size/4)
							for i := range sends[r] {
								sends[r][i] = float32(math.Ldexp(val.NormFloat64(), scale.IntN(30)-15))
							}
						}
						// Out of place, so that every iteration sums the same data.
						benchRanks(b, w, int64(size), func(ctx context.Context, r int, g *Group, buf []float32) error {
							return AllReduce(ctx, g, sends[r], buf, Sum)
						}, size/4)
					})
				}
			}
		}
	}
}

// BenchmarkExactSum measures the exact sums alone, per element of 4
// ranks' contributions: on gradient-like data (the fast paths) and on
// values spread over 2^±100 at random (float64 through the accumulator).
func BenchmarkExactSum(b *testing.B) {
	const n, count = 4, 1 << 16
	for _, spread := range []int{30, 200} {
		scale := rand.New(rand.NewPCG(1, 0))
		exps := make([]int, count)
		for i := range exps {
			exps[i] = scale.IntN(30) - 15
		}
		s64, s32 := make([][]float64, n), make([][]float32, n)
		for r := range n {
			val := rand.New(rand.NewPCG(2, uint64(r)))
			s64[r], s32[r] = make([]float64, count), make([]float32, count)
			for i := range count {
				e := exps[i]
				if spread > 30 {
					e = val.IntN(spread) - spread/2
				}
				s64[r][i] = math.Ldexp(val.NormFloat64(), e)
				s32[r][i] = float32(s64[r][i])
			}
		}
		d64, d32 := make([]float64, count), make([]float32, count)
		b.Run(fmt.Sprintf("float32/spread=%d", spread), func(b *testing.B) {
			b.SetBytes(4 * count)
			for b.Loop() {
				exactSum32(d32, s32)
			}
		})
		b.Run(fmt.Sprintf("float64/spread=%d", spread), func(b *testing.B) {
			b.SetBytes(8 * count)
			for b.Loop() {
				exactSum64(d64, s64)
			}
		})
		b.Run(fmt.Sprintf("fold-float32/spread=%d", spread), func(b *testing.B) {
			b.SetBytes(4 * count)
			for b.Loop() {
				kern.sumF32(d32, s32[0], s32[1])
				for _, s := range s32[2:] {
					kern.sumF32(d32, d32, s)
				}
			}
		})
	}
}
