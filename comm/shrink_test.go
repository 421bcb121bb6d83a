package comm

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// shrinkAfterExit closes the last rank of comms (a rank that leaves the
// job), waits until every survivor's bootstrap knows, and returns when
// that was and the survivors' Shrink results.
func shrinkAfterExit(t testing.TB, comms []*Comm, on func(c *Comm) *Comm) (time.Time, []*Comm) {
	n := len(comms)
	victim := comms[n-1]
	require.NoError(t, victim.Close())
	deadline := time.Now().Add(30 * time.Second)
	for _, c := range comms[:n-1] {
		for c.w.job.Departed(n-1) == nil {
			require.True(t, time.Now().Before(deadline), "rank %d never saw rank %d leave", c.Rank(), n-1)
			time.Sleep(time.Millisecond)
		}
	}
	known := time.Now()
	subs := make([]*Comm, n-1)
	onEach(t, comms[:n-1], func(c *Comm) error {
		sub, err := on(c).Shrink(bounded(t))
		subs[c.w.rank] = sub
		return err
	})
	return known, subs
}

// quickExit makes the last of n ranks wait little for the others'
// goodbyes when it closes, so that it leaves the job at once.
func quickExit(n int) func(*Options) {
	return func(o *Options) {
		if o.Rank == n-1 {
			o.CloseTimeout = 50 * time.Millisecond
		}
	}
}

// The survivors of a rank that left get the same communicator of
// themselves, renumbered in their order, whose ordered channel works; the
// A communicator made by Split shrinks
// the same way. (That the old communicator stays failed after a death is
// TestProcessKill's.)
func TestShrink(t *testing.T) {
	comms := startComms(t, 5, TransportShm, quickExit(5))
	halves := make([]*Comm, 5)
	onEach(t, comms, func(c *Comm) error {
		var err error
		halves[c.Rank()], err = c.Split(bounded(t), c.Rank()%2, -c.Rank())
		return err
	})
	_, subs := shrinkAfterExit(t, comms, func(c *Comm) *Comm { return c })
	for r, sub := range subs {
		require.Equal(t, r, sub.Rank())
		require.Equal(t, 4, sub.Size())
		require.Equal(t, subs[0].ID(), sub.ID(), "one communicator")
	}
	onEach(t, subs, func(c *Comm) error {
		n, me := c.Size(), c.Rank()
		got := make([]byte, 1)
		s, err := c.P2P().Isend((me+1)%n, 9, []byte{byte(me)})
		if err != nil {
			return err
		}
		r, err := c.P2P().Irecv((me+n-1)%n, 9, got)
		if err != nil {
			return err
		}
		if err := waitAll(bounded(t), []Request{r, s}); err != nil {
			return err
		}
		if int(got[0]) != (me+n-1)%n {
			return fmt.Errorf("got %d from rank %d", got[0], (me+n-1)%n)
		}
		return nil
	})
	// The even half (4, 2, 0 by their keys) lost rank 4: 2 and 0 shrink
	// it, in that order; the odd one (3, 1) is whole.
	evens := []*Comm{halves[0], halves[2]}
	onEach(t, evens, func(c *Comm) error {
		sub, err := c.Shrink(bounded(t))
		if err != nil {
			return err
		}
		if sub.Size() != 2 || sub.WorldRank(0) != 2 || sub.WorldRank(1) != 0 {
			return fmt.Errorf("the even half shrank to %d ranks, %d and %d", sub.Size(), sub.WorldRank(0), sub.WorldRank(1))
		}
		return sub.Close()
	})
	onEach(t, []*Comm{halves[1], halves[3]}, func(c *Comm) error {
		sub, err := c.Shrink(bounded(t))
		if err != nil {
			return err
		}
		if sub.Size() != 2 || sub.WorldRank(0) != 3 || sub.WorldRank(1) != 1 {
			return errors.New("the odd half changed")
		}
		return sub.Close()
	})
	for _, sub := range subs {
		require.NoError(t, sub.Close())
	}
	closeAll(t, comms[:4])
}

// How long Shrink takes once every survivor knows of the death, for 4 and
// 16 ranks meeting in an embedded etcd: the goal is under a second.
func BenchmarkShrink(b *testing.B) {
	for _, n := range []int{4, 16} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			var total time.Duration
			for range b.N {
				_, comms := startJob(b, n, TransportShm, quickExit(n))
				known, subs := shrinkAfterExit(b, comms, func(c *Comm) *Comm { return c })
				total += time.Since(known)
				closeAll(b, subs)
				closeAll(b, comms[:n-1])
			}
			b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/shrink")
		})
	}
}

// A decision read from the store is checked: distinct ranks of the job,
// or an error, never a panic.
func FuzzDecodeRanks(f *testing.F) {
	for _, s := range []string{"0,1,2", "3", "", "1,1", "-1", "0,,1", "99999999999999999999"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		rs, err := decodeRanks(b, 16)
		if err != nil {
			return
		}
		seen := map[int]bool{}
		for _, r := range rs {
			if r < 0 || r >= 16 || seen[r] {
				t.Fatalf("%q decoded to %v", b, rs)
			}
			seen[r] = true
		}
		if again, err := decodeRanks([]byte(rankNames(rs)), 16); err != nil || !slices.Equal(again, rs) {
			t.Fatalf("%v does not round-trip: %v, %v", rs, again, err)
		}
	})
}
