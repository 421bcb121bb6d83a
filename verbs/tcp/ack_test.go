package tcp

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/verbs"
	"github.com/rdmacell/rdmacell/verbs/internal/soft"
)

// untimed opens a device whose lazy and held acknowledgements wait for a
// frame or a park, not for a timer, so that what a test counts does not
// depend on how fast the machine is.
func (e *env) untimed() *PD {
	e.t.Helper()
	d, pd, _ := e.device(Options{})
	d.ackDelay, d.lazyDelay = time.Hour, time.Hour
	return pd
}

// untimedPair connects two shared-CQ QPs of untimed devices.
func (e *env) untimedPair() (a, b *tqp, pa, pb *PD) {
	e.t.Helper()
	pa, pb = e.untimed(), e.untimed()
	a, b = e.sharedQP(pa), e.sharedQP(pb)
	connect(e.t, a, b)
	return a, b, pa, pb
}

// sharedQP is a QP whose sends and receives complete into one CQ, as the
// cell driver's do.
func (e *env) sharedQP(pd *PD) *tqp {
	e.t.Helper()
	cq, err := pd.d.CreateCQ(1024)
	require.NoError(e.t, err)
	q, err := pd.CreateQP(verbs.QPConfig{SendCQ: cq, RecvCQ: cq, RNRRetry: 7})
	require.NoError(e.t, err)
	return &tqp{QP: q.(*QP), send: cq.(*soft.CQ), recv: cq.(*soft.CQ)}
}

// ackCounts are a QP's counts of acknowledgements (see control).
type ackCounts struct{ alone, missed, parked uint64 }

func acks(q *tqp) ackCounts {
	q.mu.Lock()
	l := q.link
	q.mu.Unlock()
	l.ctl.mu.Lock()
	defer l.ctl.mu.Unlock()
	return ackCounts{l.ctl.nAlone, l.ctl.nMissed, l.ctl.nParked}
}

// recvOne waits on q's shared CQ until a receive completes, counting the
// send completions it meets into *sends.
func recvOne(t *testing.T, q *tqp, sends *int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	var wc [4]verbs.WC
	for {
		n, err := q.recv.Wait(ctx, wc[:])
		require.NoError(t, err)
		got := false
		for _, c := range wc[:n] {
			require.Equal(t, verbs.StatusSuccess, c.Status, "%+v", c)
			if c.Opcode == verbs.OpRecvWriteImm {
				got = true
			} else {
				*sends++
			}
		}
		if got {
			return
		}
	}
}

