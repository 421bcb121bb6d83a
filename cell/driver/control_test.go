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

// The control channel has a lane per path. With one lane black-holed at
// one end (a dead route under it: its messages are held, not failed) and
// another failed outright at the other, a path killed in mid-transfer is
// still reset through the lanes left, and no range is lost. When the
// black hole lifts, its late copies of messages long since delivered are
// dropped, and the next reset goes through as well.
func TestResetThroughSurvivingLanes(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			cfg := testConfig()
			pr := newPair(t, p, cfg)
			require.Len(t, pr.a.conn.ctl.lanes, cfg.Paths)
			ctx := bounded(t)
			stream(ctx, t, pr.a, pr.b, 32<<20, 2<<20, 4, 3, func() {
				pr.a.lane(0).Inject(fault.Fault{Kind: fault.Stall})
				pr.b.lane(1).Inject(fault.Fault{Kind: fault.Kill})
				pr.a.qp(2).Inject(fault.Fault{Kind: fault.Kill})
			})
			pathBack(t, pr, 2)

			pr.a.lane(0).Inject(fault.Fault{})
			stream(ctx, t, pr.a, pr.b, 32<<20, 2<<20, 4, 3, func() {
				pr.b.qp(3).Inject(fault.Fault{Kind: fault.Kill})
			})
			pathBack(t, pr, 3)
			for _, e := range []*end{pr.a, pr.b} {
				st := e.conn.Stats()
				require.Zero(t, st.DeadPaths, "%s: no path declared dead", e.name)
				require.NoError(t, e.conn.Err(), e.name)
			}
			require.True(t, pr.b.conn.ctl.lanes[1].down, "B's killed lane is down")
			require.False(t, pr.a.conn.ctl.down)
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
