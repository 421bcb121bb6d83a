package driver

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/cell"
	"github.com/rdmacell/rdmacell/verbs/fault"
)

// One path of four is slowed tenfold (a fault delay of ten times the
// RTT the paths show under load): once the sender has seen it, the
// adaptive policy moves far less than a fair share of the bytes over it,
// and everything arrives.
func TestAdaptiveAvoidsSlowPath(t *testing.T) {
	const total, rangeLen = 64 << 20, 4 << 20
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			cfg := testConfig()
			// A slow path, not a failing one: T_soft stays above the delay,
			// so the path is kept and only placement can avoid it.
			cfg.Engine.MinSoftTimeout = 5 * time.Second
			// A few cells in flight per path, so that a path's delay bounds
			// its rate: with a deep window a delayed path is a long fat
			// pipe that moves as much as paths slowed by a loaded machine,
			// and placing cells on it is then right.
			cfg.Engine.RecvDepth = 4
			// And cells of a fixed size: sized from the bandwidth-delay
			// product, the delayed path's cells grow with its delay, and
			// four of them make it a fat pipe again.
			cfg.CellSize = 64 << 10
			pr := newPair(t, p, cfg)
			ctx := bounded(t)
			stream(ctx, t, pr.a, pr.b, 16<<20, rangeLen, 4, -1, nil)
			var rtt time.Duration
			before := pr.a.conn.Stats()
			for _, ps := range before.Paths {
				rtt += ps.SRTT / time.Duration(len(before.Paths))
			}
			delay := min(10*rtt, time.Second)
			const slow = 3
			pr.a.qp(slow).Inject(fault.Fault{Kind: fault.Delay, Delay: delay})
			// The sender learns of the delay once the slow path's first
			// delayed samples come back: the share counted is the one the
			// path ends up with.
			stream(ctx, t, pr.a, pr.b, 16<<20, rangeLen, 4, -1, nil)
			before = pr.a.conn.Stats()
			stream(ctx, t, pr.a, pr.b, total, rangeLen, 4, -1, nil)
			after := pr.a.conn.Stats()
			var sum, slowBytes uint64
			for i := range after.Paths {
				d := after.Paths[i].BytesPosted - before.Paths[i].BytesPosted
				sum += d
				if i == slow {
					slowBytes = d
				}
				t.Logf("path %d: %d bytes, srtt %v, bandwidth %d B/s", i, d, after.Paths[i].SRTT, after.Paths[i].Bandwidth)
			}
			share := float64(slowBytes) / float64(sum)
			t.Logf("path RTT under load %v, delay %v: the slow path carried %.1f%% of %d bytes (fair share 25%%)", rtt, delay, 100*share, sum)
			require.GreaterOrEqual(t, sum, uint64(total), "every byte was posted")
			require.Less(t, share, 0.125, "the slow path carries less than half its fair share")
		})
	}
}

// Slow is not dead, over real providers: path 0 holds every request one
// and a half times T_soft (T_soft is the floor on a fresh connection).
// Its cells are late, so the path is demoted and they go again on path
// 1; but its copies land before three times T_soft, so the path is up
// again without a reset, and the range is delivered intact.
func TestSlowPathIsNotReset(t *testing.T) {
	const n = 64 << 10
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			// A floor far above what a loaded machine adds to a round
			// trip, so that only the injected delay makes a cell late.
			pr := sprayPair(t, p, 200*time.Millisecond)
			ctx := bounded(t)
			src, dst := pr.a.region(n), pr.b.region(n)
			fill(src.Bytes(), 7)
			slow := pr.a.qp(0)
			slow.Inject(fault.Fault{Kind: fault.Delay, Delay: 300 * time.Millisecond})
			r, err := pr.b.conn.Recv(dst, 0, n)
			require.NoError(t, err)
			snd, err := pr.a.conn.Send(src, 0, n)
			require.NoError(t, err)
			_, err = r.Wait(ctx)
			require.NoError(t, err)
			_, err = snd.Wait(ctx)
			require.NoError(t, err)
			require.Equal(t, -1, firstDiff(src.Bytes(), dst.Bytes()), "first wrong byte")
			st := pr.a.conn.Stats()
			p0 := st.Paths[0]
			t.Logf("path 0: %d soft timeouts, %d promotions, %d give-ups; %d cells re-posted", p0.SoftTimeouts, p0.Promotions, p0.GiveUps, st.Engine.CellsReposted)
			require.Positive(t, p0.SoftTimeouts, "path 0 was never late")
			require.Positive(t, p0.Promotions, "path 0 never came back without a reset")
			require.Positive(t, st.Engine.CellsReposted, "the late cells went again")
			require.Zero(t, st.Paths[1].GiveUps)
		})
	}
}

