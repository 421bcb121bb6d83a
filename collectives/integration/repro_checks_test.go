package integration

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"

	"github.com/rdmacell/rdmacell/collectives"
	"github.com/rdmacell/rdmacell/comm"
)

// checkReproducible: in reproducible mode every algorithm, over this
// job's transport (shared memory, or tcp), returns the serial fold in
// rank order of the same inputs, bit for bit, so all of them and every
// transport agree; in exact mode a float64 sum is math/big's correctly
// rounded one. The inputs are random values of many magnitudes, which
// the default algorithms do not agree on.
func checkReproducible(k *checker, p comm.P2P) error {
	const count = 1<<16 + 3 // uneven blocks, several chunks of 64 KiB
	in := make([][]float32, k.size)
	for r := range in {
		rng := rand.New(rand.NewPCG(uint64(r), 24))
		in[r] = make([]float32, count)
		for i := range in[r] {
			in[r][i] = float32(math.Ldexp(rng.NormFloat64(), rng.IntN(40)-20))
		}
	}
	want := make([]float32, count)
	for i := range want {
		acc := in[0][i]
		for _, v := range in[1:] {
			acc += v[i]
		}
		want[i] = acc
	}
	for _, algo := range []collectives.Algorithm{collectives.Auto, collectives.Ring, collectives.RecursiveDoubling, collectives.HalvingDoubling} {
		opts := collectives.Options{Algorithm: algo, ChunkBytes: 64 << 10, Reproducible: true}
		err := withGroup(k, p, opts, func(g *collectives.Group) error {
			got := make([]float32, count)
			if err := collectives.AllReduce(k.ctx, g, in[k.rank], got, collectives.Sum); err != nil {
				return err
			}
			k.checks++
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					return fmt.Errorf("element %d is %v, want %v (the fold in rank order)", i, got[i], want[i])
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("reproducible AllReduce, algorithm %s: %w", algo, err)
		}
	}
	return checkExact(k, p)
}

// checkExact: 1e8, 1 and -1e8 spread over the ranks, and values of random
// magnitude, sum to math/big's correctly rounded result.
func checkExact(k *checker, p comm.P2P) error {
	const count = 4099
	in := make([][]float64, k.size)
	for r := range in {
		rng := rand.New(rand.NewPCG(uint64(r), 25))
		in[r] = make([]float64, count)
		for i := range in[r] {
			switch (i + r) % 3 {
			case 0:
				in[r][i] = 1e8
			case 1:
				in[r][i] = -1e8
			default:
				in[r][i] = math.Ldexp(rng.NormFloat64(), rng.IntN(120)-60)
			}
		}
	}
	return withGroup(k, p, collectives.Options{Exact: true, ChunkBytes: 8 << 10}, func(g *collectives.Group) error {
		got := make([]float64, count)
		if err := collectives.AllReduce(k.ctx, g, in[k.rank], got, collectives.Sum); err != nil {
			return fmt.Errorf("exact AllReduce: %w", err)
		}
		k.checks++
		for i := range got {
			s := new(big.Float).SetPrec(2048)
			for _, v := range in {
				s.Add(s, big.NewFloat(v[i]))
			}
			want, _ := s.Float64()
			if math.Float64bits(got[i]) != math.Float64bits(want) {
				return fmt.Errorf("exact AllReduce: element %d is %v, want %v", i, got[i], want)
			}
		}
		return nil
	})
}

// withGroup runs fn on a group of its own over p, closed afterwards. The
// job's main group is idle meanwhile, so their messages cannot cross.
func withGroup(k *checker, p comm.P2P, opts collectives.Options, fn func(*collectives.Group) error) error {
	g, err := collectives.New(p, opts)
	if err != nil {
		return err
	}
	err = fn(g)
	if cerr := g.Close(); err == nil {
		err = cerr
	}
	return err
}
