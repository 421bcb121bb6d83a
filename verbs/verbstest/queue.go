package verbstest

import (
	"testing"

	"github.com/rdmacell/rdmacell/verbs"
	"github.com/stretchr/testify/require"
)

func testSendQueueFull(t *testing.T, p Provider) {
	e := newEnv(t, p)
	a, b := e.pair(verbs.QPConfig{MaxSendWR: 4, RNRRetry: rnrForever})
	src := e.region(0, 4096, verbs.AccessLocalWrite)
	dst := e.region(1, 4096, remoteRW)

	// With no receive posted the first request blocks, so none of the
	// chain can complete while the queue is being filled.
	var wrs []*verbs.SendWR
	for i := range 6 {
		wrs = append(wrs, writeImm(uint64(i), src, 0, 8, dst, 8*i, uint32(i)))
	}
	first := chain(wrs...)
	bad, err := bounded("PostSend on a full queue", func() (*verbs.SendWR, error) { return a.PostSend(first) })
	require.ErrorIs(t, err, verbs.ErrQueueFull, "posting 6 requests on a queue of 4")
	require.Same(t, wrs[4], bad, "the first request beyond the queue's room")

	one := writeImm(9, src, 0, 8, dst, 0, 9)
	bad, err = bounded("PostSend on a full queue", func() (*verbs.SendWR, error) { return a.PostSend(one) })
	require.ErrorIs(t, err, verbs.ErrQueueFull, "posting on a full queue")
	require.Same(t, one, bad)

	postRecvs(t, b, 0, 1, 2, 3)
	for i, wc := range waitWCs(t, a.send, 4, "the 4 queued requests") {
		requireOK(t, wc, uint64(i), verbs.OpWriteImm, a.Num())
	}
	// Completed requests free their room.
	post(t, a, write(10, src, 0, 8, dst, 0))
	requireOK(t, waitWC(t, a.send, "WRITE after the queue drained"), 10, verbs.OpWrite, a.Num())
}

func testRecvQueueFull(t *testing.T, p Provider) {
	e := newEnv(t, p)
	a := e.qp(0, verbs.QPConfig{MaxRecvWR: 4})
	require.NoError(t, modify(a, verbs.StateInit, nil))
	var wrs []*verbs.RecvWR
	for i := range 5 {
		wrs = append(wrs, &verbs.RecvWR{ID: uint64(i)})
	}
	for i := 0; i+1 < len(wrs); i++ {
		wrs[i].Next = wrs[i+1]
	}
	bad, err := a.PostRecv(wrs[0])
	require.ErrorIs(t, err, verbs.ErrQueueFull, "posting 5 receives on a queue of 4")
	require.Same(t, wrs[4], bad, "the first receive beyond the queue's room")

	require.NoError(t, modify(a, verbs.StateErr, nil))
	for i, wc := range waitWCs(t, a.recv, 4, "the 4 queued receives, flushed") {
		requireStatus(t, wc, uint64(i), verbs.StatusWRFlush, a.Num())
	}
	requireNoWC(t, a.recv, "receive CQ: the refused receive was not queued")
}
