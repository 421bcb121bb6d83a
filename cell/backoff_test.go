package cell_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/cell"
	"github.com/rdmacell/rdmacell/cell/celltest"
)

// slowPathOpts is a fabric whose every path takes about five times the
// T_soft floor to carry one cell: a path slow, not broken, like a NIC
// shared by many connections or a link held by PFC. Before any sample,
// T_soft is the floor (100 µs; 3 × InitialRTT is below it), and a reset
// restarts the cell from its first byte.
func slowPathOpts(paths int, maxBackoff int) fabricOpts {
	o := defaultOpts(paths)
	o.Config.InitialRTT = 20_000
	o.Config.MaxSoftBackoff = maxBackoff
	o.PsPerByte = slices.Repeat([]int64{31_000}, paths) // a 16 KiB cell: 508 µs
	return o
}

// Without the back-off a cell slower than T_soft is given up on every
// attempt and never lands. With it, each give-up doubles the time the cell
// that timed out gets on its next attempts: a cell that has been at the
// head of three paths given up is allowed 8 × the floor, more than it
// needs, so every cell lands after at most three give-ups of its own, and
// its RTT sample teaches the path's estimates.
func TestSoftTimeoutBackoff(t *testing.T) {
	for _, tc := range []struct {
		name       string
		paths      int
		cells      int64
		maxBackoff int
		wantDone   bool
	}{
		{"one path, no back-off", 1, 1, 1, false},
		{"one path", 1, 1, 0, true},
		{"four paths, no back-off", 4, 4, 1, false},
		// The re-posts move from path to path (the first path re-admitted
		// takes them all); each cell's back-off moves with it.
		{"four paths", 4, 4, 0, true},
		{"back-off bounded below the need", 1, 1, 4, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newTestFabric(t, slowPathOpts(tc.paths, tc.maxBackoff))
			f.Transfer(0, tc.cells*16<<10, true)
			f.Run(200 * ms)
			a := f.Ends[0].Engine
			if !tc.wantDone {
				require.False(t, f.Done(), "delivered at t=%dns", f.Now)
				// Given up again and again: about one give-up per
				// floor and reset on each path.
				require.Greater(t, a.Stats().GiveUps, uint64(100*tc.paths))
				return
			}
			require.True(t, f.Done(), "ranges still open at t=%dns after %d give-ups", f.Now, a.Stats().GiveUps)
			f.RunFor(f.Now + 20*ms)
			requireDelivered(t, f)
			require.GreaterOrEqual(t, a.Stats().GiveUps, uint64(3), "the first cell needs three")
			require.LessOrEqual(t, a.Stats().GiveUps, uint64(3*tc.cells))
			for _, c := range f.Ends[0].ResetCauses {
				require.ErrorIs(t, c, cell.ErrSoftTimeout)
			}
			// Every give-up was a soft timeout, counted on its path, and
			// every token on the path of the copy it acknowledged.
			var giveUps, soft, tokens uint64
			for q := range tc.paths {
				giveUps, soft = giveUps+a.Path(q).GiveUps, soft+a.Path(q).SoftTimeouts
				tokens += a.Path(q).Tokens
			}
			require.Equal(t, a.Stats().GiveUps, giveUps)
			require.Equal(t, giveUps, soft)
			require.Positive(t, tokens)
			require.Equal(t, a.Stats().TokensAccepted, tokens)
			for q := range tc.paths {
				p := a.Path(q)
				if p.Samples == 0 {
					continue
				}
				require.Greater(t, p.SoftTimeout, durNS(508*us), "path %d: T_soft has learned the path", q)
			}
		})
	}
}

// The back-off is the cell's: it follows the cell to another path, and
// the path it timed out on judges its next fresh cell by T_soft alone, so
// a dead path is found out as fast as ever.
func TestSoftTimeoutBackoffIsPerCell(t *testing.T) {
	o := defaultOpts(2)
	o.Config.InitialRTT = 20_000 // T_soft is the 100 µs floor
	o.PolicyA = func() cell.Policy { return &cell.ECMP{} }
	f := newTestFabric(t, o)
	// Both paths hold cells 150 µs, once each: the first cell is given up
	// on its path at 100 µs, then lands on the other in 150 µs, within
	// the 200 µs its back-off allows.
	held := map[int]bool{}
	f.Hook = func(m *msg) verdict {
		if m.Kind == celltest.MsgCell && !held[m.Path] {
			held[m.Path] = true
			return verdict{Delay: 150 * us}
		}
		return verdict{}
	}
	f.Transfer(0, 16<<10, true)
	f.Run(50 * ms)
	require.True(t, f.Done())
	a := f.Ends[0]
	require.Equal(t, uint64(1), a.Engine.Stats().GiveUps, "the re-post had twice the time")
	first := a.Posts[0].Path
	require.Equal(t, uint64(1), a.Engine.Path(first).SoftTimeouts)
	require.Equal(t, uint64(1), a.Engine.Path(first).GiveUps)
	require.Zero(t, a.Engine.Path(1-first).GiveUps, "the other path was never given up")

	// The next cell goes to the same path (ECMP) and is held again: it is
	// fresh, so it is given up at the floor, not at twice it.
	f.Hook = func(m *msg) verdict {
		if m.Kind == celltest.MsgCell && m.Path == first {
			return verdict{Delay: 150 * us}
		}
		return verdict{}
	}
	f.Transfer(0, 16<<10, true)
	f.Run(f.Now + 50*ms)
	require.True(t, f.Done())
	requireDelivered(t, f)
	require.Equal(t, uint64(2), a.Engine.Stats().GiveUps)
	require.Equal(t, first, a.Posts[2].Path)
	require.Equal(t, uint64(2), a.Engine.Path(first).SoftTimeouts, "a path's counts survive its re-admission")
	cause := a.ResetCauses[len(a.ResetCauses)-1]
	require.ErrorIs(t, cause, cell.ErrSoftTimeout)
	require.Contains(t, cause.Error(), "no token for 100µs, T_soft 100µs, 1× for this cell")
}

func TestMaxSoftBackoffValidated(t *testing.T) {
	for _, v := range []int{-1, 1<<16 + 1} {
		_, err := cell.New(cell.Config{Paths: 1, MaxSoftBackoff: v})
		require.ErrorIs(t, err, cell.ErrInvalid, "MaxSoftBackoff %d", v)
	}
	_, err := cell.New(cell.Config{Paths: 1, MaxSoftBackoff: 1})
	require.NoError(t, err)
}
