package cell_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/cell"
)

// Four paths, the last ten times slower; 16 MiB in 256 ranges.
func TestPolicies(t *testing.T) {
	const paths, slow = 4, 3
	for _, tc := range []struct {
		name  string
		pol   func() cell.Policy
		check func(t *testing.T, bytes []int64, cells []int, total int64)
	}{
		{"adaptive moves load off the slow path", func() cell.Policy { return &cell.Adaptive{} },
			func(t *testing.T, bytes []int64, _ []int, total int64) {
				share := float64(bytes[slow]) / float64(total)
				require.Less(t, share, 0.25/3, "slow path share %.3f, fair is 0.25", share)
				for q := range slow {
					require.Greater(t, float64(bytes[q])/float64(total), 0.25, "fast path %d", q)
				}
			}},
		{"ecmp uses one path", func() cell.Policy { return &cell.ECMP{Key: 12345} },
			func(t *testing.T, bytes []int64, _ []int, total int64) {
				used := 0
				for _, b := range bytes {
					if b > 0 {
						used++
						require.Equal(t, total, b)
					}
				}
				require.Equal(t, 1, used)
			}},
		{"spray uses all paths evenly", func() cell.Policy { return &cell.Spray{} },
			func(t *testing.T, _ []int64, cells []int, _ int64) {
				lo, hi := cells[0], cells[0]
				for _, c := range cells {
					lo, hi = min(lo, c), max(hi, c)
				}
				require.LessOrEqual(t, hi-lo, 1, "cells per path %v", cells)
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := defaultOpts(paths)
			o.PsPerByte = []int64{1000, 1000, 1000, 10000}
			o.PolicyA = tc.pol
			f := newTestFabric(t, o)
			for range 256 {
				f.Transfer(0, 64<<10, true)
			}
			settle(t, f)
			requireDelivered(t, f)
			require.Zero(t, f.Ends[0].Engine.Stats().GiveUps, "no path was given up: the comparison is about load alone")
			require.Equal(t, tc.pol().Name(), f.Ends[0].Engine.Policy().Name())
			tc.check(t, f.Ends[0].BytesOn(), f.Ends[0].CellsOn(), 256*64<<10)
		})
	}
}

func TestParsePolicy(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		err      bool
	}{
		{"", "adaptive", false},
		{"adaptive", "adaptive", false},
		{"ecmp", "ecmp", false},
		{"spray", "spray", false},
		{"letflow", "", true},
	} {
		p, err := cell.ParsePolicy(tc.in)
		if tc.err {
			require.ErrorIs(t, err, cell.ErrInvalid)
			require.ErrorContains(t, err, tc.in)
			continue
		}
		require.NoError(t, err)
		require.Equal(t, tc.want, p.Name())
	}
}

// Pick on hand-made snapshots: the rules each policy promises.
func TestPolicyPick(t *testing.T) {
	up := func(credits int, bytes, bw int64, srtt int64) cell.PathInfo {
		return cell.PathInfo{State: cell.PathUp, Credits: credits, Bytes: bytes, Bandwidth: bw, SRTT: durNS(srtt)}
	}
	down := cell.PathInfo{State: cell.PathDown, Credits: 8}
	for _, tc := range []struct {
		name  string
		pol   cell.Policy
		paths []cell.PathInfo
		want  []int // successive picks
	}{
		{"adaptive: least expected completion", &cell.Adaptive{},
			[]cell.PathInfo{up(8, 1<<20, 1e9, 10e3), up(8, 0, 1e9, 10e3), up(8, 0, 1e8, 10e3)}, []int{1}},
		{"adaptive: high RTT loses", &cell.Adaptive{},
			[]cell.PathInfo{up(8, 0, 1e9, 900e3), up(8, 0, 1e9, 10e3)}, []int{1}},
		{"adaptive: waits for the best path's credit", &cell.Adaptive{},
			[]cell.PathInfo{up(0, 0, 1e9, 10e3), up(8, 0, 1e7, 10e3)}, []int{-1}},
		{"adaptive: unmeasured path assumed as fast as the best", &cell.Adaptive{},
			[]cell.PathInfo{up(8, 1<<16, 1e9, 10e3), up(8, 0, 0, 10e3)}, []int{1}},
		{"adaptive: skips down paths", &cell.Adaptive{},
			[]cell.PathInfo{down, up(8, 1<<30, 1e6, 10e3)}, []int{1}},
		{"adaptive: nothing up", &cell.Adaptive{}, []cell.PathInfo{down, down}, []int{-1}},
		{"ecmp: static", &cell.ECMP{Key: 7},
			[]cell.PathInfo{up(8, 0, 0, 0), up(8, 0, 0, 0), up(8, 0, 0, 0)}, []int{ecmpPath(7, 3), ecmpPath(7, 3)}},
		{"spray: round robin over up paths", &cell.Spray{},
			[]cell.PathInfo{up(8, 0, 0, 0), down, up(8, 0, 0, 0)}, []int{0, 2, 0, 2}},
		{"spray: waits for the path whose turn it is", &cell.Spray{},
			[]cell.PathInfo{up(0, 0, 0, 0), up(8, 0, 0, 0)}, []int{-1, -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i, want := range tc.want {
				require.Equal(t, want, tc.pol.Pick(tc.paths, 16<<10), "pick %d", i)
			}
		})
	}
}

