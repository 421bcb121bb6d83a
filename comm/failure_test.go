package comm

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/bootstrap"
)

// Abort on one rank fails the waiters of every rank with an error naming
// the aborting rank, on the user and the ordered channel.
func TestAbortInProcess(t *testing.T) {
	comms := startComms(t, 3, TransportShm, nil)
	waiting := make(chan struct{}, 4)
	errs := make([]error, 3)
	done := make(chan struct{})
	go func() {
		defer close(done)
		onEachErr(comms[1:], errs[1:], func(c *Comm) error {
			ctx := bounded(t)
			r, err := c.P2P().Irecv(0, 1, make([]byte, 8))
			if err != nil {
				return err
			}
			waiting <- struct{}{}
			_, uerr := c.Recv(ctx, 0, 2, make([]byte, 8))
			_, oerr := r.Wait(ctx)
			return errors.Join(uerr, oerr)
		})
	}()
	<-waiting
	<-waiting
	comms[0].Abort(fmt.Errorf("the loss is NaN"))
	<-done
	for r := 1; r < 3; r++ {
		var ae *AbortError
		require.ErrorAs(t, errs[r], &ae, "rank %d", r)
		require.Equal(t, 0, ae.Rank)
		require.Contains(t, ae.Cause, "the loss is NaN")
		require.ErrorIs(t, errs[r], ErrAborted)
	}
	// Everything after fails the same way, at once.
	_, err := comms[2].Isend(1, 0, nil)
	require.ErrorIs(t, err, ErrAborted)
	err = comms[0].Send(bounded(t), 1, 0, nil)
	var ae *AbortError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, "the loss is NaN", ae.Err.Error())
}

func onEachErr(comms []*Comm, errs []error, f func(c *Comm) error) {
	ch := make(chan struct{})
	for i, c := range comms {
		go func() { errs[i] = f(c); ch <- struct{}{} }()
	}
	for range comms {
		<-ch
	}
}

// Once connected, the data path does not need etcd: messages keep moving
// after the server is gone, and Close still returns in bounded time.
func TestEtcdLostAfterSetup(t *testing.T) {
	for _, tr := range transports {
		t.Run(string(tr), func(t *testing.T) {
			// Without etcd, Close gives up on it after one lease TTL.
			srv, comms := startJob(t, 3, tr, func(o *Options) { o.LeaseTTL = 2 * time.Second })
			// Peers connect on demand, through etcd: connect the ring first.
			onEach(t, comms, func(c *Comm) error {
				next, prev := (c.Rank()+1)%3, (c.Rank()+2)%3
				if err := c.Send(bounded(t), next, 99, nil); err != nil {
					return err
				}
				_, err := c.Recv(bounded(t), prev, 99, nil)
				return err
			})
			require.NoError(t, srv.Close(bounded(t)))
			onEach(t, comms, func(c *Comm) error {
				ctx := bounded(t)
				next, prev := (c.Rank()+1)%3, (c.Rank()+2)%3
				for i, n := range []int{1, 100 << 10, 1 << 20} {
					s, err := c.Isend(next, uint64(i), pattern(n, uint64(c.Rank())))
					if err != nil {
						return err
					}
					o, err := c.P2P().Isend(next, uint64(i), pattern(n, uint64(c.Rank()+10)))
					if err != nil {
						return err
					}
					buf := make([]byte, n)
					if _, err := c.Recv(ctx, prev, uint64(i), buf); err != nil || firstDiff(buf, pattern(n, uint64(prev))) >= 0 {
						return fmt.Errorf("user message of %d bytes: %v", n, err)
					}
					r, err := c.P2P().Irecv(prev, uint64(i), buf)
					if err != nil {
						return err
					}
					if _, err := r.Wait(ctx); err != nil || firstDiff(buf, pattern(n, uint64(prev+10))) >= 0 {
						return fmt.Errorf("ordered message of %d bytes: %v", n, err)
					}
					for _, h := range []Request{s, o} {
						if _, err := h.Wait(ctx); err != nil {
							return err
						}
					}
				}
				return nil
			})
		})
	}
}

// Init against an etcd nobody serves fails within the rendezvous timeout
// with an error that says so.
func TestUnreachableEtcd(t *testing.T) {
	o := Options{Rank: 0, WorldSize: 2, Job: jobID(t), Etcd: bootstrap.ClientConfig{Endpoints: []string{"127.0.0.1:1"}},
		RendezvousTimeout: 2 * time.Second, Logger: quietLogger()}
	start := time.Now()
	_, err := Init(bounded(t), o)
	require.ErrorIs(t, err, bootstrap.ErrUnreachable)
	require.ErrorContains(t, err, "127.0.0.1:1")
	require.Less(t, time.Since(start), testTimeout/2)
}

