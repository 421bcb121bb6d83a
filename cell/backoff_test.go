package cell_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/cell"
	"github.com/rdmacell/rdmacell/cell/celltest"
)

// slowPathOpts is a fabric whose every path takes about seven times the
// T_soft floor to carry one cell: a path slow, not broken, like a NIC
// shared by many connections or a link held by PFC. Before any sample,
// T_soft is the floor (100 µs; 3 × InitialRTT is below it), and a reset
// restarts the cell from its first byte.
func slowPathOpts(paths int, maxBackoff int) fabricOpts {
	o := defaultOpts(paths)
	o.Config.InitialRTT = 20_000
	o.Config.MaxSoftBackoff = maxBackoff
	o.PsPerByte = slices.Repeat([]int64{45_000}, paths) // a 16 KiB cell: 737 µs
	return o
}

// Without the back-off a cell slower than T_soft never lands on a path
// that is the only one, or on which every cell is as slow: each attempt is
// demoted at T_soft, shows no progress for twice as long again, and is
// reset. With it, each soft timeout doubles the time the cell that timed
// out gets on its next attempts: on one path the first cell is allowed
// 3 × T_soft to show progress, then 6 ×, then 12 ×, more than it needs,
// so it lands after two resets, and its RTT sample teaches the path's
// estimates.
func TestSoftTimeoutBackoff(t *testing.T) {
	for _, tc := range []struct {
		name        string
		paths       int
		cells       int64
		maxBackoff  int
		wantDone    bool
		wantGiveUps uint64 // at least
	}{
		{"one path, no back-off", 1, 1, 1, false, 0},
		{"one path", 1, 1, 0, true, 2},
		{"four paths, no back-off", 4, 4, 1, false, 0},
		// The re-posts move from path to path; each cell's back-off moves
		// with it.
		{"four paths", 4, 4, 0, true, 1},
		{"back-off bounded below the need", 1, 1, 2, false, 0}, // 6 × at most
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newTestFabric(t, slowPathOpts(tc.paths, tc.maxBackoff))
			f.Transfer(0, tc.cells*16<<10, true)
			f.Run(200 * ms)
			a := f.Ends[0].Engine
			if !tc.wantDone {
				require.False(t, f.Done(), "delivered at t=%dns", f.Now)
				// Given up again and again: about one give-up per
				// three floors and a reset on each path.
				require.Greater(t, a.Stats().GiveUps, uint64(100*tc.paths))
				return
			}
			require.True(t, f.Done(), "ranges still open at t=%dns after %d give-ups", f.Now, a.Stats().GiveUps)
			f.RunFor(f.Now + 20*ms)
			requireDelivered(t, f)
			require.GreaterOrEqual(t, a.Stats().GiveUps, tc.wantGiveUps)
			require.LessOrEqual(t, a.Stats().GiveUps, uint64(3*tc.cells))
			for _, c := range f.Ends[0].ResetCauses {
				require.ErrorIs(t, c, cell.ErrNoProgress)
			}
			// Every give-up followed a demotion of its path, and both
			// are counted on it, as every token is on the path of the
			// copy it acknowledged.
			var giveUps, soft, tokens uint64
			for q := range tc.paths {
				giveUps, soft = giveUps+a.Path(q).GiveUps, soft+a.Path(q).SoftTimeouts
				tokens += a.Path(q).Tokens
			}
			require.Equal(t, a.Stats().GiveUps, giveUps)
			require.Equal(t, a.Stats().Demotions, soft)
			require.GreaterOrEqual(t, soft, giveUps)
			require.Positive(t, tokens)
			require.Equal(t, a.Stats().TokensAccepted, tokens)
			for q := range tc.paths {
				p := a.Path(q)
				if p.Samples == 0 {
					continue
				}
				require.Greater(t, p.SoftTimeout, durNS(737*us), "path %d: T_soft has learned the path", q)
			}
		})
	}
}

// The back-off is the cell's: it follows the cell to another path, and
// the path it timed out on judges its next fresh cell by T_soft alone, so
// a dead path is found out as fast as ever. And a path that is only slow
// is demoted, not reset: its late copy lands, and it is up again.
func TestSoftTimeoutBackoffIsPerCell(t *testing.T) {
	o := defaultOpts(2)
	o.Config.InitialRTT = 20_000 // T_soft is the 100 µs floor
	o.PolicyA = func() cell.Policy { return &cell.ECMP{} }
	f := newTestFabric(t, o)
	// Both paths hold cells 150 µs, once each: the first cell is demoted
	// on its path at 100 µs and re-posted on the other, where it lands in
	// 150 µs, within the 200 µs its back-off allows; its first copy lands
	// too, within three T_soft, and its path is up again.
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
	st := a.Engine.Stats()
	require.Zero(t, st.GiveUps, "slow is not dead")
	require.Equal(t, uint64(1), st.Demotions)
	require.Equal(t, uint64(1), st.Promotions)
	first := a.Posts[0].Path
	require.Equal(t, uint64(1), a.Engine.Path(first).SoftTimeouts)
	require.Equal(t, uint64(1), a.Engine.Path(first).Promotions)
	require.Equal(t, cell.PathUp, a.Engine.Path(first).State)
	require.Zero(t, a.Engine.Path(1-first).SoftTimeouts, "the re-post had twice the time")
	require.Equal(t, 2, len(a.Posts))

	// The path kept what it measured: T_soft now covers the 150 µs. The
	// next cell goes to the same path (ECMP) and is held one and a half
	// times that: it is fresh, so it is demoted at T_soft, not at twice
	// it, and its path is up again when it lands.
	tsoft := a.Engine.Path(first).SoftTimeout
	require.Greater(t, tsoft, durNS(150*us))
	f.Hook = func(m *msg) verdict {
		if m.Kind == celltest.MsgCell && m.Path == first {
			return verdict{Delay: int64(tsoft) * 3 / 2}
		}
		return verdict{}
	}
	f.Transfer(0, 16<<10, true)
	f.Run(f.Now + 50*ms)
	require.True(t, f.Done())
	requireDelivered(t, f)
	require.Equal(t, 4, len(a.Posts))
	require.Equal(t, first, a.Posts[2].Path)
	require.Equal(t, 1-first, a.Posts[3].Path)
	// (The re-post waits for the answer to the hold of its range.)
	again := durNS(a.Posts[3].At - a.Posts[2].At)
	require.True(t, again >= tsoft && again < tsoft+durNS(10*us), "re-posted %v after the post, T_soft %v", again, tsoft)
	require.Equal(t, uint64(2), a.Engine.Path(first).SoftTimeouts)
	require.Equal(t, uint64(2), a.Engine.Path(first).Promotions)
	require.Zero(t, a.Engine.Stats().GiveUps)
}

func TestMaxSoftBackoffValidated(t *testing.T) {
	for _, v := range []int{-1, 1<<16 + 1} {
		_, err := cell.New(cell.Config{Paths: 1, MaxSoftBackoff: v})
		require.ErrorIs(t, err, cell.ErrInvalid, "MaxSoftBackoff %d", v)
	}
	_, err := cell.New(cell.Config{Paths: 1, MaxSoftBackoff: 1})
	require.NoError(t, err)
}
