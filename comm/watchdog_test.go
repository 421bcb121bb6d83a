package comm

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/flight"
)

// A Recv from a peer that never sends ends with the watchdog's error,
// naming the peer, though the caller's context has no deadline.
func TestWatchdogEndsARecvThatNeverCompletes(t *testing.T) {
	comms := startComms(t, 2, TransportShm, func(o *Options) {
		o.Timeout, o.StallReport = 300*time.Millisecond, NoTimeout
	})
	defer closeAll(t, comms)
	_, err := comms[0].Recv(t.Context(), 1, 7, make([]byte, 8))
	var te *TimeoutError
	require.ErrorAs(t, err, &te)
	require.ErrorIs(t, err, ErrTimeout)
	require.Contains(t, te.What, "from rank 1")
	require.Equal(t, 0, te.Rank)

	// The communicator goes on working.
	onEach(t, comms, func(c *Comm) error {
		b := []byte{byte(c.Rank())}
		if c.Rank() == 0 {
			return c.Send(t.Context(), 1, 8, b)
		}
		_, err := c.Recv(t.Context(), 0, 8, b)
		return err
	})
}

// A collective that rank 2 never enters: the ranks that wait in it ask
// for a stall report, every rank answers, and the watchdog's error on
// them says that rank 2 has not entered the operation, though rank 1
// waits on rank 0. The trace of each waiting rank is written.
func TestWatchdogNamesTheRankThatHasNotEntered(t *testing.T) {
	dir := t.TempDir()
	comms := startComms(t, 3, TransportShm, func(o *Options) {
		o.Timeout, o.StallReport, o.TraceDir = 2*time.Second, 300*time.Millisecond, dir
	})
	defer closeAll(t, comms)
	errs := make([]error, 2)
	done := make(chan int)
	for r := range 2 {
		go func() {
			c := comms[r]
			// As the collectives do: a record, then a receive on the
			// ordered channel from the rank before in a ring.
			h := c.Recorder().Begin(&flight.Op{Comm: c.ID(), Seq: 0, Name: "AllReduce", Bytes: 8})
			from := (r + 2) % 3
			c.Recorder().Wait(h, 0, from, flight.Recv)
			req, err := c.P2P().Irecv(from, 1, make([]byte, 8))
			if err == nil {
				_, err = req.Wait(t.Context())
			}
			c.Recorder().End(h, err)
			errs[r] = err
			done <- r
		}()
	}
	for range 2 {
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("the watchdog did not end the waits")
		}
	}
	for r, err := range errs {
		var te *TimeoutError
		require.ErrorAs(t, err, &te, "rank %d", r)
		require.Contains(t, te.What, "AllReduce #0")
		require.Contains(t, te.Cause, "rank 2 has not entered AllReduce #0; ranks 0-1 have waited in it for", "rank %d", r)
		// The watchdog's goroutine writes it.
		var d *flight.Dump
		require.Eventually(t, func() bool {
			d, err = flight.ReadFile(filepath.Join(dir, flight.FileName(r)))
			return err == nil
		}, 10*time.Second, 10*time.Millisecond, "rank %d wrote no trace", r)
		require.Contains(t, d.Reason, "AllReduce #0")
	}
	_, err := os.Stat(filepath.Join(dir, flight.FileName(2)))
	require.True(t, errors.Is(err, os.ErrNotExist), "rank 2 had nothing to write")
	notes, _ := comms[2].w.job.Notes(stallNote)
	require.NotEmpty(t, notes, "a stall was reported")
}
