package comm

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/flight"
	"github.com/rdmacell/rdmacell/verbs"
	"github.com/rdmacell/rdmacell/verbs/fault"
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

// A Recv that waits past the stall-report bound is reported, by what it
// waits for, before the watchdog ends it.
func TestStallReportOfAMessage(t *testing.T) {
	comms := startComms(t, 2, TransportShm, func(o *Options) {
		o.Timeout, o.StallReport = 3*time.Second, 200*time.Millisecond
	})
	defer closeAll(t, comms)
	errc := make(chan error, 1)
	go func() {
		_, err := comms[0].Recv(t.Context(), 1, 7, make([]byte, 8))
		errc <- err
	}()
	want := "rank 0 waits for receive of up to 8 bytes from rank 1 with tag 0x7"
	require.Eventually(t, func() bool { return strings.Contains(comms[1].w.stallCause(), want) }, 10*time.Second, 20*time.Millisecond,
		"the last report: %q", comms[1].w.stallCause())
	require.ErrorIs(t, <-errc, ErrTimeout)
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
		require.Contains(t, te.Cause, "rank 2 has not entered AllReduce #0; ranks 0, 1 have waited in it for", "rank %d", r)
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

// Every path from rank 1 to rank 0 stalls while rank 1 sends in an
// operation: the fault wrapper drops what rank 1 posts, and breaks the QP
// each time (a held request would be delivered late by the reset, and
// the message would get through). The stall report names the paths and
// their state. Rank 1's control lanes go down with its paths, so once the
// faults are lifted the message either arrives whole or fails naming the
// peer, in bounded time.
func TestStallReportNamesThePath(t *testing.T) {
	var dev *fault.Device
	comms := startComms(t, 2, TransportTCP, func(o *Options) {
		o.Timeout, o.StallReport = time.Minute, 300*time.Millisecond
		if o.Rank == 1 {
			o.wrapDevice = func(d verbs.Device) verbs.Device { dev = fault.Wrap(d); return dev }
		}
	})
	defer closeAll(t, comms)
	msg := pattern(256<<10, 7)
	exchange := func(seq uint64) []error {
		errs := make([]error, 2)
		onEachErr(comms, errs, func(c *Comm) error {
			h := c.Recorder().Begin(&flight.Op{Comm: c.ID(), Seq: seq, Name: "Broadcast", Bytes: int64(len(msg))})
			var err error
			if c.Rank() == 1 {
				c.Recorder().Wait(h, 0, 0, flight.Send)
				var req Request
				if req, err = c.P2P().Isend(0, seq, msg); err == nil {
					_, err = req.Wait(t.Context())
				}
			} else {
				c.Recorder().Wait(h, 0, 1, flight.Recv)
				got := make([]byte, len(msg))
				var req Request
				if req, err = c.P2P().Irecv(1, seq, got); err == nil {
					_, err = req.Wait(t.Context())
				}
				if err == nil && firstDiff(got, msg) >= 0 {
					err = fmt.Errorf("byte %d differs", firstDiff(got, msg))
				}
			}
			c.Recorder().End(h, err)
			return err
		})
		return errs
	}
	for r, err := range exchange(0) { // connects
		require.NoError(t, err, "rank %d", r)
	}
	for _, q := range dev.QPs() {
		q.Inject(fault.Fault{Kind: fault.Drop})
	}
	done := make(chan []error, 1)
	go func() { done <- exchange(1) }()
	var cause string
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(cause, "rank 1 waits in Broadcast #1 for rank 0 (to take what it sends, step 0; ") ||
		!strings.Contains(cause, " path ") {
		if time.Now().After(deadline) {
			stalls, _ := comms[0].w.job.Notes(stallNote)
			statuses, _ := comms[0].w.job.Notes(statusNote)
			finished := len(done) > 0
			t.Fatalf("no stall report named the paths; the last: %q; exchange finished: %v; stall notes %s; statuses %s", cause, finished, fmt.Sprint(stalls), fmt.Sprint(statuses))
		}
		time.Sleep(50 * time.Millisecond)
		cause = comms[0].w.stallCause()
	}
	t.Log(cause)
	for _, q := range dev.QPs() {
		q.Inject(fault.Fault{})
	}
	select {
	case errs := <-done:
		for r, err := range errs {
			var pe *PeerError
			if err != nil && (!errors.As(err, &pe) || pe.Rank != 1-r) {
				t.Fatalf("rank %d: want the message or rank %d's failure, got %v", r, 1-r, err)
			}
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the exchange did not end once the faults were lifted")
	}
}
