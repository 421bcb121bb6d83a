package collectives

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkReproducible compares a float32 Sum AllReduce in the default,
// reproducible and exact modes, over messages (the in-memory transport,
// Auto's choice of algorithm) and through shared memory, with 2 and 4
// ranks. The vectors hold random values of many magnitudes, so that the
// exact sums meet the data they would in training.
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
							rng := rand.New(rand.NewPCG(1, uint64(r)))
							sends[r] = make([]float32, size/4)
							for i := range sends[r] {
								sends[r][i] = float32(messy(rng, Sum))
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
