package cell_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/cell"
)

// slowPathOpts is a fabric whose every path takes about five times the
// T_soft floor to carry one cell: a path slow, not broken, like a NIC
// shared by many connections or a link held by PFC. Before any sample,
// T_soft is the floor (100 µs; 3 × InitialRTT is below it), and a reset
// restarts the cell from its first byte.
func slowPathOpts(paths int, maxBackoff int) fabricOpts {
	o := defaultOpts(paths)
	o.cfg.InitialRTT = 20_000
	o.cfg.MaxSoftBackoff = maxBackoff
	o.psPerByte = slices.Repeat([]int64{31_000}, paths) // a 16 KiB cell: 508 µs
	return o
}

// Without the back-off a cell slower than T_soft is given up on every
// attempt and never lands. With it, each give-up doubles the time the
// path and the cell that timed out get next: a cell that has been at the
// head of three paths given up is allowed 8 × the floor, more than it
// needs, so every cell lands after at most three give-ups, and the RTT
// sample it gives clears its path's back-off.
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
		// takes them all); the cell's back-off moves with each.
		{"four paths", 4, 4, 0, true},
		{"back-off bounded below the need", 1, 1, 4, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newTestFabric(t, slowPathOpts(tc.paths, tc.maxBackoff))
			f.transfer(0, tc.cells*16<<10, true)
			f.run(200 * ms)
			a := f.ends[0].e
			if !tc.wantDone {
				require.False(t, f.done(), "delivered at t=%dns", f.now)
				// Given up again and again: about one give-up per
				// floor and reset on each path.
				require.Greater(t, a.Stats().GiveUps, uint64(100*tc.paths))
				return
			}
			require.True(t, f.done(), "ranges still open at t=%dns after %d give-ups", f.now, a.Stats().GiveUps)
			f.runFor(f.now + 20*ms)
			requireDelivered(t, f)
			require.GreaterOrEqual(t, a.Stats().GiveUps, uint64(3), "the first cell needs three")
			require.LessOrEqual(t, a.Stats().GiveUps, uint64(3*tc.cells))
			for _, c := range f.ends[0].resetCauses {
				require.ErrorIs(t, c, cell.ErrSoftTimeout)
			}
			for q := range tc.paths {
				p := a.Path(q)
				if p.Samples == 0 {
					continue
				}
				require.Equal(t, 1, p.Backoff, "path %d: a sample clears the back-off", q)
				require.Greater(t, p.SoftTimeout, durNS(508*us), "path %d: T_soft has learned the path", q)
			}
		})
	}
}

// The path's back-off outlives its reset, the cell's follows it to
// another path, and a path whose cells land again is judged by its
// estimates alone.
func TestSoftTimeoutBackoffState(t *testing.T) {
	o := defaultOpts(2)
	o.cfg.InitialRTT = 20_000
	f := newTestFabric(t, o)
	// Path 0's first cell is held 1 ms: it is given up at the floor, and
	// the cell goes to path 1.
	f.hook = func(m *msg) verdict {
		if m.kind == mCell && m.path == 0 && f.ends[0].e.Stats().GiveUps == 0 {
			return verdict{delay: ms}
		}
		return verdict{}
	}
	f.transfer(0, 16<<10, true)
	f.run(50 * ms)
	require.True(t, f.done())
	a := f.ends[0].e
	require.Equal(t, uint64(1), a.Stats().GiveUps)
	require.Equal(t, 2, a.Path(0).Backoff, "kept through the reset")
	require.Equal(t, durNS(200*us), a.Path(0).SoftTimeout, "twice the floor")
	require.Equal(t, 1, a.Path(1).Backoff, "the re-post landed: path 1 never timed out")

	// The next cell on path 0 lands: its sample clears the back-off.
	f.hook = nil
	f.transfer(0, 64<<10, true)
	settle(t, f)
	requireDelivered(t, f)
	require.Equal(t, uint64(1), a.Stats().GiveUps)
	require.Positive(t, a.Path(0).Samples)
	require.Equal(t, 1, a.Path(0).Backoff)
}

func TestMaxSoftBackoffValidated(t *testing.T) {
	for _, v := range []int{-1, 1<<16 + 1} {
		_, err := cell.New(cell.Config{Paths: 1, MaxSoftBackoff: v})
		require.ErrorIs(t, err, cell.ErrInvalid, "MaxSoftBackoff %d", v)
	}
	e, err := cell.New(cell.Config{Paths: 1})
	require.NoError(t, err)
	require.Equal(t, 1, e.Path(0).Backoff)
}
