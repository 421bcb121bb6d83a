package fault_test

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/rdmacell/rdmacell/verbs"
	"github.com/rdmacell/rdmacell/verbs/fault"
	"github.com/stretchr/testify/require"
)

func TestPassThroughCounts(t *testing.T) {
	f := newFixture(t, verbs.QPConfig{})
	f.post(f.write(1, 0, 100), f.write(2, 100, 28), f.write(3, 128, 0))
	for i, wc := range waitWCs(t, f.asend, 3, "WRITEs") {
		requireWC(t, wc, uint64(i+1), verbs.StatusSuccess)
	}
	st := f.a.Stats()
	require.Equal(t, fault.Stats{Requests: 3, Bytes: 128}, st)
}

func TestDelayKeepsOrder(t *testing.T) {
	const delay = 20 * time.Millisecond
	f := newFixture(t, verbs.QPConfig{})
	f.a.Inject(fault.Fault{Kind: fault.Delay, Delay: delay})
	f.postRecv(f.b, 7)
	// Every request overwrites the same 8 bytes: only in-order delivery
	// leaves the last value there.
	var wrs []*verbs.SendWR
	for i := range 8 {
		binary.LittleEndian.PutUint64(f.src.Bytes()[8*i:], uint64(i+1))
		wr := f.write(uint64(i), 8*i, 8)
		wr.RemoteAddr = f.dst.Addr()
		wrs = append(wrs, wr)
	}
	wrs = append(wrs, f.writeImm(8, 64, 0, 8))
	posted := time.Now()
	f.post(wrs...)
	for i, wc := range waitWCs(t, f.asend, len(wrs), "delayed requests") {
		requireWC(t, wc, uint64(i), verbs.StatusSuccess)
	}
	// A lower bound, which a working Delay cannot miss however loaded the
	// machine is.
	require.GreaterOrEqual(t, time.Since(posted), delay, "completion of a request delayed by %v", delay)
	require.Equal(t, uint64(8), binary.LittleEndian.Uint64(f.dst.Bytes()), "value of the last WRITE")
	requireWC(t, waitWCs(t, f.brecv, 1, "immediate")[0], 7, verbs.StatusSuccess)
	st := f.a.Stats()
	require.Equal(t, uint64(9), st.Requests)
	require.Zero(t, st.Held)
	require.Zero(t, st.Late)
}

func TestStallHoldsUntilChanged(t *testing.T) {
	f := newFixture(t, verbs.QPConfig{})
	set(f.dst.Bytes()[:16384], 0xee)
	set(f.src.Bytes()[:4096], 0x11)
	f.a.Inject(fault.Fault{Kind: fault.Stall, After: 1})
	wrs := []*verbs.SendWR{f.write(1, 0, 1024), f.write(2, 1024, 1024), f.write(3, 2048, 1024)}
	f.post(wrs...)
	requireWC(t, waitWCs(t, f.asend, 1, "the request let through")[0], 1, verbs.StatusSuccess)

	// The caller may reuse its requests and lists at once: the wrapper
	// holds copies.
	wrs[1].RemoteAddr, wrs[1].SGL[0].Length = f.dst.Addr()+8192, 1
	wrs[2].ID = 99
	st := f.a.Stats()
	require.Equal(t, 2, st.Held, "stalled requests")
	require.Equal(t, uint64(1), st.Requests, "requests handed to the provider")
	requireNoWC(t, f.asend, "send CQ while stalled")
	requireAll(t, f.dst.Bytes()[1024:4096], 0xee, "targets of stalled requests")

	f.a.Inject(fault.Fault{})
	for i, wc := range waitWCs(t, f.asend, 2, "released requests") {
		requireWC(t, wc, uint64(i+2), verbs.StatusSuccess)
	}
	requireAll(t, f.dst.Bytes()[:3072], 0x11, "targets of released requests")
	requireAll(t, f.dst.Bytes()[3072:8200], 0xee, "memory the changed requests named")
	require.Equal(t, fault.Stats{Requests: 3, Bytes: 3072}, f.a.Stats())
}

func TestHeldRequestsFillTheQueue(t *testing.T) {
	f := newFixture(t, verbs.QPConfig{MaxSendWR: 2})
	f.a.Inject(fault.Fault{Kind: fault.Stall})
	f.post(f.write(1, 0, 8), f.write(2, 8, 8))
	wr := f.write(3, 16, 8)
	bad, err := f.a.PostSend(wr)
	require.ErrorIs(t, err, verbs.ErrQueueFull)
	require.Same(t, wr, bad)
	f.a.Inject(fault.Fault{})
	for i, wc := range waitWCs(t, f.asend, 2, "released requests") {
		requireWC(t, wc, uint64(i+1), verbs.StatusSuccess)
	}
}