// A rank whose tcp secret is not the job's cannot connect: both ends'
// first exchange fails with an error naming the other, in bounded time.
func TestWrongSecret(t *testing.T) {
	srv := startServer(t)
	job := jobID(t)
	errs := make([]error, 2)
	ch := make(chan struct{}, 2)
	for r := range 2 {
		go func() {
			o := testOptions(srv, job, r, 2, TransportTCP)
			o.RendezvousTimeout = 10 * time.Second
			if r == 1 {
				o.tcpSecret = []byte("a secret of another job, long enough")
			}
			c, err := Init(context.Background(), o)
			if err == nil {
				ctx, cancel := context.WithTimeout(context.Background(), o.RendezvousTimeout)
				err = c.Send(ctx, 1-r, 1, []byte("x"))
				cancel()
				_ = c.Close()
			}
			errs[r] = err
			ch <- struct{}{}
		}()
	}
	for range 2 {
		select {
		case <-ch:
		case <-time.After(testTimeout):
			t.Fatal("Init did not return")
		}
	}
	for r, err := range errs {
		require.Error(t, err, "rank %d", r)
		require.ErrorContains(t, err, fmt.Sprintf("rank %d", 1-r), "rank %d", r)
		t.Logf("rank %d: %v", r, err)
	}
}

// A rank that takes a message and closes at once may be gone before the
// acknowledgements of the message's cells are back at the sender (a range
// is handed back on its last cell's arrival): the send completes all the
// same, not with the peer's goodbye. Without that a collective's last
// exchange failed on the rank that finished second now and then.
func TestSendCompletesWhenPeerTakesItAndCloses(t *testing.T) {
	for _, tr := range []Transport{TransportShm, TransportTCP} {
		t.Run(string(tr), func(t *testing.T) {
			for round := range 20 {
				comms := startComms(t, 2, tr, nil)
				ctx := bounded(t)
				closed := make(chan error, 1)
				// A message of several chunks: its last ranges' ends are on
				// the bulk connection, the goodbye on the control one.
				const n = 1 << 20
				go func() {
					_, err := comms[0].Recv(ctx, 1, 3, make([]byte, n))
					if err == nil {
						err = comms[0].Close()
					}
					closed <- err
				}()
				require.NoError(t, comms[1].Send(ctx, 0, 3, make([]byte, n)), "round %d", round)
				// Rank 0's Close waits for this goodbye.
				require.NoError(t, comms[1].Close(), "round %d", round)
				require.NoError(t, <-closed, "round %d", round)
			}
		})
	}
}

// A rank that closes its communicator has finished its collectives; the
// others may still be finishing theirs among themselves. Its goodbye fails
// what involves it, not the ordered channel between the others.
func TestPeerCloseLeavesOthersOrderedChannel(t *testing.T) {
	comms := startComms(t, 3, TransportShm, nil)
	ctx := bounded(t)
	r, err := comms[0].P2P().Irecv(1, 7, make([]byte, 8))
	require.NoError(t, err)
	gone, err := comms[0].P2P().Irecv(2, 7, make([]byte, 8))
	require.NoError(t, err)
	// Close waits for the others' goodbyes; its own goes out at once.
	closed := make(chan error, 1)
	go func() { closed <- comms[2].Close() }()
	_, err = gone.Wait(ctx)
	require.ErrorIs(t, err, ErrPeerClosed, "the receive from the rank that left")
	var pe *PeerError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, 2, pe.Rank)

	s, err := comms[1].P2P().Isend(0, 7, []byte("12345678"))
	require.NoError(t, err)
	_, err = s.Wait(ctx)
	require.NoError(t, err)
	n, err := r.Wait(ctx)
	require.NoError(t, err, "a receive between two ranks still there")
	require.Equal(t, 8, n)
	// Later operations between them work too.
	r, err = comms[1].P2P().Irecv(0, 8, make([]byte, 1))
	require.NoError(t, err)
	s, err = comms[0].P2P().Isend(1, 8, []byte{1})
	require.NoError(t, err)
	_, err = r.Wait(ctx)
	require.NoError(t, err)
	_, err = s.Wait(ctx)
	require.NoError(t, err)
	closeAll(t, comms[:2])
	require.NoError(t, <-closed)
}