// TestAckRidesOnAnswer runs the cell engine's exchange: a signaled
// WRITE_WITH_IMM answered by a signaled WRITE_WITH_IMM, each side
// waiting in its one CQ. Each acknowledgement should ride behind the
// answer, not go in a system call of its own, and every request must
// still complete.
func TestAckRidesOnAnswer(t *testing.T) {
	const rounds = 200
	e := newEnv(t)
	a, b, pa, pb := e.untimedPair()
	srcA := e.region(pa, 64, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	srcB := e.region(pb, 64, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	ping := writeWR(1, verbs.OpWriteImm, srcA, 0, 8, srcB, 8)
	pong := writeWR(2, verbs.OpWriteImm, srcB, 0, 8, srcA, 8)

	done := make(chan int, 1)
	go func() {
		sends := 0
		defer func() { done <- sends }()
		for range rounds {
			if _, err := b.PostRecv(&verbs.RecvWR{}); err != nil {
				return
			}
			recvOne(t, b, &sends)
			if _, err := b.PostSend(pong); err != nil {
				return
			}
		}
	}()
	sends := 0
	for range rounds {
		_, err := a.PostRecv(&verbs.RecvWR{})
		require.NoError(t, err)
		_, err = a.PostSend(ping)
		require.NoError(t, err)
		recvOne(t, a, &sends)
	}
	bSends := <-done
	// The last ping's acknowledgement came behind the last pong, so its
	// completion may follow the pong's.
	sends += len(waitWCs(t, a.send, rounds-sends))
	require.Equal(t, rounds, sends, "send completions of the pinger")
	// The last pong's acknowledgement has no answer to ride with: the
	// pinger's consumer parking in its CQ releases it.
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	_, err := a.recv.Wait(ctx, make([]verbs.WC, 1))
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded)
	bSends += len(waitWCs(t, b.send, rounds-bSends))
	ca, cb := acks(a), acks(b)
	t.Logf("acknowledgements of %d requests each: pinger %+v, ponger %+v", rounds, ca, cb)
	// Without holding, every acknowledgement would go alone. A
	// completion pushed between a consumer's last poll and its park
	// may have its acknowledgement released early, rarely.
	require.Positive(t, ca.parked, "the last pong's acknowledgement, released by the park")
	require.LessOrEqual(t, ca.alone, uint64(rounds/20), "pinger's acknowledgements written alone")
	require.LessOrEqual(t, cb.alone, uint64(rounds/20), "ponger's acknowledgements written alone")
}

// TestLoneRequestsNotHeld posts signaled WRITE_WITH_IMMs nobody answers,
// each completing before the next, while the responder's consumer waits
// in its CQ and reposts receives. The first acknowledgement is held and
// released when that consumer parks again, not by the timer; after it
// the responder learns that no answers come and holds none, so lone
// requests do not wait for their peer's consumer.
func TestLoneRequestsNotHeld(t *testing.T) {
	const rounds = 100
	e := newEnv(t)
	_, pa, _ := e.device(Options{})
	pb := e.untimed()
	a, b := e.sharedQP(pa), e.sharedQP(pb)
	connect(t, a, b)
	src := e.region(pa, 64, verbs.AccessLocalWrite)
	dst := e.region(pb, 64, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	for range 8 {
		_, err := b.PostRecv(&verbs.RecvWR{})
		require.NoError(t, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		var wc [4]verbs.WC
		for {
			n, err := b.recv.Wait(ctx, wc[:])
			if err != nil {
				return
			}
			for range n {
				if _, err := b.PostRecv(&verbs.RecvWR{}); err != nil {
					return
				}
			}
		}
	}()
	wr := writeWR(1, verbs.OpWriteImm, src, 0, 8, dst, 0)
	for i := range rounds {
		_, err := a.PostSend(wr)
		require.NoError(t, err)
		wc := waitWCs(t, a.send, 1)
		require.Equal(t, verbs.StatusSuccess, wc[0].Status)
		if i == 0 {
			require.Equal(t, ackCounts{alone: 1, missed: 1, parked: 1}, acks(b),
				"the first acknowledgement: held, then released by the consumer's park")
		}
	}
	require.Equal(t, ackCounts{alone: rounds, missed: 1, parked: 1}, acks(b), "only the first acknowledgement held")
}

// TestHeldAckWithoutConsumer holds the acknowledgement of a signaled
// WRITE_WITH_IMM whose receive nobody polls: the timer must release it.
func TestHeldAckWithoutConsumer(t *testing.T) {
	e := newEnv(t)
	_, pa, _ := e.device(Options{})
	_, pb, _ := e.device(Options{})
	a, b := e.sharedQP(pa), e.sharedQP(pb)
	connect(t, a, b)
	src := e.region(pa, 64, verbs.AccessLocalWrite)
	dst := e.region(pb, 64, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	_, err := b.PostRecv(&verbs.RecvWR{})
	require.NoError(t, err)
	_, err = a.PostSend(writeWR(1, verbs.OpWriteImm, src, 0, 8, dst, 0))
	require.NoError(t, err)
	wc := waitWCs(t, a.send, 1)
	require.Equal(t, verbs.StatusSuccess, wc[0].Status, "a: %v, b: %v", a.Err(), b.Err())
	require.Equal(t, ackCounts{alone: 1, missed: 1}, acks(b), "held, then released by the timer")
}

// TestLazyAckWaitsForTraffic posts a Relaxed WRITE to a responder whose
// held acknowledgements are due at once and whose lazy ones never are:
// the Relaxed one must wait for the next frame the responder writes and
// ride on it, not go alone on the held ones' short timer. Then, with a
// short lazyDelay and no traffic back, it must still come by itself.
func TestLazyAckWaitsForTraffic(t *testing.T) {
	e := newEnv(t)
	a, b, srcA, srcB := e.relaxedWrite(time.Microsecond, time.Hour)
	time.Sleep(20 * time.Millisecond) // time for a wrong timer to fire
	require.Zero(t, acks(b).alone, "a lazy acknowledgement went alone on the held ones' timer")
	var wc [1]verbs.WC
	require.Zero(t, a.send.Poll(wc[:]), "the Relaxed WRITE completed with nothing to carry its acknowledgement")

	back := writeWR(2, verbs.OpWrite, srcB, 8, 8, srcA, 8)
	back.Flags = 0
	_, err := b.PostSend(back)
	require.NoError(t, err)
	got := waitWCs(t, a.send, 1)
	require.Equal(t, verbs.StatusSuccess, got[0].Status)
	require.Equal(t, uint64(1), got[0].ID)
	require.Zero(t, acks(b).alone, "the acknowledgement rode on the frame back")

	c, d, _, _ := e.relaxedWrite(time.Hour, time.Millisecond)
	got = waitWCs(t, c.send, 1)
	require.Equal(t, verbs.StatusSuccess, got[0].Status)
	require.Equal(t, uint64(1), acks(d).alone, "with no traffic back, the lazy acknowledgement went alone when due")
}

// relaxedWrite connects a requester to a responder whose held and lazy
// acknowledgements are due after the delays given, and posts one Relaxed
// WRITE (ID 1) of 8 bytes between their regions.
func (e *env) relaxedWrite(held, lazy time.Duration) (a, b *tqp, srcA, srcB verbs.MR) {
	e.t.Helper()
	_, pa, _ := e.device(Options{})
	db, pb, _ := e.device(Options{})
	db.ackDelay, db.lazyDelay = held, lazy
	a, b = e.sharedQP(pa), e.sharedQP(pb)
	connect(e.t, a, b)
	srcA = e.region(pa, 64, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	srcB = e.region(pb, 64, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	wr := writeWR(1, verbs.OpWrite, srcA, 0, 8, srcB, 0)
	wr.Flags |= verbs.Relaxed
	_, err := a.PostSend(wr)
	require.NoError(e.t, err)
	return a, b, srcA, srcB
}

// pipeLink connects q, in RTR towards fakePeer, to the returned end of a
// pipe, through which the test speaks for the peer.
func pipeLink(t *testing.T, q *tqp) (*link, net.Conn) {
	t.Helper()
	require.NoError(t, q.Modify(verbs.StateInit, nil))
	peer := verbs.Endpoint{Provider: "tcp", Addr: fakePeer.Addr, QPN: 1, PSN: 0}
	require.NoError(t, q.Modify(verbs.StateRTR, &peer))
	ours, theirs := net.Pipe()
	q.mu.Lock()
	l := newLinkLocked(q.QP, ours)
	q.mu.Unlock()
	l.start()
	return l, theirs
}

// TestSignaledStreamAckedInBatches sends a responder signaled WRITEs
// from a raw client, 63 of them in one write after one alone: it
// acknowledges the requests of each read with one ACK, not one each.
func TestSignaledStreamAckedInBatches(t *testing.T) {
	const n = 63
	e := newEnv(t)
	rt := newRawTarget(t, e)
	c, err := rt.dialRaw(t, secret)
	require.NoError(t, err)
	psn := fakePeer.PSN
	write := func(i int) []byte {
		h := header{typ: frameWrite, flags: flagAckReq, psn: psn + uint32(i), rkey: rt.dst.RKey(), raddr: rt.dst.Addr() + 8*uint64(i), length: 8}
		return frame(h, []byte{byte(i), 1, 2, 3, 4, 5, 6, 7})
	}
	// acksUpTo reads ACKs until one covers last.
	acksUpTo := func(last uint32) []uint32 {
		var acks []uint32
		buf := make([]byte, headerLen)
		for len(acks) == 0 || acks[len(acks)-1] != last {
			_, err := io.ReadFull(c, buf)
			require.NoError(t, err, "acknowledgements so far: %v", acks)
			h, err := decodeHeader(buf)
			require.NoError(t, err)
			require.Equal(t, frameAck, h.typ)
			acks = append(acks, h.psn)
		}
		return acks
	}
	// The first request alone: the link's goroutines are running when
	// the batch comes.
	_, err = c.Write(write(0))
	require.NoError(t, err)
	require.Equal(t, []uint32{psn}, acksUpTo(psn))
	var batch []byte
	for i := 1; i <= n; i++ {
		batch = append(batch, write(i)...)
	}
	_, err = c.Write(batch)
	require.NoError(t, err)
	acks := acksUpTo(psn + n)
	t.Logf("%d ACKs for %d signaled WRITEs: %v", len(acks), n, acks)
	// One per request before; one per read now, and the sender
	// goroutine may take one along while it runs.
	require.LessOrEqual(t, len(acks), n/4, "ACKs for %d signaled WRITEs", n)
	for i := 0; i <= n; i++ {
		require.Equal(t, byte(i), rt.dst.Bytes()[8*i], "WRITE %d placed", i)
	}
}

// TestHoldsDropLeftLinks lists a link whose held acknowledgement waits
// for its receive to complete: a park keeps it listed, until the QP has
// left the link, which no park may keep.
func TestHoldsDropLeftLinks(t *testing.T) {
	e := newEnv(t)
	q := e.sharedQP(e.untimed())
	l, theirs := pipeLink(t, q)
	drain(theirs)
	l.queueAck(0, ackHeld)
	h := q.recvHolds
	h.release()
	require.EqualValues(t, 1, h.n.Load(), "kept while its receive has not completed")
	q.mu.Lock()
	l.dead.Store(true)
	q.mu.Unlock()
	h.release()
	require.EqualValues(t, 0, h.n.Load(), "dropped once the QP left it")
	require.NoError(t, q.Close())
}
