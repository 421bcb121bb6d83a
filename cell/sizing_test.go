package cell_test

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Adaptive cells: the first at InitialCellSize, then 1.5 × the measured
// bandwidth-delay product (1 byte/ns × ~100 µs here), whole MTUs, within
// bounds; the last cell of a range takes what is left.
func TestAdaptiveCellSize(t *testing.T) {
	for _, tc := range []struct {
		name     string
		min, max int64
		lo, hi   int64 // where the settled size must lie
	}{
		{"1.5 × BDP", 4 << 10, 4 << 20, 120 << 10, 180 << 10},
		{"capped by MaxCellSize", 4 << 10, 64 << 10, 64 << 10, 64 << 10},
		{"raised to MinCellSize", 512 << 10, 4 << 20, 512 << 10, 512 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := defaultOpts(2)
			o.Latency = 50 * us
			o.Config.CellSize = 0
			o.Config.MinCellSize, o.Config.MaxCellSize, o.Config.InitialCellSize = tc.min, tc.max, 16<<10
			o.Config.InitialRTT = durNS(1000 * us)
			f := newTestFabric(t, o)
			x := f.Transfer(0, 8<<20, true)
			settle(t, f)
			requireDelivered(t, f)
			posts := f.Ends[0].Posts
			require.Equal(t, max(int64(16<<10), tc.min), posts[0].N, "the first cell, before any measurement")
			last := posts[len(posts)-1]
			var total int64
			for _, p := range posts {
				total += p.N
			}
			require.Equal(t, x.N, total)
			for _, p := range posts[len(posts)/2 : len(posts)-1] {
				require.Zero(t, p.N%4096, "whole MTUs")
				require.GreaterOrEqual(t, p.N, tc.lo)
				require.LessOrEqual(t, p.N, tc.hi)
			}
			require.LessOrEqual(t, last.N, tc.hi)
		})
	}
}
