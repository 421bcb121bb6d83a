package comm

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Four ranks split into two pairs by parity, ranked by descending key,
// exchange within the pairs on both channels, and a rank with a negative
// color joins none.
func TestSplit(t *testing.T) {
	comms := startComms(t, 4, TransportShm, nil)
	subs := make([]*Comm, 4)
	onEach(t, comms, func(c *Comm) error {
		sub, err := c.Split(bounded(t), c.Rank()%2, -c.Rank())
		subs[c.Rank()] = sub
		return err
	})
	for r, s := range subs {
		require.Equal(t, 2, s.Size())
		// Keys are -rank: the higher parent rank comes first.
		require.Equal(t, 1-r/2, s.Rank(), "rank %d", r)
		require.Equal(t, r, s.WorldRank(s.Rank()))
		require.Equal(t, 2, s.LocalSize())
	}
	onEach(t, comms, func(c *Comm) error {
		ctx := bounded(t)
		s := subs[c.Rank()]
		other := 1 - s.Rank()
		// The same tag on the parent and the child: they must not mix.
		hp, err := c.Isend((c.Rank()+2)%4, 5, []byte(fmt.Sprint("parent ", c.Rank())))
		if err != nil {
			return err
		}
		if err := s.Send(ctx, other, 5, []byte(fmt.Sprint("child ", c.Rank()))); err != nil {
			return err
		}
		buf := make([]byte, 64)
		n, err := s.Recv(ctx, other, 5, buf)
		if err != nil {
			return err
		}
		if want := fmt.Sprint("child ", s.WorldRank(other)); string(buf[:n]) != want {
			return fmt.Errorf("child channel: got %q, want %q", buf[:n], want)
		}
		if n, err = c.Recv(ctx, (c.Rank()+2)%4, 5, buf); err != nil {
			return err
		}
		if want := fmt.Sprint("parent ", (c.Rank()+2)%4); string(buf[:n]) != want {
			return fmt.Errorf("parent channel: got %q, want %q", buf[:n], want)
		}
		if _, err := hp.Wait(ctx); err != nil {
			return err
		}
		o, err := s.P2P().Isend(other, 1, []byte{byte(c.Rank())})
		if err != nil {
			return err
		}
		r, err := s.P2P().Irecv(other, 1, buf[:1])
		if err != nil {
			return err
		}
		if _, err := r.Wait(ctx); err != nil {
			return err
		}
		if int(buf[0]) != s.WorldRank(other) {
			return fmt.Errorf("ordered channel of the child: got rank %d", buf[0])
		}
		_, err = o.Wait(ctx)
		return err
	})
	// Negative colors, and a second split of the same parent.
	onEach(t, comms, func(c *Comm) error {
		color := 0
		if c.Rank() == 3 {
			color = -1
		}
		sub, err := c.Split(bounded(t), color, 0)
		if err != nil {
			return err
		}
		if c.Rank() == 3 {
			if sub != nil {
				return fmt.Errorf("rank 3 got a communicator for a negative color")
			}
			return nil
		}
		defer sub.Close()
		if sub.Size() != 3 || sub.Rank() != c.Rank() {
			return fmt.Errorf("rank %d: got rank %d of %d", c.Rank(), sub.Rank(), sub.Size())
		}
		return nil
	})
	for _, s := range subs {
		require.NoError(t, s.Close())
		require.NoError(t, s.Close())
		_, err := s.Isend(0, 0, nil)
		require.ErrorIs(t, err, ErrClosed)
	}
}

// Messages for a communicator its receiver closed are turned away: a
// large one fails at the sender instead of waiting forever, a small one
// gives its credit back (an eager send completes once copied, so one sent
// while no credit is back yet goes as a large one, and fails as one).
func TestClosedSubcommRefuses(t *testing.T) {
	comms := startComms(t, 2, TransportShm, nil)
	subs := make([]*Comm, 2)
	onEach(t, comms, func(c *Comm) error {
		var err error
		subs[c.Rank()], err = c.Split(bounded(t), 0, 0)
		return err
	})
	require.NoError(t, subs[1].Close())
	ctx := bounded(t)
	for range 2 * eagerCredits {
		if err := subs[0].Send(ctx, 1, 1, []byte("small")); err != nil {
			require.ErrorIs(t, err, ErrCancelled)
		}
	}
	// Owed credits ride on the next slot the other way: rank 1 answers a
	// message that followed the turned-away ones on the same stream.
	onEach(t, comms, func(c *Comm) error {
		buf := make([]byte, 4)
		if c.Rank() == 1 {
			if _, err := c.Recv(ctx, 0, 2, buf); err != nil {
				return err
			}
			return c.Send(ctx, 0, 3, buf)
		}
		if err := c.Send(ctx, 1, 2, []byte("ping")); err != nil {
			return err
		}
		_, err := c.Recv(ctx, 1, 3, buf)
		return err
	})
	p := comms[0].w.peers[1]
	require.Eventually(t, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.credits == eagerCredits
	}, testTimeout, time.Millisecond, "the turned-away messages' credits came back")
	err := subs[0].Send(ctx, 1, 1, make([]byte, 2*eagerMax))
	require.ErrorIs(t, err, ErrCancelled)
	require.NoError(t, subs[0].Close())
}
