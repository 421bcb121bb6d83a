package tcp

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/verbs"
)

// TestCorkWritesOnce posts three WRITEs to a corked QP: nothing goes to
// the wire until Uncork, which writes all three in one batch, and they
// land in order.
func TestCorkWritesOnce(t *testing.T) {
	e := newEnv(t)
	a, _, pa, pb := e.untimedPair()
	src := e.region(pa, 64, verbs.AccessLocalWrite)
	dst := e.region(pb, 64, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	pattern(src.Bytes(), 7)

	before := pa.d.Writes()
	a.Cork()
	for i := range 3 {
		wr := writeWR(uint64(i), verbs.OpWrite, src, 16*i, 16, dst, 16*i)
		wr.Flags = 0
		_, err := a.PostSend(wr)
		require.NoError(t, err)
	}
	require.Equal(t, before, pa.d.Writes(), "a corked QP wrote")
	a.Uncork()
	waitFor(t, "the writes to land", func() bool { return string(dst.Bytes()[32:48]) == string(src.Bytes()[32:48]) })
	require.Equal(t, src.Bytes()[:48], dst.Bytes()[:48])
	require.Equal(t, before.WithRequests+1, pa.d.Writes().WithRequests, "the three writes in one batch")
}

// TestRelaxedAckRides posts a signaled, Relaxed WRITE: its responder
// does not write the acknowledgement by itself, but behind its next
// request, and the requester's completion comes then.
func TestRelaxedAckRides(t *testing.T) {
	e := newEnv(t)
	a, b, pa, pb := e.untimedPair()
	srcA := e.region(pa, 64, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	srcB := e.region(pb, 64, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)

	pattern(srcA.Bytes()[:8], 3)
	wr := writeWR(1, verbs.OpWrite, srcA, 0, 8, srcB, 0)
	wr.Flags |= verbs.Relaxed
	_, err := a.PostSend(wr)
	require.NoError(t, err)
	waitFor(t, "the write to land", func() bool { return string(srcB.Bytes()[:8]) == string(srcA.Bytes()[:8]) })
	require.Zero(t, pb.d.Writes().Batches, "b acknowledged a relaxed write by itself")

	back := writeWR(2, verbs.OpWrite, srcB, 8, 8, srcA, 8)
	back.Flags = 0
	_, err = b.PostSend(back)
	require.NoError(t, err)
	wc := waitWCs(t, a.send, 1)
	require.Equal(t, verbs.StatusSuccess, wc[0].Status)
	require.Equal(t, uint64(1), wc[0].ID)
	require.Equal(t, WriteCounts{Batches: 1, WithRequests: 1}, pb.d.Writes(), "the acknowledgement rode behind b's write")
	require.Zero(t, acks(b).alone)
}

// TestPostDuringAcceptFollowsTheVerdict posts a WRITE on the acceptor's
// QP when its connection has become the QP's link and the verdict is not
// yet written: the request must wait for the verdict, or the dialer
// reads the request's header as a verdict and refuses the connection.
func TestPostDuringAcceptFollowsTheVerdict(t *testing.T) {
	e := newEnv(t)
	_, pa, la := e.device(Options{})
	_, pb, lb := e.device(Options{})
	a, b := e.qp(pa, verbs.QPConfig{}), e.qp(pb, verbs.QPConfig{})
	srcA, dstA := e.region(pa, 64, verbs.AccessLocalWrite), e.region(pa, 64, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	srcB, dstB := e.region(pb, 64, verbs.AccessLocalWrite), e.region(pb, 64, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	posted := make(chan error, 1)
	testHookAccepted = func(q *QP) {
		src, dst := srcA, dstB
		if q == b.QP {
			src, dst = srcB, dstA
		}
		// The acceptor may still be in RTR: connect moves it to RTS
		// without waiting for the connection. (This runs on the
		// listener's goroutine, where the test cannot fail.)
		for deadline := time.Now().Add(waitLimit); q.State() != verbs.StateRTS && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		_, err := q.PostSend(writeWR(7, verbs.OpWrite, src, 0, 8, dst, 0))
		posted <- err
	}
	t.Cleanup(func() { testHookAccepted = nil })
	connect(t, a, b)
	require.NoError(t, <-posted, "post on the acceptor")
	acceptor := a
	a.mu.Lock()
	if a.dialer {
		acceptor = b
	}
	a.mu.Unlock()
	wc := waitWCs(t, acceptor.send, 1)
	require.Equal(t, verbs.StatusSuccess, wc[0].Status, "%+v", wc[0])
	for _, l := range []fmt.Stringer{la, lb} {
		require.NotContains(t, l.String(), "refusing peer")
	}
}