// The slow-path late-copy case over real providers. In every repetition
// path 0 holds its requests far longer than T_soft, so its cells are given
// up: the range is held, and its cells re-posted on path 1 if the
// originals are still in flight, and resetting the path delivers them
// late. Both ends reuse their memory the
// moment a range is handed back: the sender scribbles over its source,
// the receiver checks its range and scribbles over it. Ranges rotate over
// a few slots, and a slot must still hold the receiver's scribble when it
// is posted again: a late copy that landed after the hand-back, or that
// read the source after it, shows as a wrong byte.
func TestLateCopiesNeverCorrupt(t *testing.T) {
	const reps, slots, n = 60, 4, 64 << 10
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			pr := sprayPair(t, p, 5*time.Millisecond)
			ctx := bounded(t)
			src, dst := pr.a.region(slots*n), pr.b.region(slots*n)
			want, scribble := make([]byte, n), bytes.Repeat([]byte{0xEE}, n)
			for i := range slots {
				copy(dst.Bytes()[i*n:], scribble)
			}
			slow := pr.a.qp(0)
			pathUp := func(what string) {
				for pr.a.conn.Stats().Paths[0].State != cell.PathUp || pr.b.conn.Stats().Paths[0].State != cell.PathUp {
					require.NoError(t, ctx.Err(), "%s: path 0 never came back", what)
					time.Sleep(time.Millisecond)
				}
			}
			for rep := range reps {
				off := rep % slots * n
				s, d := src.Bytes()[off:off+n], dst.Bytes()[off:off+n]
				require.Equal(t, -1, firstDiff(scribble, d), "rep %d: slot %d written after it was handed back", rep, rep%slots)
				fill(s, uint64(rep))
				fill(want, uint64(rep))
				pathUp(fmt.Sprint("rep ", rep))
				giveUps := pr.a.conn.Stats().Engine.GiveUps
				slow.Inject(fault.Fault{Kind: fault.Delay, Delay: 100 * time.Millisecond})
				r, err := pr.b.conn.Recv(dst, off, n)
				require.NoError(t, err)
				snd, err := pr.a.conn.Send(src, off, n)
				require.NoError(t, err)
				// Once path 0 is given up, let its reset through at once;
				// the requests it holds keep their delay.
				for pr.a.conn.Stats().Engine.GiveUps == giveUps {
					require.NoError(t, ctx.Err(), "rep %d: path 0 never given up\nsender %+v\nreceiver %+v", rep, pr.a.conn.Stats(), pr.b.conn.Stats())
					time.Sleep(time.Millisecond)
				}
				slow.Inject(fault.Fault{})
				got, err := r.Wait(ctx)
				require.NoError(t, err, "rep %d", rep)
				require.Equal(t, n, got)
				require.Equal(t, -1, firstDiff(want, d), "rep %d: first wrong byte", rep)
				copy(d, scribble)
				_, err = snd.Wait(ctx)
				require.NoError(t, err, "rep %d", rep)
				clear(s)
			}
			pathUp("the end")
			for i := range slots {
				require.Equal(t, -1, firstDiff(scribble, dst.Bytes()[i*n:(i+1)*n]), "slot %d written after it was handed back", i)
			}
			st := slow.Stats()
			sa, sb := pr.a.conn.Stats(), pr.b.conn.Stats()
			t.Logf("path 0: %d late copies; sender: %d give-ups, %d holds (%d done), %d re-posts, %d resets; receiver: %d duplicates",
				st.Late, sa.Engine.GiveUps, sa.Engine.Holds, sa.Engine.HoldsDone, sa.Engine.CellsReposted, sa.Resets, sb.Engine.Duplicates)
			require.NotZero(t, st.Late, "late copies landed while the test ran")
			// Every range carried its tail, so a give-up that sent a cell
			// back held its range first: the receiver answered done if
			// the late copies had landed by then (nothing is written
			// again), held if not (the cells go again, and the late
			// copies land after them).
			require.NotZero(t, sa.Engine.Holds)
			require.True(t, sa.Engine.CellsReposted == 0 || sa.Engine.Holds > sa.Engine.HoldsDone,
				"cells went again only for ranges held")
			require.Zero(t, sa.Engine.RangesFailed+sb.Engine.RangesFailed)
		})
	}
}