func TestDropBreaks(t *testing.T) {
	f := newFixture(t, verbs.QPConfig{Timeout: 50 * time.Millisecond})
	set(f.dst.Bytes()[:4096], 0xee)
	set(f.src.Bytes()[:4096], 0x22)
	f.postRecv(f.a, 10)
	f.a.Inject(fault.Fault{Kind: fault.Drop, After: 1})

	// A Wait parked before anything fails must wake for the failure the
	// wrapper makes itself.
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	woke := make(chan []verbs.WC, 1)
	go func() {
		var wc [8]verbs.WC
		n, err := f.asend.Wait(ctx, wc[:])
		if err != nil {
			n = 0
		}
		woke <- wc[:n]
	}()

	f.post(f.write(1, 0, 1024), f.write(2, 1024, 1024), f.write(3, 2048, 1024), f.write(4, 3072, 1024))
	var wcs []verbs.WC
	select {
	case wcs = <-woke:
	case <-time.After(waitTimeout):
		t.Fatalf("Wait did not wake within %v", waitTimeout)
	}
	require.NotEmpty(t, wcs, "completions of the first Wait")
	wcs = append(wcs, waitWCs(t, f.asend, 4-len(wcs), "the rest")...)
	requireWC(t, wcs[0], 1, verbs.StatusSuccess)
	requireWC(t, wcs[1], 2, verbs.StatusRetryExceeded)
	requireWC(t, wcs[2], 3, verbs.StatusWRFlush)
	requireWC(t, wcs[3], 4, verbs.StatusWRFlush)
	require.Equal(t, verbs.StateErr, f.a.State(), "QP after a drop")
	requireWC(t, waitWCs(t, f.arecv, 1, "receive")[0], 10, verbs.StatusWRFlush)
	requireAll(t, f.dst.Bytes()[1024:4096], 0xee, "targets of dropped requests")
	st := f.a.Stats()
	require.Equal(t, uint64(3), st.Dropped)
	require.Equal(t, uint64(1), st.Requests)
	_, err := f.a.PostSend(f.write(5, 0, 8))
	require.ErrorIs(t, err, verbs.ErrInvalidState)

	// The link stays dead across a reset, until the fault is lifted.
	f.connect()
	f.post(f.write(6, 0, 8))
	requireWC(t, waitWCs(t, f.asend, 1, "after reconnecting a dropping QP")[0], 6, verbs.StatusRetryExceeded)
	f.a.Inject(fault.Fault{})
	f.connect()
	f.post(f.write(7, 0, 8))
	requireWC(t, waitWCs(t, f.asend, 1, "after lifting the fault")[0], 7, verbs.StatusSuccess)
}

func TestKillNow(t *testing.T) {
	f := newFixture(t, verbs.QPConfig{RNRRetry: 7})
	f.postRecv(f.a, 10)
	// Nothing is posted at b, so the first request waits in RNR retries
	// and both stay outstanding.
	f.post(f.writeImm(1, 0, 8, 1), f.write(2, 8, 8))
	f.a.Inject(fault.Fault{Kind: fault.Kill})
	require.Equal(t, verbs.StateErr, f.a.State(), "killed QP")
	for i, wc := range waitWCs(t, f.asend, 2, "requests of the killed QP") {
		requireWC(t, wc, uint64(i+1), verbs.StatusWRFlush)
	}
	requireWC(t, waitWCs(t, f.arecv, 1, "receive of the killed QP")[0], 10, verbs.StatusWRFlush)

	// A kill happens once: after a reset the QP works.
	f.connect()
	f.post(f.write(3, 0, 8))
	requireWC(t, waitWCs(t, f.asend, 1, "after reconnecting a killed QP")[0], 3, verbs.StatusSuccess)
}

func TestKillHalfWay(t *testing.T) {
	const n, after = 8, 3
	f := newFixture(t, verbs.QPConfig{})
	f.a.Inject(fault.Fault{Kind: fault.Kill, After: after})
	var wrs []*verbs.SendWR
	for i := range n {
		wrs = append(wrs, f.write(uint64(i), 0, 128<<10))
	}
	f.post(wrs...)
	require.Equal(t, verbs.StateErr, f.a.State(), "QP killed half-way through the chain")
	failed := false
	for i, wc := range waitWCs(t, f.asend, n, "requests of a QP killed half-way") {
		require.Equal(t, uint64(i), wc.ID, "completion order")
		if i >= after {
			require.Equal(t, verbs.StatusWRFlush, wc.Status, "request posted after the kill: %+v", wc)
		}
		// The requests let through may have completed before the kill.
		require.Contains(t, []verbs.Status{verbs.StatusSuccess, verbs.StatusWRFlush}, wc.Status)
		require.False(t, failed && wc.Status == verbs.StatusSuccess, "success after a flush: %+v", wc)
		failed = failed || wc.Status != verbs.StatusSuccess
	}
	require.Equal(t, uint64(after), f.a.Stats().Requests, "requests handed to the provider before the kill")
}

func TestCloseFlushesHeld(t *testing.T) {
	f := newFixture(t, verbs.QPConfig{})
	set(f.dst.Bytes()[:64], 0xee)
	f.a.Inject(fault.Fault{Kind: fault.Stall})
	f.post(f.write(1, 0, 64), f.write(2, 0, 64))
	require.NoError(t, f.a.Close())
	for i, wc := range waitWCs(t, f.asend, 2, "held requests flushed by Close") {
		requireWC(t, wc, uint64(i+1), verbs.StatusWRFlush)
	}
	requireAll(t, f.dst.Bytes()[:64], 0xee, "targets of requests held at Close")
	require.ErrorIs(t, f.a.Close(), verbs.ErrClosed)
}

func TestCreateQPNeedsWrappedCQs(t *testing.T) {
	d, err := openTCP()
	require.NoError(t, err)
	fd := fault.Wrap(d)
	defer fd.Close()
	pd, err := fd.AllocPD()
	require.NoError(t, err)
	raw, err := d.CreateCQ(4)
	require.NoError(t, err)
	_, err = pd.CreateQP(verbs.QPConfig{SendCQ: raw, RecvCQ: raw})
	require.ErrorIs(t, err, verbs.ErrInvalidArgument)
}
