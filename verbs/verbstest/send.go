package verbstest

import (
	"testing"

	"github.com/rdmacell/rdmacell/verbs"
	"github.com/stretchr/testify/require"
)

func testSendScatter(t *testing.T, p Provider) {
	e := newEnv(t, p)
	a, b := e.pair(verbs.QPConfig{MaxSGE: 4})
	src := e.region(0, 4096, verbs.AccessLocalWrite)
	r1 := e.region(1, 4096, verbs.AccessLocalWrite)
	r2 := e.region(1, 4096, verbs.AccessLocalWrite)
	fill(src.Bytes(), 8)
	set(r1.Bytes(), canary)
	set(r2.Bytes(), canary)

	bad, err := b.PostRecv(&verbs.RecvWR{ID: 50, SGL: []verbs.SGE{sge(r1, 0, 10), sge(r2, 100, 20), sge(r1, 50, 100)}})
	require.NoError(t, err)
	require.Nil(t, bad)
	postRecvs(t, b, 51)
	post(t, a, chain(
		&verbs.SendWR{ID: 1, Opcode: verbs.OpSend, Flags: verbs.Signaled,
			SGL: []verbs.SGE{sge(src, 0, 30), sge(src, 1000, 20)}},
		&verbs.SendWR{ID: 2, Opcode: verbs.OpSend, Flags: verbs.Signaled},
	))
	wcs := waitWCs(t, a.send, 2, "SEND completions")
	requireOK(t, wcs[0], 1, verbs.OpSend, a.Num())
	requireOK(t, wcs[1], 2, verbs.OpSend, a.Num())

	wcs = waitWCs(t, b.recv, 2, "receive completions")
	requireOK(t, wcs[0], 50, verbs.OpRecv, b.Num())
	require.Equal(t, uint32(50), wcs[0].ByteLen, "bytes received: %+v", wcs[0])
	require.Zero(t, wcs[0].Flags&verbs.WCWithImm, "a SEND carries no immediate: %+v", wcs[0])
	requireOK(t, wcs[1], 51, verbs.OpRecv, b.Num())
	require.Zero(t, wcs[1].ByteLen, "bytes of an empty SEND: %+v", wcs[1])

	sent := append(append([]byte(nil), src.Bytes()[:30]...), src.Bytes()[1000:1020]...)
	requireBytes(t, sent[:10], r1.Bytes()[:10], "first receive element")
	requireBytes(t, sent[10:30], r2.Bytes()[100:120], "second receive element")
	requireBytes(t, sent[30:], r1.Bytes()[50:70], "third receive element")
	requireAll(t, r1.Bytes()[10:50], canary, "gap between receive elements")
	requireAll(t, r1.Bytes()[70:], canary, "rest of the third receive element")
	requireAll(t, r2.Bytes()[:100], canary, "bytes before the second element")
	requireAll(t, r2.Bytes()[120:], canary, "bytes after the second element")
}

func testSendTooLarge(t *testing.T, p Provider) {
	e := newEnv(t, p)
	a, b := e.pair(verbs.QPConfig{})
	src := e.region(0, 4096, verbs.AccessLocalWrite)
	dst := e.region(1, 4096, verbs.AccessLocalWrite)
	bad, err := b.PostRecv(&verbs.RecvWR{ID: 60, SGL: []verbs.SGE{sge(dst, 0, 16)}})
	require.NoError(t, err)
	require.Nil(t, bad)
	post(t, a, &verbs.SendWR{ID: 1, Opcode: verbs.OpSend, Flags: verbs.Signaled, SGL: []verbs.SGE{sge(src, 0, 32)}})

	requireStatus(t, waitWC(t, a.send, "oversized SEND"), 1, verbs.StatusRemoteInvalidRequest, a.Num())
	requireStatus(t, waitWC(t, b.recv, "receive too small"), 60, verbs.StatusLocalLength, b.Num())
	require.Equal(t, verbs.StateErr, a.State(), "requester after a remote error")
}
