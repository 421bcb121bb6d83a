package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/rdmacell/rdmacell/collectives"
)

// bucket is a contiguous range of the gradient vector, covering layers
// lo..hi, that is averaged across the ranks with one AllReduce.
type bucket struct {
	lo, hi int
	grads  []float32
}

// gradSync averages gradients across the ranks the way PyTorch's DDP
// does: the gradients are grouped into buckets of whole layers, in the
// order the backward pass produces them (last layer first), and a
// bucket's AllReduce starts as soon as its last gradient is computed. The
// network then moves one bucket while the CPU computes the next, and only
// the optimizer step waits for all of them.
type gradSync struct {
	g       *collectives.Group
	buckets []bucket
	byLayer []int // layer → index of the bucket that holds it
	pending []collectives.Request
}

// newGradSync groups m's layers into buckets of at least capElems
// gradients each (the last bucket may be smaller). Bigger buckets mean
// fewer, more efficient AllReduces; smaller ones start earlier.
func newGradSync(g *collectives.Group, m *mlp, capElems int) *gradSync {
	s := &gradSync{g: g, byLayer: make([]int, len(m.layers))}
	offset := func(l int) int { // where layer l's gradients start
		at := 0
		for _, x := range m.layers[:l] {
			at += len(x.gw) + len(x.gb)
		}
		return at
	}
	hi := len(m.layers) - 1
	for hi >= 0 {
		lo, n := hi, 0
		for ; lo >= 0; lo-- {
			n += len(m.layers[lo].gw) + len(m.layers[lo].gb)
			if n >= capElems {
				break
			}
		}
		lo = max(lo, 0)
		for l := lo; l <= hi; l++ {
			s.byLayer[l] = len(s.buckets)
		}
		s.buckets = append(s.buckets, bucket{lo: lo, hi: hi, grads: m.grads[offset(lo) : offset(hi)+len(m.layers[hi].gw)+len(m.layers[hi].gb)]})
		hi = lo - 1
	}
	return s
}

// layerDone is called by the backward pass once layer l's gradients are
// final. When l is the last layer of its bucket to finish, the bucket's
// in-place AllReduce starts; the backward pass goes on at once.
func (s *gradSync) layerDone(ctx context.Context, l int) error {
	b := s.buckets[s.byLayer[l]]
	if l != b.lo { // the backward pass reaches lo last
		return nil
	}
	// Avg divides the sum by the number of ranks: the mean gradient over
	// the global batch, since every rank's shard of it is the same size.
	req, err := collectives.IAllReduce(ctx, s.g, b.grads, b.grads, collectives.Avg)
	if err != nil {
		return fmt.Errorf("start averaging layers %d-%d: %w", b.lo, b.hi, err)
	}
	s.pending = append(s.pending, req)
	return nil
}

// wait blocks until every bucket started since the last wait is averaged.
// The gradients must not be read before it returns.
func (s *gradSync) wait(ctx context.Context) error {
	var errs []error
	for _, req := range s.pending {
		errs = append(errs, req.Wait(ctx))
	}
	s.pending = s.pending[:0]
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("average gradients: %w", err)
	}
	return nil
}
