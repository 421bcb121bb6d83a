package main

import "math/rand/v2"

// dataset is a classification problem: features X (one row of dim values
// per sample) and labels Y in [0, classes).
type dataset struct {
	X       []float32
	Y       []int
	dim     int
	classes int
}

// len is the number of samples.
func (d *dataset) len() int { return len(d.Y) }

// row returns sample i's features.
func (d *dataset) row(i int) []float32 { return d.X[i*d.dim : (i+1)*d.dim] }

// synthetic draws n samples from a fixed seed: Gaussian features labelled
// by a random linear "teacher" plus a little noise, so that the problem is
// learnable but not trivial. Every rank calls it with the same seed and
// gets the same dataset, which is how the ranks agree on the data
// without sending it.
func synthetic(seed uint64, n, dim, classes int) *dataset {
	rng := rand.New(rand.NewPCG(seed, 0))
	teacher := make([]float32, classes*dim)
	for i := range teacher {
		teacher[i] = float32(rng.NormFloat64())
	}
	d := &dataset{X: make([]float32, n*dim), Y: make([]int, n), dim: dim, classes: classes}
	for i := range n {
		x := d.row(i)
		for j := range x {
			x[j] = float32(rng.NormFloat64())
		}
		best, bestScore := 0, float32(0)
		for c := range classes {
			score := float32(0.3 * rng.NormFloat64())
			for j, w := range teacher[c*dim : (c+1)*dim] {
				score += w * x[j]
			}
			if c == 0 || score > bestScore {
				best, bestScore = c, score
			}
		}
		d.Y[i] = best
	}
	return d
}

// epochOrder is the order of the samples in an epoch: a permutation drawn
// from the seed and the epoch, the same on every rank.
func epochOrder(seed uint64, epoch, n int) []int {
	rng := rand.New(rand.NewPCG(seed, uint64(epoch)+1))
	return rng.Perm(n)
}
