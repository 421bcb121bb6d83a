package shm

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/verbs"
)

// TestResetAndConnectToAnotherQP takes a QP through RESET and connects it
// to a new QP of the same peer device, as recovery of a path does.
func TestResetAndConnectToAnotherQP(t *testing.T) {
	a, b := pair(t, 4096, verbs.QPConfig{})
	post(t, a.qp, write(1, a.mr, 0, b.mr, 0, 8))
	require.Equal(t, verbs.StatusSuccess, waitWC(t, a.cq, 1)[0].Status)

	require.NoError(t, a.qp.Modify(verbs.StateErr, nil))
	require.NoError(t, a.qp.Modify(verbs.StateReset, nil))
	require.NoError(t, a.qp.Modify(verbs.StateInit, nil))
	c := newNode(t, b.dev, 4096, rw, verbs.QPConfig{})
	connect(t, a, c)

	fill(a.mem.Bytes(), 5)
	postRecv(t, c.qp, 30)
	post(t, a.qp, writeImm(2, a.mr, 0, c.mr, 100, 1000, 9))
	require.Equal(t, verbs.OpRecvWriteImm, waitWC(t, c.cq, 1)[0].Opcode)
	require.Equal(t, a.mem.Bytes()[:1000], c.mem.Bytes()[100:1100])
	require.Equal(t, verbs.StatusSuccess, waitWC(t, a.cq, 1)[0].Status)

	// The old peer lost its connection: its requests fail.
	post(t, b.qp, write(3, b.mr, 0, a.mr, 0, 8))
	require.Equal(t, verbs.StatusRetryExceeded, waitWC(t, b.cq, 1)[0].Status)
}

// TestIdleEnginesSleep checks that engines stop polling once idle and are
// woken through the futex by the next request.
func TestIdleEnginesSleep(t *testing.T) {
	a, b := pair(t, 4096, verbs.QPConfig{})
	asleep := func(n *node) func() bool {
		return func() bool {
			l := n.qp.(*QP).link.Load()
			return l != nil && atomic.LoadUint32(l.pair.bell(l.pair.side).sleeping) == 1
		}
	}
	for round := range 3 {
		require.Eventually(t, asleep(a), waitLimit, time.Millisecond, "requester engine asleep")
		require.Eventually(t, asleep(b), waitLimit, time.Millisecond, "responder engine asleep")
		postRecv(t, b.qp, uint64(round))
		post(t, a.qp, writeImm(uint64(round), a.mr, 0, b.mr, 0, 8, uint32(round)))
		require.Equal(t, uint32(round), waitWC(t, b.cq, 1)[0].Imm)
		require.Equal(t, verbs.StatusSuccess, waitWC(t, a.cq, 1)[0].Status)
	}
}

// TestPeerMemoryMappedOnceAndReleased: every QP to a peer device shares
// one mapping of each memory file, and mappings of memory no region lies
// in any more are dropped.
func TestPeerMemoryMappedOnceAndReleased(t *testing.T) {
	da, db := openDevice(t), openDevice(t)
	a1, b1 := newNode(t, da, 1<<16, rw, verbs.QPConfig{}), newNode(t, db, 1<<16, rw, verbs.QPConfig{})
	connect(t, a1, b1)
	a2 := newNode(t, da, 1<<16, rw, verbs.QPConfig{})
	b2, err := b1.pd.CreateQP(verbs.QPConfig{SendCQ: b1.cq, RecvCQ: b1.cq})
	require.NoError(t, err)
	t.Cleanup(func() { _ = b2.Close() })
	require.NoError(t, b2.Modify(verbs.StateInit, nil))
	connect(t, a2, &node{qp: b2})
	for i, n := range []*node{a1, a2} {
		post(t, n.qp, write(uint64(i), n.mr, 0, b1.mr, 0, 64))
		require.Equal(t, verbs.StatusSuccess, waitWC(t, n.cq, 1)[0].Status)
	}
	p := da.peers[db.Addr()]
	require.NotNil(t, p)
	require.Len(t, p.mems, 1, "one mapping for both QPs")
	old := p.mems[b1.mr.(*MR).file.id]
	require.NotNil(t, old)

	// Replace the target memory.
	mem, err := verbs.Alloc(1 << 16)
	require.NoError(t, err)
	mr, err := b1.pd.RegMR(mem.Bytes(), rw)
	require.NoError(t, err)
	require.NoError(t, b1.mr.Close())
	t.Cleanup(func() { _ = mr.Close(); _ = mem.Free() })
	post(t, a1.qp, write(9, a1.mr, 0, mr, 0, 64))
	require.Equal(t, verbs.StatusSuccess, waitWC(t, a1.cq, 1)[0].Status)
	require.Len(t, p.mems, 1)
	require.NotNil(t, p.mems[mr.(*MR).file.id])
	require.True(t, old.gone.Load(), "the old mapping is unmapped")
}
