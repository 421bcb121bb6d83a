package main

import (
	"math"
	"math/rand/v2"
)

// The layer's dimensions: each token is a vector of dim values.
const dim = 8

// linear is a dim×dim matrix drawn from a seed. Every rank can rebuild
// any of them, which is what lets the example check the distributed
// layer against a serial computation.
type linear []float32

func newLinear(seed uint64) linear {
	rng := rand.New(rand.NewPCG(seed, 0))
	w := make(linear, dim*dim)
	for i := range w {
		w[i] = float32(rng.NormFloat64() / math.Sqrt(dim))
	}
	return w
}

// route is the gate: it scores the token against each expert's row of
// the gate matrix and picks the best (top-1 routing, as Switch
// Transformer does).
func route(gate []float32, experts int, token []float32) int {
	best, bestScore := 0, float32(0)
	for e := range experts {
		score := float32(0)
		for j, w := range gate[e*dim : (e+1)*dim] {
			score += w * token[j]
		}
		if e == 0 || score > bestScore {
			best, bestScore = e, score
		}
	}
	return best
}

// expert is one expert's feed-forward network: out = tanh(W·in).
func expert(w linear, in, out []float32) {
	for o := range dim {
		s := float32(0)
		for i, x := range in {
			s += w[o*dim+i] * x
		}
		out[o] = float32(math.Tanh(float64(s)))
	}
}

// tokens draws a rank's n input tokens.
func tokens(seed uint64, rank, n int) []float32 {
	rng := rand.New(rand.NewPCG(seed, uint64(rank)+1))
	t := make([]float32, n*dim)
	for i := range t {
		t[i] = float32(rng.NormFloat64())
	}
	return t
}