func ecmpPath(key uint64, n int) int {
	p := &cell.ECMP{Key: key}
	paths := make([]cell.PathInfo, n)
	for i := range paths {
		paths[i] = cell.PathInfo{State: cell.PathUp, Credits: 1}
	}
	return p.Pick(paths, 1)
}

// A path slow during a burst and as fast as the other afterwards gets
// its share back: its RTT samples from the burst include the queue its
// cells waited in, which must not keep it out once it drains.
func TestAdaptiveRecoveredPathGetsItsShare(t *testing.T) {
	o := defaultOpts(2)
	o.Config.CellSize, o.Config.RecvDepth, o.Config.MaxRanges, o.Config.Window = 64<<10, 64, 64, 1024
	o.PsPerByte = []int64{1000, 3000}
	o.PolicyA = func() cell.Policy { return &cell.Adaptive{} }
	f := newTestFabric(t, o)
	for range 16 {
		f.Transfer(0, 4<<20, true)
	}
	settle(t, f)
	f.Links[0][1].PsPerByte = 1000 // path 1 is as fast as path 0 now
	before := f.Ends[0].BytesOn()
	for range 64 {
		f.Transfer(0, 1<<20, true)
		settle(t, f)
	}
	requireDelivered(t, f)
	after := f.Ends[0].BytesOn()
	share := float64(after[1]-before[1]) / float64(64<<20)
	require.Greater(t, share, 0.35, "path 1 carried %.1f%% after it recovered (fair share 50%%)", 100*share)
}

// A path whose delay grows after it was measured (a link that becomes
// congested) loses its share: the delay the policy ranks by follows the
// samples up, not only down.
func TestAdaptiveAvoidsPathThatSlowsDown(t *testing.T) {
	o := defaultOpts(4)
	o.Config.CellSize, o.Config.RecvDepth, o.Config.MaxRanges, o.Config.Window = 64<<10, 64, 64, 1024
	o.Config.MinSoftTimeout = durNS(100 * ms) // slow, not failed: only placement may avoid it
	o.PolicyA = func() cell.Policy { return &cell.Adaptive{} }
	f := newTestFabric(t, o)
	for range 16 {
		f.Transfer(0, 4<<20, true)
	}
	settle(t, f)
	f.Links[0][3].Latency += 5 * ms // about ten times the loaded RTT
	before := f.Ends[0].BytesOn()
	for range 64 {
		f.Transfer(0, 1<<20, true)
	}
	settle(t, f)
	requireDelivered(t, f)
	require.Zero(t, f.Ends[0].Engine.Stats().GiveUps)
	after := f.Ends[0].BytesOn()
	share := float64(after[3]-before[3]) / float64(64<<20)
	require.Less(t, share, 0.125, "the slowed path carried %.1f%% (fair share 25%%)", 100*share)
}

// A path measured slow and left without cells is probed again once its
// measurements are stale, and gets its share back when it has recovered:
// nothing else could ever show the policy that it has. The probes while
// it is still slow are few, and cost no reset.
func TestAdaptiveReprobesPathMeasuredSlow(t *testing.T) {
	o := defaultOpts(4)
	o.Config.CellSize, o.Config.RecvDepth, o.Config.MaxRanges, o.Config.Window = 64<<10, 64, 64, 1024
	o.Config.MinSoftTimeout = durNS(100 * ms)
	o.PolicyA = func() cell.Policy { return &cell.Adaptive{} }
	f := newTestFabric(t, o)
	f.Links[0][3].Latency += 5 * ms
	for range 64 {
		f.Transfer(0, 1<<20, true)
	}
	settle(t, f)
	slowed := f.Ends[0].BytesOn()
	require.Less(t, float64(slowed[3]), 0.125*float64(64<<20), "the slow path carried its share")
	f.Links[0][3].Latency -= 5 * ms
	for range 128 {
		f.Transfer(0, 1<<20, true)
		settle(t, f)
	}
	requireDelivered(t, f)
	st := f.Ends[0].Engine.Stats()
	require.Zero(t, st.GiveUps)
	require.NotZero(t, f.Ends[0].Engine.Path(3).Reprobes)
	after := f.Ends[0].BytesOn()
	share := float64(after[3]-slowed[3]) / float64(128<<20)
	require.Greater(t, share, 0.15, "path 3 carried %.1f%% after it recovered (fair share 25%%)", 100*share)
}

