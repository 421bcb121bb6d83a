package verbstest

import (
	"fmt"
	"testing"
	"time"

	"github.com/rdmacell/rdmacell/verbs"
	"github.com/stretchr/testify/require"
)

// rnrForever is the RNR retry count that never gives up, as in ibverbs.
const rnrForever = 7

// requireImm checks the responder's completion of a WRITE_WITH_IMM.
func requireImm(t *testing.T, wc verbs.WC, recvID uint64, imm, n uint32, qpn uint32) {
	t.Helper()
	requireOK(t, wc, recvID, verbs.OpRecvWriteImm, qpn)
	require.NotZero(t, wc.Flags&verbs.WCWithImm, "immediate flag of %+v", wc)
	require.Equal(t, imm, wc.Imm, "immediate of %+v", wc)
	require.Equal(t, n, wc.ByteLen, "byte length of %+v", wc)
}

func testWriteImmConsumesReceive(t *testing.T, p Provider) {
	e := newEnv(t, p)
	a, b := e.pair(verbs.QPConfig{})
	src := e.region(0, 4096, verbs.AccessLocalWrite)
	dst := e.region(1, 4096, remoteRW)
	fill(src.Bytes(), 5)
	postRecvs(t, b, 100, 101, 102)

	post(t, a, chain(
		writeImm(1, src, 0, 300, dst, 17, 0xc0ffee01),
		writeImm(2, src, 0, 0, dst, 0, 0xffffffff),
	))
	for i, wc := range waitWCs(t, a.send, 2, "WRITE_WITH_IMM completions") {
		requireOK(t, wc, uint64(i+1), verbs.OpWriteImm, a.Num())
	}
	wcs := waitWCs(t, b.recv, 2, "responder immediate completions")
	requireImm(t, wcs[0], 100, 0xc0ffee01, 300, b.Num())
	requireImm(t, wcs[1], 101, 0xffffffff, 0, b.Num())
	requireBytes(t, src.Bytes()[:300], dst.Bytes()[17:317], "bytes of the WRITE_WITH_IMM")

	// Exactly one receive per immediate: the third is still posted and is
	// flushed when the responder leaves RTS.
	requireNoWC(t, b.recv, "responder receive CQ")
	require.NoError(t, modify(b, verbs.StateErr, nil))
	requireStatus(t, waitWC(t, b.recv, "flushed receive"), 102, verbs.StatusWRFlush, b.Num())
}

func testRNRRetryExceeded(t *testing.T, p Provider) {
	for _, retries := range []int{0, 2} {
		t.Run(fmt.Sprintf("retries=%d", retries), func(t *testing.T) {
			e := newEnv(t, p)
			a, b := e.pair(verbs.QPConfig{RNRRetry: retries, MinRNRTimer: time.Millisecond})
			src := e.region(0, 4096, verbs.AccessLocalWrite)
			dst := e.region(1, 4096, remoteRW)
			post(t, a, chain(
				writeImm(1, src, 0, 64, dst, 0, 1),
				write(2, src, 0, 64, dst, 64),
			))
			wcs := waitWCs(t, a.send, 2, "completions after RNR")
			requireStatus(t, wcs[0], 1, verbs.StatusRNRRetryExceeded, a.Num())
			requireStatus(t, wcs[1], 2, verbs.StatusWRFlush, a.Num())
			require.Equal(t, verbs.StateErr, a.State(), "requester after an RNR error")
			requireAll(t, dst.Bytes()[64:128], 0, "target of the flushed WRITE")
			requireNoWC(t, b.recv, "responder receive CQ")
		})
	}
}

func testRNRRecovers(t *testing.T, p Provider) {
	tests := []struct {
		name    string
		retry   int
		timer   time.Duration
		timeout time.Duration // the QP's transport Timeout, 0 for the default
		wait    time.Duration // before the receive is posted
	}{
		{"retry forever", rnrForever, time.Millisecond, 0, 10 * time.Millisecond},
		// Six retries 200ms apart leave far more than the test needs to
		// post the receive.
		{"within the retry window", 6, 200 * time.Millisecond, 0, 10 * time.Millisecond},
		// "Not ready" answers come from a live responder: they are not
		// the silence the transport timeout is about.
		{"retry forever outlasts the transport timeout", rnrForever, time.Millisecond, 20 * time.Millisecond, 200 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, p)
			a, b := e.pair(verbs.QPConfig{RNRRetry: tt.retry, MinRNRTimer: tt.timer, Timeout: tt.timeout})
			src := e.region(0, 4096, verbs.AccessLocalWrite)
			dst := e.region(1, 4096, remoteRW)
			fill(src.Bytes(), 6)
			post(t, a, writeImm(1, src, 0, 100, dst, 0, 42))
			// Give the request time to meet the empty receive queue; the
			// outcome below does not depend on whether it did.
			time.Sleep(tt.wait)
			requireNoWC(t, a.send, "requester CQ while no receive is posted")
			postRecvs(t, b, 7)
			requireImm(t, waitWC(t, b.recv, "immediate after the late receive"), 7, 42, 100, b.Num())
			requireOK(t, waitWC(t, a.send, "WRITE_WITH_IMM after RNR"), 1, verbs.OpWriteImm, a.Num())
			requireBytes(t, src.Bytes()[:100], dst.Bytes()[:100], "written bytes")
			require.Equal(t, verbs.StateRTS, a.State())
		})
	}
}

func testChainImmProvesWrite(t *testing.T, p Provider) {
	const maxLen = 256 << 10
	e := newEnv(t, p)
	a, b := e.pair(verbs.QPConfig{})
	src := e.region(0, maxLen, verbs.AccessLocalWrite)
	dst := e.region(1, maxLen, remoteRW)
	for i := range 64 {
		n := 8 + (i*7919*13)%(maxLen-8)
		half := n / 2
		fill(src.Bytes()[:n], uint64(1000+i))
		postRecvs(t, b, uint64(i))
		post(t, a, chain(
			unsignaled(write(uint64(3*i), src, 0, half, dst, 0)),
			unsignaled(write(uint64(3*i+1), src, half, n-4-half, dst, half)),
			writeImm(uint64(3*i+2), src, n-4, 4, dst, n-4, uint32(i)),
		))
		// Check at the responder's completion, before the requester's:
		// the immediate alone must prove the whole chain landed.
		requireImm(t, waitWC(t, b.recv, "immediate of the chain"), uint64(i), uint32(i), 4, b.Num())
		requireBytes(t, src.Bytes()[:n], dst.Bytes()[:n], "chain payload at its immediate")
		requireOK(t, waitWC(t, a.send, "chain completion"), uint64(3*i+2), verbs.OpWriteImm, a.Num())
	}
}
