package collectives

import (
	"fmt"
	"testing"
)

// smallChunk makes pipelines cut even the small test vectors into many
// chunks, so that the forced-algorithm runs exercise chunking.
const smallChunk = 64

var worldSizes = []int{1, 2, 3, 4, 5, 6, 7, 8}

func TestAllReduce(t *testing.T) {
	for _, algo := range []Algorithm{Auto, Ring, RecursiveDoubling, HalvingDoubling, Shared} {
		for _, n := range worldSizes {
			t.Run(fmt.Sprintf("%s/n=%d", algo, n), func(t *testing.T) {
				t.Parallel()
				w := newWorld(t, n, Options{Algorithm: algo, ChunkBytes: smallChunk})
				for _, s := range suites {
					t.Run(s.name, func(t *testing.T) {
						for _, count := range testCounts(n) {
							for _, op := range allOps {
								for _, inPlace := range []bool{false, true} {
									s.allReduce(t, w, count, op, inPlace)
								}
							}
						}
					})
				}
			})
		}
	}
}

// forEach runs fn in a parallel subtest per forced algorithm and world
// size, on a world whose pipelines use smallChunk.
func forEach(t *testing.T, algos []Algorithm, fn func(t *testing.T, w *world)) {
	for _, algo := range algos {
		for _, n := range worldSizes {
			t.Run(fmt.Sprintf("%s/n=%d", algo, n), func(t *testing.T) {
				t.Parallel()
				fn(t, newWorld(t, n, Options{Algorithm: algo, ChunkBytes: smallChunk}))
			})
		}
	}
}

func TestReduce(t *testing.T) {
	forEach(t, []Algorithm{Auto, Chain, Tree, Shared}, func(t *testing.T, w *world) {
		for _, s := range suites {
			t.Run(s.name, func(t *testing.T) {
				for _, count := range testCounts(w.n) {
					for _, op := range allOps {
						for _, root := range roots(w.n) {
							s.reduce(t, w, count, op, root, root%2 == 1)
						}
					}
				}
			})
		}
	})
}

func TestReduceScatter(t *testing.T) {
	forEach(t, []Algorithm{Auto, Ring, HalvingDoubling, Shared}, func(t *testing.T, w *world) {
		for _, s := range suites {
			t.Run(s.name, func(t *testing.T) {
				for _, count := range []int{0, 1, 7, 30} {
					for _, op := range allOps {
						for _, inPlace := range []bool{false, true} {
							s.reduceScatter(t, w, count, op, inPlace)
						}
					}
				}
			})
		}
	})
}

func TestAllGather(t *testing.T) {
	forEach(t, []Algorithm{Auto, Ring, RecursiveDoubling, Shared}, func(t *testing.T, w *world) {
		for _, s := range suites {
			t.Run(s.name, func(t *testing.T) {
				for _, count := range []int{0, 1, 7, 30} {
					for _, inPlace := range []bool{false, true} {
						s.allGather(t, w, count, inPlace)
					}
				}
				for base := range 3 {
					s.allGatherV(t, w, base, base == 1)
				}
			})
		}
	})
}

func TestAllToAll(t *testing.T) {
	forEach(t, []Algorithm{Pairwise, Shared}, func(t *testing.T, w *world) {
		for _, s := range suites {
			t.Run(s.name, func(t *testing.T) {
				for _, count := range []int{0, 1, 7, 30} {
					for _, inPlace := range []bool{false, true} {
						s.allToAll(t, w, count, inPlace)
					}
				}
				for base := range 5 {
					s.allToAllV(t, w, base, base%2 == 0)
				}
			})
		}
	})
}

func TestBroadcast(t *testing.T) {
	forEach(t, []Algorithm{Auto, Chain, Tree, Shared}, func(t *testing.T, w *world) {
		for _, s := range suites {
			t.Run(s.name, func(t *testing.T) {
				for _, count := range testCounts(w.n) {
					for _, root := range roots(w.n) {
						for _, inPlace := range []bool{false, true} {
							s.broadcast(t, w, count, root, inPlace)
						}
					}
				}
			})
		}
	})
}

