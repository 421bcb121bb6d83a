package comm

import (
	"math"
	"syscall"
	"testing"
	"time"

	"github.com/rdmacell/rdmacell/bootstrap"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// cpuTime is the CPU time this process has used.
func cpuTime(t *testing.T) time.Duration {
	var ru syscall.Rusage
	require.NoError(t, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// pumpsParked reports that every peer of c has nothing in progress and
// its goroutine blocks waiting, with no kick pending that would wake it.
func pumpsParked(c *Comm) bool {
	for _, p := range c.w.peers {
		if p.self {
			continue
		}
		p.mu.Lock()
		busy := p.live != nil || p.pend.len() > 0 || p.sdone != p.sseq || p.brecvF.len() > 0 || p.bsendF.len() > 0
		p.mu.Unlock()
		if busy || !p.parked.Load() || len(p.kick) > 0 {
			return false
		}
	}
	return true
}

// idleRenewals is how many lease renewals the idle window of
// TestIdleParks spans: the window is counted in renewals, not in time, so
// that the test needs no timing threshold. Two span about two thirds of a
// lease TTL, long enough for the cell connections' keepalive rounds (one
// a second while ranges are outstanding) to show.
const idleRenewals = 2

// awaitRenewals waits until the lease of every rank has been renewed n
// more times.
func awaitRenewals(t *testing.T, comms []*Comm, n uint64, deadline time.Time) {
	t.Helper()
	start := make([]uint64, len(comms))
	for r, c := range comms {
		start[r] = c.w.job.Activity().Renewals
	}
	for r, c := range comms {
		for c.w.job.Activity().Renewals < start[r]+n {
			require.True(t, time.Now().Before(deadline), "rank %d: the lease was not renewed", r)
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// idleSnapshot is what woke the goroutines of one rank so far.
type idleSnapshot struct {
	job   bootstrap.Activity
	wakes []uint64          // per peer, its pump's wake-ups
	links [][2]linkProgress // per peer, its control and bulk links
}

func snapshotIdle(c *Comm) idleSnapshot {
	s := idleSnapshot{job: c.w.job.Activity()}
	for _, p := range c.w.peers {
		var lp [2]linkProgress
		if !p.self {
			lp = [2]linkProgress{p.ctl.progress(), p.bulk.progress()}
		}
		s.wakes = append(s.wakes, p.wakes.Load())
		s.links = append(s.links, lp)
	}
	return s
}

// An idle communicator parks every goroutine it has: its peers' pumps and
// the connections' progress goroutines. Over an idle window no pump wakes
// up at all, and every link that was parked when the window opened is
// still parked and never woke; the bootstrap only renews the lease. The
// CPU time of the window is logged, not asserted: the machine may be busy
// with other work.
func TestIdleParks(t *testing.T) {
	for _, tr := range transports {
		t.Run(string(tr), func(t *testing.T) {
			comms := startComms(t, 3, tr, nil)
			onEach(t, comms, func(c *Comm) error {
				ctx := bounded(t)
				s, err := c.Isend((c.Rank()+1)%3, 1, make([]byte, 3<<20))
				if err != nil {
					return err
				}
				if _, err := c.Recv(ctx, (c.Rank()+2)%3, 1, make([]byte, 3<<20)); err != nil {
					return err
				}
				_, err = s.Wait(ctx)
				return err
			})
			deadline := time.Now().Add(testTimeout)
			for _, c := range comms {
				for !pumpsParked(c) {
					require.True(t, time.Now().Before(deadline), "rank %d: the peers' goroutines never parked", c.Rank())
					time.Sleep(5 * time.Millisecond)
				}
			}

			// The window opens one renewal later: a connection may park
			// before the last completions of its transfer (a signaled
			// token write, say) have come back, and wake once for them.
			awaitRenewals(t, comms, 1, deadline)
			before := make([]idleSnapshot, len(comms))
			for r, c := range comms {
				before[r] = snapshotIdle(c)
			}
			cpu0, wall0 := cpuTime(t), time.Now()
			awaitRenewals(t, comms, idleRenewals, deadline)
			cpu, wall := cpuTime(t)-cpu0, time.Since(wall0)
			t.Logf("CPU time of %d idle ranks (and the embedded etcd) over %v: %v", len(comms), wall.Round(time.Millisecond), cpu)

			// A link keeps the receives of its stream posted, so its
			// connection rests between looks at its paths, every few
			// seconds, and wakes for the probe it then sends and for its
			// peer's: never more than a few wake-ups a second.
			limit := 4*uint64(math.Ceil(wall.Seconds())) + 4
			for r, c := range comms {
				after := snapshotIdle(c)
				t.Logf("rank %d: bootstrap over the window: %d renewals, %d watch responses",
					r, after.job.Renewals-before[r].job.Renewals, after.job.WatchResponses-before[r].job.WatchResponses)
				for q := range after.wakes {
					if q == r {
						continue
					}
					assert.Equal(t, before[r].wakes[q], after.wakes[q], "rank %d: the pump of peer %d woke up while idle", r, q)
					for i, name := range []string{"control", "bulk"} {
						b, a := before[r].links[q][i], after.links[q][i]
						t.Logf("rank %d peer %d: the %s link woke %d times, %d keepalive rounds", r, q, name, a.Parks-b.Parks, a.Keepalives-b.Keepalives)
						assert.True(t, b.Parked, "rank %d peer %d: the %s link rests when the window opens", r, q, name)
						assert.LessOrEqual(t, a.Parks-b.Parks, limit, "rank %d peer %d: the %s link woke up %d times in %v idle", r, q, name, a.Parks-b.Parks, wall)
					}
				}
			}
			for _, c := range comms {
				require.Eventually(t, c.idle, testTimeout/2, time.Millisecond, "rank %d: every goroutine of the communicator rests", c.Rank())
			}
		})
	}
}

// TestMessagesDoNotWakePumps exchanges messages, small (eager) and large
// (RTS, CTS and bulk ranges): a completed range is acted on by the
// progress goroutine of the link that found it, and a post by its
// caller, so the peers' pumps sleep through the whole exchange. Each
// message woke a pump twice when the pump waited on the ranges.
func TestMessagesDoNotWakePumps(t *testing.T) {
	for _, tr := range transports {
		t.Run(string(tr), func(t *testing.T) {
			const rounds = 50
			comms := startComms(t, 2, tr, nil)
			ctx := bounded(t)
			for _, n := range []int{8, 256 << 10} {
				bufs := [2][]byte{make([]byte, n), make([]byte, n)}
				exchange := func(k int) {
					done := make(chan error, 1)
					go func() {
						for range k {
							if _, err := comms[1].Recv(ctx, 0, 1, bufs[1]); err != nil {
								done <- err
								return
							}
							if err := comms[1].Send(ctx, 0, 1, bufs[1]); err != nil {
								done <- err
								return
							}
						}
						done <- nil
					}()
					for range k {
						require.NoError(t, comms[0].Send(ctx, 1, 1, bufs[0]))
						_, err := comms[0].Recv(ctx, 1, 1, bufs[0])
						require.NoError(t, err)
					}
					require.NoError(t, <-done)
				}
				exchange(1) // connects
				before := [2]uint64{comms[0].w.peers[1].wakes.Load(), comms[1].w.peers[0].wakes.Load()}
				exchange(rounds)
				woke := comms[0].w.peers[1].wakes.Load() - before[0] + comms[1].w.peers[0].wakes.Load() - before[1]
				t.Logf("%d round trips of %d bytes: the pumps woke %d times", rounds, n, woke)
				assert.Less(t, woke, uint64(rounds/5), "pump wake-ups over %d round trips of %d bytes", rounds, n)
			}
		})
	}
}
