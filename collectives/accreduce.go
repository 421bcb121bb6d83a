package collectives

import (
	"context"
	"fmt"

	"github.com/rdmacell/rdmacell/collectives/exact"
)

// AllReduceAcc merges accs element by element over all ranks, in place:
// afterwards accs[i] on every rank holds the exact sum of everything
// every rank added to its accs[i], ready to be rounded once (Float64,
// Float32). accs must have the same length on every rank.
//
// This is how a sum is made independent of how its terms are split
// between ranks: sum each rank's share of the terms into exact.Acc, merge
// them with AllReduceAcc, and round. The result is then the correctly
// rounded sum of all the terms, on 1 rank or 100, in any order. The
// accumulators travel as an integer Sum of their exact.Words int64 words
// (576 bytes per element, 72 times a float64), which every algorithm
// merges exactly.
func AllReduceAcc(ctx context.Context, g *Group, accs []exact.Acc) error {
	for i := range accs {
		// Bounded digits, so that the words of up to 2^30 ranks add up
		// without overflow.
		accs[i].Normalize()
	}
	w := exact.AsWords(accs)
	if err := AllReduce(ctx, g, w, w, Sum); err != nil {
		return err
	}
	for i := range accs {
		if !accs[i].Valid() {
			return fmt.Errorf("collectives: rank %d: AllReduceAcc: element %d merged into an accumulator no Add or Merge makes: a rank passed words that are not accumulators", g.rank, i)
		}
	}
	return nil
}
