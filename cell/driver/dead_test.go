package driver

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/cell"
	"github.com/rdmacell/rdmacell/verbs/fault"
)

// injectControl injects f into every lane of the control channel.
func (e *end) injectControl(f fault.Fault) {
	for _, l := range e.conn.ctl.lanes {
		l.qp.(*fault.QP).Inject(f)
	}
}

// inFlight posts k ranges of n bytes from one end to the other and
// returns their Ops.
func inFlight(t *testing.T, from, to *end, k, n int) (sends, recvs []*Op) {
	t.Helper()
	src, dst := from.region(k*n), to.region(k*n)
	fill(src.Bytes(), 7)
	for i := range k {
		r, err := to.conn.Recv(dst, i*n, n)
		require.NoError(t, err)
		s, err := from.conn.Send(src, i*n, n)
		require.NoError(t, err)
		sends, recvs = append(sends, s), append(recvs, r)
	}
	return sends, recvs
}

// requireFailed waits for every op and requires it to have failed with
// an error satisfying check.
func requireFailed(ctx context.Context, t *testing.T, ops []*Op, check func(error)) {
	t.Helper()
	for i, o := range ops {
		_, err := o.Wait(ctx)
		require.NoError(t, ctx.Err(), "op %d did not complete", i)
		require.Error(t, err, "op %d", i)
		check(err)
	}
}

// requireDone waits for every op; those that failed must satisfy check.
// It returns how many failed.
func requireDone(ctx context.Context, t *testing.T, ops []*Op, check func(error)) int {
	t.Helper()
	failed := 0
	for i, o := range ops {
		_, err := o.Wait(ctx)
		require.NoError(t, ctx.Err(), "op %d did not complete", i)
		if err != nil {
			check(err)
			failed++
		}
	}
	return failed
}

// requireNoPath checks a failure for want of paths, naming the peer.
func requireNoPath(t *testing.T, peer string) func(error) {
	return func(err error) {
		require.ErrorIs(t, err, cell.ErrNoPath)
		var np *cell.NoPathError
		require.ErrorAs(t, err, &np)
		require.Equal(t, peer, np.Peer)
		require.Contains(t, err.Error(), "peer "+peer)
	}
}

// Every path dies and none can be reset (the control channel is stalled
// at one end): every range in flight ends, at both ends, and those that
// fail fail with an error naming the peer and each path, once the resets
// time out; the connection fails the same way. A range whose every cell
// had landed may still succeed: once the peer's QPs have been through ERR
// (its endpoint messages still arrive) nothing can land any more, and the
// quarantine lifts. Nothing hangs.
func TestEveryPathDead(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.ResetTimeout = time.Second
			pr := newPair(t, p, cfg)
			ctx := bounded(t)
			// Stalled first, so that the ranges cannot all have moved
			// before the paths die.
			for i := range cfg.Paths {
				pr.a.qp(i).Inject(fault.Fault{Kind: fault.Stall})
			}
			sends, recvs := inFlight(t, pr.a, pr.b, 8, 4<<20)
			pr.a.injectControl(fault.Fault{Kind: fault.Stall})
			for i := range cfg.Paths {
				pr.a.qp(i).Inject(fault.Fault{Kind: fault.Kill})
			}
			failed := requireDone(ctx, t, sends, requireNoPath(t, "B"))
			requireDone(ctx, t, recvs, requireNoPath(t, "A"))
			require.NotZero(t, failed, "ranges in flight when every path died")
			err := pr.a.conn.Err()
			require.ErrorIs(t, err, cell.ErrNoPath)
			for q := range cfg.Paths {
				require.Contains(t, err.Error(), "path "+string(rune('0'+q)))
			}
			_, err = pr.a.conn.Send(pr.a.region(1), 0, 1)
			require.ErrorIs(t, err, cell.ErrNoPath, "a failed connection refuses new ranges")
			require.EqualValues(t, cfg.Paths, pr.a.conn.Stats().DeadPaths)
		})
	}
}

