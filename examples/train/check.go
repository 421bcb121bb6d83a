package main

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"

	"github.com/rdmacell/rdmacell/collectives"
)

// checkIdentical confirms that every rank holds bitwise-identical weights:
// each rank hashes the bits of its parameters and the hashes are
// all-gathered, so every rank can compare them and all reach the same
// verdict. Data-parallel training relies on this: the ranks apply the
// same averaged gradients to the same weights, and any difference would
// grow from step to step.
func checkIdentical(ctx context.Context, g *collectives.Group, params []float32) (uint64, error) {
	h := fnv.New64a()
	var b [4]byte
	for _, p := range params {
		bits := math.Float32bits(p)
		b[0], b[1], b[2], b[3] = byte(bits), byte(bits>>8), byte(bits>>16), byte(bits>>24)
		h.Write(b[:])
	}
	mine := int64(h.Sum64())
	all := make([]int64, g.Size())
	if err := collectives.AllGather(ctx, g, []int64{mine}, all); err != nil {
		return 0, fmt.Errorf("gather weight hashes: %w", err)
	}
	for r, other := range all {
		if other != mine {
			return 0, fmt.Errorf("weights differ: rank %d has hash %#x, rank %d has %#x", g.Rank(), uint64(mine), r, uint64(other))
		}
	}
	return uint64(mine), nil
}
