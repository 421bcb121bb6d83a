package driver

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/cell"
	"github.com/rdmacell/rdmacell/verbs/fault"
)

// lane returns the fault wrapper of lane i of the control channel.
func (e *end) lane(i int) *fault.QP { return e.conn.ctl.lanes[i].qp.(*fault.QP) }

// pathBack waits until path q has been reset at both ends and is up
// again.
func pathBack(t *testing.T, pr *pair, q int) {
	t.Helper()
	require.Eventually(t, func() bool {
		a, b := pr.a.conn.Stats().Paths[q], pr.b.conn.Stats().Paths[q]
		return a.Gen > 0 && b.Gen == a.Gen && a.State == cell.PathUp && b.State == cell.PathUp
	}, testTimeout/2, 5*time.Millisecond, "path %d reset at both ends and up again", q)
}

// laneBack waits until both ends have lane i up at incarnation gen.
func laneBack(t *testing.T, pr *pair, i int, gen uint32) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, e := range []*end{pr.a, pr.b} {
			e.conn.mu.Lock()
			l := e.conn.ctl.lanes[i]
			up := !l.down && l.gen == gen
			e.conn.mu.Unlock()
			if !up {
				return false
			}
		}
		return true
	}, testTimeout/2, 5*time.Millisecond, "control lane %d at incarnation %d at both ends", i, gen)
}

// The control channel has two lanes. With one black-holed at one end (a
// dead route under it: its messages are held, not failed), a path killed
// in mid-transfer is still reset through the other, and no range is
// lost. When the black hole lifts, its late copies of messages long
// since delivered are dropped; the other lane is then killed, is repaired
// through the first, and the next reset goes through as well.
func TestResetThroughSurvivingLanes(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			cfg := testConfig()
			pr := newPair(t, p, cfg)
			require.Len(t, pr.a.conn.ctl.lanes, maxLanes)
			ctx := bounded(t)
			stream(ctx, t, pr.a, pr.b, 32<<20, 2<<20, 4, 3, func() {
				pr.a.lane(0).Inject(fault.Fault{Kind: fault.Stall})
				pr.a.qp(2).Inject(fault.Fault{Kind: fault.Kill})
			})
			pathBack(t, pr, 2)

			pr.a.lane(0).Inject(fault.Fault{})
			pr.b.lane(1).Inject(fault.Fault{Kind: fault.Kill})
			laneBack(t, pr, 1, 1)
			stream(ctx, t, pr.a, pr.b, 32<<20, 2<<20, 4, 3, func() {
				pr.b.qp(3).Inject(fault.Fault{Kind: fault.Kill})
			})
			pathBack(t, pr, 3)
			for _, e := range []*end{pr.a, pr.b} {
				st := e.conn.Stats()
				require.Zero(t, st.DeadPaths, "%s: no path declared dead", e.name)
				require.NoError(t, e.conn.Err(), e.name)
				require.Equal(t, 2, st.LanesUp, e.name)
				require.EqualValues(t, 1, st.LaneRepairs, e.name)
			}
		})
	}
}

// Lanes are repaired over and over, one at a time, each killed at either
// end, while ranges stream and paths are reset: every reset and every
// byte goes through, and after each round both lanes are up again at the
// incarnation both ends agree on. The messages sent while a lane was down
// reach the peer on it too (it sends what the peer has not acknowledged),
// so that killing the other lane right after loses nothing.
func TestLaneRepair(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			cfg := testConfig()
			pr := newPair(t, p, cfg)
			ctx := bounded(t)
			gens := [maxLanes]uint32{}
			for round := range 6 {
				i := round % maxLanes
				killer := []*end{pr.a, pr.b}[round/2%2]
				q := round % cfg.Paths
				stream(ctx, t, pr.a, pr.b, 8<<20, 1<<20, 4, 2, func() {
					killer.lane(i).Inject(fault.Fault{Kind: fault.Kill})
					pr.a.qp(q).Inject(fault.Fault{Kind: fault.Kill})
				})
				gens[i]++
				laneBack(t, pr, i, gens[i])
				pathBack(t, pr, q)
			}
			for _, e := range []*end{pr.a, pr.b} {
				st := e.conn.Stats()
				require.Zero(t, st.DeadPaths, "%s: no path declared dead", e.name)
				require.NoError(t, e.conn.Err(), e.name)
				require.EqualValues(t, 6, st.LaneRepairs, e.name)
				e.conn.mu.Lock()
				require.LessOrEqual(t, len(e.conn.ctl.sent), 8, "%s: acknowledged messages are forgotten", e.name)
				e.conn.mu.Unlock()
			}
		})
	}
}

// A path whose new incarnation cannot come back (every request this end
// posts on it is held, like a new connection hashed onto a dead route)
// does not hold up the transfer: the other paths carry it while the path
// is still being reset. (That ranges are released as soon as both QPs
// have been through ERR, not when the path is back, is checked on the
// engine, in TestQuietPathReleasesRangesBeforeItsReset; here the late
// copies the reset delivers are acknowledged in time often enough to
// hide it.)
func TestRangesFinishWhileAPathReconnects(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.Policy = "spray" // cells go on path 1 once it is held
			pr := newPair(t, p, cfg)
			ctx := bounded(t)
			stream(ctx, t, pr.a, pr.b, 32<<20, 2<<20, 4, 3, func() {
				pr.a.qp(1).Inject(fault.Fault{Kind: fault.Stall})
			})
			st := pr.a.conn.Stats()
			require.NotZero(t, st.Engine.GiveUps, "path 1 was given up")
			require.NotEqual(t, cell.PathUp, st.Paths[1].State, "path 1 is not back while its requests are held")
			pr.a.qp(1).Inject(fault.Fault{})
			pathBack(t, pr, 1)
			stream(ctx, t, pr.a, pr.b, 8<<20, 2<<20, 4, -1, nil)
		})
	}
}

// A repaired lane first sends again what the peer has not acknowledged.
// Here both ends' lane 1 carries the handshake that repairs lane 0 and
// then holds everything: B's RTS message for lane 0 reaches A only
// because B sends it again on lane 0 once that is up at B's end. A path
// killed after that is reset over lane 0 alone, and when lane 1 lets its
// held messages go, their copies are dropped.
func TestRepairedLaneSendsWhatWasNotTaken(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			pr := newPair(t, p, testConfig())
			pr.a.lane(1).Inject(fault.Fault{Kind: fault.Stall, After: 2}) // A's endpoint and RTS for lane 0
			pr.b.lane(1).Inject(fault.Fault{Kind: fault.Stall, After: 1}) // B's endpoint for lane 0
			pr.a.lane(0).Inject(fault.Fault{Kind: fault.Kill})
			laneBack(t, pr, 0, 1)
			require.NotZero(t, pr.b.lane(1).Stats().Held, "B's RTS message for lane 0 is held on lane 1")

			pr.a.qp(1).Inject(fault.Fault{Kind: fault.Kill})
			pathBack(t, pr, 1)
			pr.a.lane(1).Inject(fault.Fault{})
			pr.b.lane(1).Inject(fault.Fault{})
			stream(bounded(t), t, pr.a, pr.b, 8<<20, 1<<20, 4, -1, nil)
			for _, e := range []*end{pr.a, pr.b} {
				st := e.conn.Stats()
				require.Zero(t, st.ResetsAgain, "%s: the path's reset went through at the first attempt", e.name)
				require.Equal(t, 2, st.LanesUp, e.name)
				require.NoError(t, e.conn.Err(), e.name)
			}
		})
	}
}
