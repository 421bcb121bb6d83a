package driver

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/cell"
	"github.com/rdmacell/rdmacell/verbs"
	"github.com/rdmacell/rdmacell/verbs/fault"
)

// stream moves the whole of src into dst as ranges of rangeLen bytes,
// keeping up to inflight of them outstanding, and calls mid once, after
// range at has completed while later ones are in flight. Every range must
// complete exactly once (an Op completing twice would panic), with its
// full length.
func stream(ctx context.Context, t testing.TB, from, to *end, srcLen, rangeLen, inflight, at int, mid func()) {
	t.Helper()
	src, dst := from.region(srcLen), to.region(srcLen)
	fill(src.Bytes(), 0xC0FFEE)
	n := srcLen / rangeLen
	sends, recvs := make([]*Op, n), make([]*Op, n)
	wait := func(i int) {
		got, err := sends[i].Wait(ctx)
		require.NoError(t, err, "send range %d\nsender %+v\nreceiver %+v", i, from.conn.Stats(), to.conn.Stats())
		require.Equal(t, rangeLen, got, "send range %d", i)
		got, err = recvs[i].Wait(ctx)
		require.NoError(t, err, "receive range %d\nsender %+v\nreceiver %+v", i, from.conn.Stats(), to.conn.Stats())
		require.Equal(t, rangeLen, got, "receive range %d", i)
	}
	for i := range n {
		if i >= inflight {
			wait(i - inflight)
			if i-inflight == at {
				mid()
			}
		}
		var err error
		recvs[i], err = to.conn.Recv(dst, i*rangeLen, rangeLen)
		require.NoError(t, err)
		sends[i], err = from.conn.Send(src, i*rangeLen, rangeLen)
		require.NoError(t, err)
	}
	for i := max(n-inflight, 0); i < n; i++ {
		wait(i)
	}
	d := firstDiff(src.Bytes(), dst.Bytes())
	require.Equal(t, -1, d, "first wrong byte (range %d)", d/rangeLen)
}

// 256 MiB cross four paths while one of them is killed half-way: every
// byte arrives, every range is delivered once, and the path is reset and
// used again.
func TestKillPathHalfway(t *testing.T) {
	const total, rangeLen = 256 << 20, 8 << 20
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			// A reset the machine's load started may be under way when the
			// kill lands: the reset then starts over.
			pr := newPair(t, p, testConfig())
			ctx := bounded(t)
			stream(ctx, t, pr.a, pr.b, total, rangeLen, 8, total/rangeLen/2-8, func() {
				pr.a.qp(1).Inject(fault.Fault{Kind: fault.Kill})
			})
			sa, sb := pr.a.conn.Stats(), pr.b.conn.Stats()
			t.Logf("sender: %+v", sa.Engine)
			for i, ps := range sa.Paths {
				t.Logf("path %d: %d bytes in %d cells, gen %d", i, ps.BytesPosted, ps.CellsPosted, ps.Gen)
			}
			require.EqualValues(t, total/rangeLen, sa.Engine.RangesSent)
			require.EqualValues(t, total/rangeLen, sb.Engine.RangesReceived)
			require.Zero(t, sa.Engine.RangesFailed+sb.Engine.RangesFailed)
			require.GreaterOrEqual(t, sa.Engine.GiveUps, uint64(1), "the killed path was given up")
			require.GreaterOrEqual(t, sa.ResetsStarted, uint64(1), "and reset")
			require.Zero(t, sa.DeadPaths+sb.DeadPaths, "no path died for good")
			require.NoError(t, pr.a.conn.Err())
		})
	}
}

// A path whose reset fails after both QPs left their old incarnation (its
// QP dies before it is connected again, as a QP whose new connection
// cannot be made does) is reset again with a new incarnation instead of
// being closed for good; the peer, waiting in the failed attempt, joins
// the new one; nothing is lost.
func TestResetStartsOverWhenConnectingFails(t *testing.T) {
	const total, rangeLen = 64 << 20, 4 << 20
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			cfg := testConfig()
			// Only the injected faults reset paths.
			cfg.Engine.MinSoftTimeout = 5 * time.Second
			// Round robin, so that the path readmitted surely carries cells.
			cfg.Policy = "spray"
			pr := newPair(t, p, cfg)
			ctx := bounded(t)
			const q = 2
			stream(ctx, t, pr.a, pr.b, total, rangeLen, 4, total/rangeLen/2, func() {
				// B's control messages are held, so A's reset of the path
				// waits for B's endpoint with its QP in INIT...
				pr.b.injectControl(fault.Fault{Kind: fault.Stall})
				pr.a.qp(q).Inject(fault.Fault{Kind: fault.Kill})
				require.Eventually(t, func() bool {
					return pr.a.conn.Stats().Paths[q].Resetting && pr.a.qp(q).State() == verbs.StateInit
				}, testTimeout/2, time.Millisecond, "A's reset of path %d reached INIT", q)
				// ...where the QP dies: connecting it once B's endpoint is in
				// fails.
				pr.a.qp(q).Inject(fault.Fault{Kind: fault.Kill})
				pr.b.injectControl(fault.Fault{})
			})
			require.Eventually(t, func() bool {
				st := pr.a.conn.Stats().Paths[q]
				return !st.Resetting && st.State == cell.PathUp
			}, testTimeout/2, time.Millisecond, "path %d is back at A", q)
			sa, sb := pr.a.conn.Stats(), pr.b.conn.Stats()
			t.Logf("A: %d resets started, %d started over; B: %d, %d", sa.ResetsStarted, sa.ResetsAgain, sb.ResetsStarted, sb.ResetsAgain)
			require.GreaterOrEqual(t, sa.ResetsAgain, uint64(1), "A's failed attempt started over")
			require.Zero(t, sa.DeadPaths+sb.DeadPaths, "no path was closed for good")
			require.Zero(t, sa.Engine.RangesFailed+sb.Engine.RangesFailed)
			// And the path carries cells again.
			before := sa.Paths[q].CellsPosted
			stream(ctx, t, pr.a, pr.b, 16<<20, 1<<20, 8, -1, nil)
			require.Greater(t, pr.a.conn.Stats().Paths[q].CellsPosted, before, "path %d is used again", q)
		})
	}
}
