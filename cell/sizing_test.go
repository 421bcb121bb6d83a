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
			o.latency = 50 * us
			o.cfg.CellSize = 0
			o.cfg.MinCellSize, o.cfg.MaxCellSize, o.cfg.InitialCellSize = tc.min, tc.max, 16<<10
			o.cfg.InitialRTT = durNS(1000 * us)
			f := newTestFabric(t, o)
			x := f.transfer(0, 8<<20, true)
			settle(t, f)
			requireDelivered(t, f)
			posts := f.ends[0].posts
			require.Equal(t, max(int64(16<<10), tc.min), posts[0].n, "the first cell, before any measurement")
			last := posts[len(posts)-1]
			var total int64
			for _, p := range posts {
				total += p.n
			}
			require.Equal(t, x.n, total)
			for _, p := range posts[len(posts)/2 : len(posts)-1] {
				require.Zero(t, p.n%4096, "whole MTUs")
				require.GreaterOrEqual(t, p.n, tc.lo)
				require.LessOrEqual(t, p.n, tc.hi)
			}
			require.LessOrEqual(t, last.n, tc.hi)
		})
	}
}
