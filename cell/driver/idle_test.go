package driver

import (
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/cell"
)

func cpuTime(t *testing.T) time.Duration {
	var ru syscall.Rusage
	require.NoError(t, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// settled says a connection rests with every path up.
func settled(st Stats) bool {
	if !st.Parked {
		return false
	}
	for _, p := range st.Paths {
		if p.Resetting || p.State != cell.PathUp {
			return false
		}
	}
	return true
}

// With nothing in flight the progress goroutines park in their CQ and
// stay parked: no wake-up, hence no CPU, over an idle second. The
// process's CPU time over that second is reported, not asserted (the
// providers' own goroutines share it).
func TestIdleConnectionParks(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			pr := newPair(t, p, testConfig())
			ctx := bounded(t)
			stream(ctx, t, pr.a, pr.b, 8<<20, 1<<20, 4, -1, nil)
			ends := []*end{pr.a, pr.b}
			for _, e := range ends {
				// A reset the machine's load set off during the transfer
				// may still be finishing: it wakes the connection when done.
				require.Eventually(t, func() bool { return settled(e.conn.Stats()) }, testTimeout/2, time.Millisecond,
					"%s: progress goroutine parks with every path up", e.name)
			}
			parks := []uint64{pr.a.conn.Stats().Parks, pr.b.conn.Stats().Parks}
			cpu0, wall0 := cpuTime(t), time.Now()
			time.Sleep(time.Second)
			cpu, wall := cpuTime(t)-cpu0, time.Since(wall0)
			t.Logf("%s: process CPU time over an idle %v: %v (%.2f%%)", p.name, wall.Round(time.Millisecond), cpu, 100*cpu.Seconds()/wall.Seconds())
			for i, e := range ends {
				st := e.conn.Stats()
				require.True(t, st.Parked, "%s: still parked", e.name)
				require.Equal(t, parks[i], st.Parks, "%s: never woke up", e.name)
				require.Zero(t, st.InFlight)
			}
			// A range posted now wakes it up and goes through.
			stream(ctx, t, pr.a, pr.b, 1<<20, 1<<20, 1, -1, nil)
		})
	}
}

// A connection with only receives posted rests too (a communicator keeps
// receives posted for good), and what they wait for still wakes it: a
// range by the completion of its last cell, which carries its tail, and
// an empty range, a final alone, which signals nothing, by the bell its
// sender rings once the final has landed. The rest is made unbounded here, so that
// only what arrives can end it (the software providers also wake a CQ
// waiter for a write that lands; an RNIC does not).
func TestReceivingConnectionParks(t *testing.T) {
	defer func(d time.Duration) { recvPark = d }(recvPark)
	recvPark = time.Hour
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			pr := newPair(t, p, testConfig())
			ctx := bounded(t)
			src, dst := pr.a.region(1<<20), pr.b.region(1<<20)
			for _, n := range []int{0, 1 << 20, 0} {
				r, err := pr.b.conn.Recv(dst, 0, 1<<20)
				require.NoError(t, err)
				require.Eventually(t, func() bool {
					st := pr.b.conn.Stats()
					return st.Parked && st.InFlight == 1
				}, testTimeout/2, time.Millisecond, "B parks with a receive posted")
				bells := pr.a.conn.Stats().Bells
				s, err := pr.a.conn.Send(src, 0, n)
				require.NoError(t, err)
				_, err = s.Wait(ctx)
				require.NoError(t, err)
				got, err := r.Wait(ctx)
				require.NoError(t, err, "a range of %d bytes", n)
				require.Equal(t, n, got)
				if n == 0 {
					// No cell to wake it: the final, followed by a bell.
					require.Eventually(t, func() bool { return pr.a.conn.Stats().Bells > bells }, testTimeout/2, time.Millisecond,
						"the final was followed by a bell")
				}
			}
		})
	}
}