func TestBarrier(t *testing.T) {
	forEach(t, []Algorithm{Dissemination, Shared}, func(t *testing.T, w *world) {
		ctx := testCtx(t)
		for range 5 {
			w.ok(t, "Barrier", func(r int, g *Group) error { return Barrier(ctx, g) })
		}
	})
}

// roots are the roots to test: the first, the last and one in between.
func roots(n int) []int {
	if n <= 2 {
		return []int{0, n - 1}[:n]
	}
	return []int{0, n / 2, n - 1}
}

// TestLarge runs each algorithm on 1<<16 elements, with the default chunk
// and with chunks small enough for a deep pipeline.
func TestLarge(t *testing.T) {
	const count = 1 << 16
	for _, n := range []int{3, 8} {
		for _, chunk := range []int{0, 16 << 10} {
			t.Run(fmt.Sprintf("n=%d/chunk=%d", n, chunk), func(t *testing.T) {
				t.Parallel()
				f32, bf16 := suiteOf("float32"), suiteOf("bfloat16")
				for _, algo := range []Algorithm{Ring, RecursiveDoubling, HalvingDoubling, Shared} {
					w := newWorld(t, n, Options{Algorithm: algo, ChunkBytes: chunk})
					f32.allReduce(t, w, count, Sum, false)
					bf16.allReduce(t, w, count, Avg, true)
				}
				for _, algo := range []Algorithm{Ring, HalvingDoubling, Shared} {
					w := newWorld(t, n, Options{Algorithm: algo, ChunkBytes: chunk})
					f32.reduceScatter(t, w, count/n, Max, false)
				}
				for _, algo := range []Algorithm{Ring, RecursiveDoubling, Shared} {
					w := newWorld(t, n, Options{Algorithm: algo, ChunkBytes: chunk})
					f32.allGather(t, w, count/n, true)
				}
				for _, algo := range []Algorithm{Chain, Tree, Shared} {
					w := newWorld(t, n, Options{Algorithm: algo, ChunkBytes: chunk})
					f32.broadcast(t, w, count, n-1, false)
					f32.reduce(t, w, count, Prod, 1, false)
				}
				for _, algo := range []Algorithm{Auto, Shared} {
					w := newWorld(t, n, Options{Algorithm: algo, ChunkBytes: chunk})
					f32.allToAll(t, w, count/n, true)
				}
			})
		}
	}
}

// TestLargeWorld runs every collective and algorithm on 32 ranks.
func TestLargeWorld(t *testing.T) {
	const n = 32
	f32, f16 := suiteOf("float32"), suiteOf("float16")
	for _, algo := range []Algorithm{Auto, Ring, RecursiveDoubling, HalvingDoubling, Chain, Tree, Linear, Shared} {
		t.Run(algo.String(), func(t *testing.T) {
			w := newWorld(t, n, Options{Algorithm: algo, ChunkBytes: smallChunk})
			for _, count := range []int{1, 29, 100} {
				f32.allReduce(t, w, count, Sum, false)
				f16.allReduce(t, w, count, Avg, true)
				f32.reduceScatter(t, w, count, Min, true)
				f32.allGather(t, w, count, false)
				f32.broadcast(t, w, count, 5, false)
				f16.reduce(t, w, count, Prod, 31, false)
			}
			f32.allGatherV(t, w, 2, false)
			f32.allToAll(t, w, 3, false)
			f32.allToAllV(t, w, 1, false)
			for _, root := range []int{0, 17, 31} {
				f32.gather(t, w, 3, nil, root, root == 17)
				f16.gather(t, w, 0, vCounts(n, 1), root, false)
				f32.scatter(t, w, 3, nil, root, root == 31)
				f16.scatter(t, w, 0, vCounts(n, 2), root, false)
			}
			f32.reduceScatterV(t, w, vCounts(n, 0), Sum, false)
			f16.reduceScatterV(t, w, vCounts(n, 3), Avg, true)
			ctx := testCtx(t)
			w.ok(t, "Barrier", func(r int, g *Group) error { return Barrier(ctx, g) })
		})
	}
}