// The receiver's records take longer than T_soft's floor: every request
// of B (its tokens, grants and hold acks) is delayed by 60 ms, where the
// floor is 50 ms. That is a healthy path, only slow, as a record is that
// waits behind a 4 MiB cell on a 300 Mbit/s link; yet an end that sends
// no cells has T_soft at its floor on every path, and so has a path just
// reset. (A's floor is high: its cells, whose tokens are as slow, are not
// what this is about.) Path 1's link then goes down, its resets failing,
// and comes back as slow as before. Nothing may loop: every range
// arrives whole, path 1 is used again once its link is back, and the
// watch on B's records gives each path up a few times at most, not once
// for every record that rides it.
func TestSlowRecordsConverge(t *testing.T) {
	if testing.Short() {
		t.Skip("a few seconds of slow paths and a link down")
	}
	const slowPath, ranges = 1, 64
	cfgA, cfgB := testConfig(), testConfig()
	cfgA.Engine.MinSoftTimeout = 5 * time.Second
	pr := dialPairEach(t, runtime.NumGoroutine(), openEnd(t, providers[1], "A"), openEnd(t, providers[1], "B"), cfgA, cfgB)
	ctx := bounded(t)
	slow := fault.Fault{Kind: fault.Delay, Delay: 60 * time.Millisecond}
	for i := range cfgB.Paths {
		pr.b.qp(i).Inject(slow)
	}
	run := func() { stream(ctx, t, pr.a, pr.b, ranges<<19, 1<<19, 4, -1, nil) }
	run()
	pr.a.qp(slowPath).Inject(fault.Fault{Kind: fault.Drop})
	pr.b.qp(slowPath).Inject(fault.Fault{Kind: fault.Drop})
	run()
	back := pr.a.conn.Stats().Paths[slowPath].Tokens
	pr.a.qp(slowPath).Inject(fault.Fault{})
	pr.b.qp(slowPath).Inject(slow)
	for pr.a.conn.Stats().Paths[slowPath].Tokens == back {
		require.NoError(t, ctx.Err(), "path %d never acknowledged a cell after its link came back", slowPath)
		run()
	}
	before := pr.b.conn.Stats().Engine.GiveUps
	run()
	after := pr.b.conn.Stats()
	for i, ps := range after.Paths {
		t.Logf("B path %d: %v, %d give-ups", i, ps.State, ps.GiveUps)
	}
	// Each give-up of the watch doubles the time records get on its path:
	// by now a path is given up once more at most (one that never was
	// still judges by the floor), and a stall of the machine may cost one.
	require.LessOrEqual(t, after.Engine.GiveUps-before, uint64(2*cfgB.Paths), "B gave up paths for %d ranges", ranges)
	require.Zero(t, after.DeadPaths)
}

// Every request on every path takes longer than T_soft's floor: a fault
// delay of 80 ms at both ends, where the floor is 50 ms, on cells,
// tokens and records alike, as on a loaded fabric whose paths every
// connection starts fresh on. The paths are given up at first, and come
// back with T_soft at its floor; nothing may loop so that a transfer
// never ends, as one did in the lab after a link had been down: the
// range's last cell was re-posted on a path just reset each time, which
// was given up again before the cell's token could return, because a
// record written on it had not completed within the floor.
func TestSlowFabricTransferCompletes(t *testing.T) {
	p := providers[1]
	cfg := testConfig()
	pr := newPair(t, p, cfg)
	ctx := bounded(t)
	slow := fault.Fault{Kind: fault.Delay, Delay: 80 * time.Millisecond}
	for i := range cfg.Paths {
		pr.a.qp(i).Inject(slow)
		pr.b.qp(i).Inject(slow)
	}
	stream(ctx, t, pr.a, pr.b, 32<<20, 4<<20, 4, -1, nil)
	for _, e := range []*end{pr.a, pr.b} {
		st := e.conn.Stats()
		t.Logf("%s: %d give-ups", e.name, st.Engine.GiveUps)
		require.Zero(t, st.DeadPaths, "%s: no path closed for good", e.name)
	}
}

// sprayPair is a connection of two paths over p whose ranges of more than
// one 16 KiB cell put cells on path 0, with T_soft's floor at floor.
func sprayPair(t *testing.T, p provider, floor time.Duration) *pair {
	cfg := testConfig()
	cfg.Paths = 2
	cfg.Policy = "spray"
	cfg.CellSize = 16 << 10
	cfg.Engine.MinSoftTimeout = floor
	return newPair(t, p, cfg)
}