// A path not measured yet, next to a measured one, is probed with one
// cell at a time: however fast it is assumed to be, it gets no second cell
// before its first token. With nothing measured, every path takes cells.
func TestAdaptiveProbesUnmeasuredPaths(t *testing.T) {
	measured := cell.PathInfo{State: cell.PathUp, Credits: 8, Cells: 4, Bytes: 4 << 20,
		Samples: 10, Delay: time.Millisecond, Bandwidth: 1e9}
	fresh := cell.PathInfo{State: cell.PathUp, Credits: 8, SRTT: time.Millisecond}
	a := &cell.Adaptive{}
	require.Equal(t, 1, a.Pick([]cell.PathInfo{measured, fresh}, 64<<10), "the fresh path is tried")
	fresh.Cells, fresh.Bytes = 1, 64<<10
	require.Equal(t, 0, a.Pick([]cell.PathInfo{measured, fresh}, 64<<10), "one probe at a time")
	fresh.Samples, fresh.Delay, fresh.Bandwidth = 1, 10*time.Microsecond, 1e9
	require.Equal(t, 1, a.Pick([]cell.PathInfo{measured, fresh}, 64<<10), "measured, it is trusted")

	unmeasured := cell.PathInfo{State: cell.PathUp, Credits: 8, Cells: 3, Bytes: 3 << 16, SRTT: time.Millisecond}
	other := unmeasured
	other.Cells, other.Bytes = 4, 4<<16
	require.Equal(t, 0, a.Pick([]cell.PathInfo{unmeasured, other}, 64<<10), "nothing measured: by backlog")
}

// Small messages both ways, their tokens and the grants for them all
// travel on the first path while it is about as quick as the others: each
// end then has one QP to read. When the first path slows down, they move
// off it; a large range is still spread over every path.
func TestAdaptiveSmallMessagesShareFirstPath(t *testing.T) {
	o := defaultOpts(4)
	o.Config.MinSoftTimeout = durNS(100 * ms) // slow, not failed: only placement may avoid it
	o.PolicyA = func() cell.Policy { return &cell.Adaptive{} }
	o.PolicyB = o.PolicyA
	f := newTestFabric(t, o)
	exchange := func(n int) {
		for range n {
			f.Transfer(0, 256, true)
			f.Transfer(1, 256, true)
			settle(t, f)
		}
	}
	exchange(100)
	requireDelivered(t, f)
	for _, en := range f.Ends {
		cells := en.CellsOn()
		require.Equal(t, 100, cells[0]+cells[1]+cells[2]+cells[3], "end %s", en.Name)
		require.Equal(t, []int{cells[0], 0, 0, 0}, cells, "end %s: cells per path", en.Name)
		require.Equal(t, 0, en.RecordsOn[1]+en.RecordsOn[2]+en.RecordsOn[3], "end %s: records per path %v", en.Name, en.RecordsOn)
	}

	f.Links[0][0].Latency += 5 * ms
	f.Links[1][0].Latency += 5 * ms
	before := f.Ends[0].CellsOn()
	exchange(100)
	requireDelivered(t, f)
	after := f.Ends[0].CellsOn()
	require.Less(t, after[0]-before[0], 10, "the slowed first path still took %d of 100 small cells", after[0]-before[0])
	f.Links[0][0].Latency -= 5 * ms
	f.Links[1][0].Latency -= 5 * ms

	before64 := f.Ends[0].BytesOn()
	f.Transfer(0, 4<<20, true)
	settle(t, f)
	requireDelivered(t, f)
	after64 := f.Ends[0].BytesOn()
	for q := range after64 {
		require.Positive(t, after64[q]-before64[q], "path %d carried nothing of a 4 MiB range", q)
	}
}
