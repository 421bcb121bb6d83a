package shm

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/verbs"
)

// TestImmPipelines: with receives posted at the responder, a chain of
// WRITE_WITH_IMMs is published as a whole without waiting for any
// acknowledgement, and still completes in order at both ends with every
// byte in place. The responder is held still (its role taken) while the
// requester publishes, so the test does not depend on timing.
func TestImmPipelines(t *testing.T) {
	const k = 8
	a, b := pair(t, 4096, verbs.QPConfig{RNRRetry: 7})
	for i := range k {
		postRecv(t, b.qp, uint64(100+i))
	}
	al, bl := a.qp.(*QP).link.Load(), b.qp.(*QP).link.Load()
	require.Eventually(t, func() bool { return al.pair.peerRecvsPosted() == k }, waitLimit, time.Millisecond,
		"the requester sees the receives")

	be := b.qp.(*QP).running.Load()
	for !be.respBusy.CompareAndSwap(false, true) {
		time.Sleep(time.Millisecond)
	}
	fill(a.mem.Bytes(), 5)
	wrs := make([]*verbs.SendWR, k)
	for i := range wrs {
		wrs[i] = writeImm(uint64(i), a.mr, 8*i, b.mr, 8*i, 8, uint32(i))
		if i > 0 {
			wrs[i-1].Next = wrs[i]
		}
	}
	post(t, a.qp, wrs[0])
	require.Eventually(t, func() bool { return bl.pair.peerRequestSeq() == k }, waitLimit, time.Millisecond,
		"all %d requests published while none is acknowledged", k)
	noWC(t, a.cq)
	be.respBusy.Store(false)
	b.qp.(*QP).kickHard()

	for i, wc := range waitWC(t, b.cq, k) {
		require.Equal(t, verbs.StatusSuccess, wc.Status)
		require.Equal(t, uint64(100+i), wc.ID, "receives consumed in order")
		require.Equal(t, uint32(i), wc.Imm)
	}
	for i, wc := range waitWC(t, a.cq, k) {
		require.Equal(t, verbs.StatusSuccess, wc.Status)
		require.Equal(t, uint64(i), wc.ID, "send completions in order")
	}
	require.Equal(t, a.mem.Bytes()[:8*k], b.mem.Bytes()[:8*k])
}

// TestSmallRequestsNeedNoEngine: a poster executes a small SEND (a
// driver's control message) in its own goroutine, as it does a small
// WRITE_WITH_IMM, and leaves the engine alone, also for a request queued
// behind the SEND, which waits for its acknowledgement: the
// acknowledgement rings the doorbell when it comes. The responder is
// held still, so nothing is acknowledged meanwhile, and the requester's
// doorbell must not move. Waking the engine instead costs a futex wake
// and a scheduling round, which a ping-pong pays on its critical path.
func TestSmallRequestsNeedNoEngine(t *testing.T) {
	a, b := pair(t, 4096, verbs.QPConfig{RNRRetry: 7})
	postRecv(t, b.qp, 100, sge(b.mr, 0, 64)...)
	postRecv(t, b.qp, 101)
	al, bl := a.qp.(*QP).link.Load(), b.qp.(*QP).link.Load()
	require.Eventually(t, func() bool { return al.pair.peerRecvsPosted() == 2 }, waitLimit, time.Millisecond,
		"the requester sees the receives")
	be := b.qp.(*QP).running.Load()
	for !be.respBusy.CompareAndSwap(false, true) {
		time.Sleep(time.Millisecond)
	}
	held := true
	release := func() {
		if held {
			held = false
			be.respBusy.Store(false)
			b.qp.(*QP).kickHard()
		}
	}
	t.Cleanup(release)
	fill(a.mem.Bytes(), 9)
	bell := al.pair.bell(al.pair.side)
	rung := bell.load()

	post(t, a.qp, &verbs.SendWR{ID: 1, Opcode: verbs.OpSend, Flags: verbs.Signaled, SGL: sge(a.mr, 0, 64)})
	require.Equal(t, uint32(1), bl.pair.peerRequestSeq(), "the SEND is published when PostSend returns")
	post(t, a.qp, writeImm(2, a.mr, 64, b.mr, 64, 8, 7))
	require.Equal(t, uint32(1), bl.pair.peerRequestSeq(), "the WRITE_WITH_IMM waits behind the SEND")
	require.Equal(t, rung, bell.load(), "the requester's engine was kicked")

	release()
	wcs := waitWC(t, b.cq, 2)
	require.Equal(t, verbs.WC{ID: 100, Status: verbs.StatusSuccess, Opcode: verbs.OpRecv, ByteLen: 64, QPN: b.qp.Num()}, wcs[0])
	require.Equal(t, uint32(7), wcs[1].Imm)
	for i, wc := range waitWC(t, a.cq, 2) {
		require.Equal(t, verbs.StatusSuccess, wc.Status)
		require.Equal(t, uint64(i+1), wc.ID)
	}
	require.Equal(t, a.mem.Bytes()[:72], b.mem.Bytes()[:72])
}

// TestTimedWaitsLeaveEnginesAsleep: consumers that wait on their CQs in
// short timed waits, as a progress loop does, leave the engines asleep,
// also right after an engine had work. It counts the engines' wake-ups,
// not time: an engine that dozes on a timer while its CQ is polled, and
// is not told when the polling stops (as this provider once did), wakes
// once or more per wait.
func TestTimedWaitsLeaveEnginesAsleep(t *testing.T) {
	a, b := pair(t, 2*inlineMax, verbs.QPConfig{})
	post(t, a.qp, write(1, a.mr, 0, b.mr, 0, 8))
	waitWC(t, a.cq, 1)
	engines := []*engine{a.qp.(*QP).running.Load(), b.qp.(*QP).running.Load()}
	wakeups := func() uint64 { return engines[0].wakeups.Load() + engines[1].wakeups.Load() }
	// Larger than what a poster executes itself: the engine does it, in
	// the middle of the waits, and must then go back to sleep.
	big := write(2, a.mr, 0, b.mr, 0, 2*inlineMax)
	big.Flags = 0

	const waits = 300
	before, start := wakeups(), time.Now()
	waitTicks(t, []*node{a, b}, waits, func() { post(t, a.qp, big) })
	// The engine that copied wakes for it and may doze once or twice
	// before the next wait hands the QP back; an engine asleep also wakes
	// by itself once per idleWait, which a slow machine may reach.
	limit := 8 + 2*uint64(time.Since(start)/idleWait+1)
	require.LessOrEqual(t, wakeups()-before, limit, "engine wake-ups during %d timed waits per CQ", waits)
}

// tick is the deadline of each wait of waitTicks: shorter than the
// engine's doze, as a busy progress loop's waits are.
const tick = 100 * time.Microsecond

// waitTicks makes each node's CQ go through n Waits of tick,
// concurrently, each ending by its deadline, and runs during meanwhile.
func waitTicks(t *testing.T, nodes []*node, n int, during func()) {
	var wg sync.WaitGroup
	for _, nd := range nodes {
		wg.Go(func() {
			wc := make([]verbs.WC, 1)
			for range n {
				ctx, cancel := context.WithTimeout(context.Background(), tick)
				k, err := nd.cq.Wait(ctx, wc)
				cancel()
				if k != 0 || err == nil {
					t.Errorf("unexpected completion %v", wc[:k])
				}
			}
		})
	}
	time.Sleep(5 * time.Millisecond) // some waits first: the pollers drive
	during()
	wg.Wait()
}