// A path whose reset cannot finish is declared dead after ResetTimeout;
// the others carry everything.
func TestUnresettablePathDeclaredDead(t *testing.T) {
	p := providers[1]
	cfg := testConfig()
	cfg.ResetTimeout = time.Second
	// No other path is given up for a pause of the machine: with the
	// control channel stalled, it could not come back either.
	cfg.Engine.MinSoftTimeout = 5 * time.Second
	pr := newPair(t, p, cfg)
	ctx := bounded(t)
	stream(ctx, t, pr.a, pr.b, 32<<20, 2<<20, 4, 3, func() {
		pr.a.injectControl(fault.Fault{Kind: fault.Stall})
		pr.a.qp(2).Inject(fault.Fault{Kind: fault.Kill})
	})
	dead := func(e *end) {
		require.Eventually(t, func() bool { return e.conn.Stats().Paths[2].Dead }, testTimeout/2, 5*time.Millisecond,
			"%s: path 2 declared dead", e.name)
	}
	dead(pr.a)
	// The peer's QP may not have noticed (a QP with nothing posted learns
	// nothing): it hears once the control channel flows again.
	pr.a.injectControl(fault.Fault{})
	dead(pr.b)
	require.NoError(t, pr.a.conn.Err())
	st := pr.a.conn.Stats()
	require.EqualValues(t, 1, st.DeadPaths)
	require.Equal(t, cell.PathDead, st.Paths[2].State)
}

// The peer aborts in the middle of a transfer: its ranges fail with its
// reason, and this end's fail for want of paths, naming the peer.
func TestPeerAborts(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.Engine.MinSoftTimeout = 5 * time.Second
			cfg.Policy = "spray" // every range puts a cell on path 0
			pr := newPair(t, p, cfg)
			ctx := bounded(t)
			// Path 0 holds what it is given: no range can finish before
			// the abort.
			pr.a.qp(0).Inject(fault.Fault{Kind: fault.Stall})
			sends, recvs := inFlight(t, pr.a, pr.b, 8, 4<<20)
			reason := errors.New("the job is being torn down")
			pr.b.conn.Abort(reason)
			requireFailed(ctx, t, recvs, func(err error) {
				require.ErrorIs(t, err, ErrAborted)
				require.ErrorIs(t, err, reason)
			})
			requireFailed(ctx, t, sends, requireNoPath(t, "B"))
		})
	}
}

// Close and Abort in the middle of a transfer: every range in flight
// fails (nothing hangs), the peer's with an error naming this end, and
// no goroutine is left behind (checked when the pair is torn down).
func TestCloseAndAbortDuringTraffic(t *testing.T) {
	for _, p := range providers {
		for _, how := range []string{"close", "abort"} {
			t.Run(p.name+"/"+how, func(t *testing.T) {
				cfg := testConfig()
				cfg.Engine.MinSoftTimeout = 5 * time.Second
				pr := newPair(t, p, cfg)
				ctx := bounded(t)
				// Path 0 holds what it is given, so the ranges with a cell
				// on it cannot finish before the end.
				pr.a.qp(0).Inject(fault.Fault{Kind: fault.Stall})
				sends, recvs := inFlight(t, pr.a, pr.b, 16, 1<<20)
				for pr.b.conn.Stats().Engine.TokensSent == 0 { // traffic is flowing
					require.NoError(t, ctx.Err())
					time.Sleep(time.Millisecond)
				}
				reason := errors.New("test ends the connection")
				if how == "close" {
					require.NoError(t, closeBounded(pr.a.conn))
				} else {
					pr.a.conn.Abort(reason)
				}
				// Ranges may finish before the end; every other one fails,
				// at both ends, and none hangs.
				failedA := requireDone(ctx, t, sends, func(err error) {
					if how == "close" {
						require.ErrorIs(t, err, ErrClosed)
					} else {
						require.ErrorIs(t, err, ErrAborted)
						require.ErrorIs(t, err, reason)
					}
				})
				failedB := requireDone(ctx, t, recvs, func(err error) {
					requireNoPath(t, "A")(err)
					if how == "close" {
						require.ErrorIs(t, err, ErrPeerClosed, "the goodbye reached the peer")
					}
				})
				t.Logf("%d of %d sends and %d receives failed", failedA, len(sends), failedB)
				require.NotZero(t, failedA)
				require.GreaterOrEqual(t, failedB, failedA, "a range the sender failed was not delivered")
				require.NoError(t, closeBounded(pr.a.conn), "a second Close is harmless")
			})
		}
	}
}
