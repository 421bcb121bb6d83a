package shm

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/verbs"
)

func TestWriteImmConsumesReceive(t *testing.T) {
	tests := []struct {
		name   string
		off, n int
	}{
		{"small", 0, 8},
		{"unaligned", 13, 4099},
		{"zero length", 0, 0},
		{"large", 0, 3 << 20},
	}
	a, b := pair(t, 4<<20, verbs.QPConfig{})
	fill(a.mem.Bytes(), 9)
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clear(b.mem.Bytes())
			postRecv(t, b.qp, 100+uint64(i))
			post(t, a.qp, writeImm(uint64(i), a.mr, 0, b.mr, tc.off, tc.n, 0xabc0+uint32(i)))
			got := waitWC(t, b.cq, 1)[0]
			require.Equal(t, verbs.WC{ID: 100 + uint64(i), Status: verbs.StatusSuccess, Opcode: verbs.OpRecvWriteImm,
				Flags: verbs.WCWithImm, ByteLen: uint32(tc.n), Imm: 0xabc0 + uint32(i), QPN: b.qp.Num()}, got)
			require.Equal(t, a.mem.Bytes()[:tc.n], b.mem.Bytes()[tc.off:tc.off+tc.n])
			sent := waitWC(t, a.cq, 1)[0]
			require.Equal(t, verbs.WC{ID: uint64(i), Status: verbs.StatusSuccess, Opcode: verbs.OpWriteImm, ByteLen: uint32(tc.n), QPN: a.qp.Num()}, sent)
		})
	}
}

func TestSendScattersIntoReceive(t *testing.T) {
	const size = 1 << 20
	tests := []struct {
		name string
		n    int
		sgl  func(mr verbs.MR) []verbs.SGE // receive buffers
	}{
		{"small", 100, func(mr verbs.MR) []verbs.SGE { return sge(mr, 7, 100) }},
		{"zero length", 0, func(mr verbs.MR) []verbs.SGE { return sge(mr, 0, 10) }},
		{"across three buffers", 5000, func(mr verbs.MR) []verbs.SGE {
			return []verbs.SGE{
				{Addr: mr.Addr() + 1, Length: 1000, LKey: mr.LKey()},
				{Addr: mr.Addr() + 9000, Length: 3000, LKey: mr.LKey()},
				{Addr: mr.Addr() + 50000, Length: 2000, LKey: mr.LKey()},
			}
		}},
		{"larger than the staging area", 3*stagingSize + 123, func(mr verbs.MR) []verbs.SGE {
			return []verbs.SGE{
				{Addr: mr.Addr(), Length: stagingSize + 1, LKey: mr.LKey()},
				{Addr: mr.Addr() + 2*stagingSize, Length: 3 * stagingSize, LKey: mr.LKey()},
			}
		}},
	}
	a, b := pair(t, size, verbs.QPConfig{})
	fill(a.mem.Bytes(), 1)
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clear(b.mem.Bytes())
			sgl := tc.sgl(b.mr)
			postRecv(t, b.qp, 200+uint64(i), sgl...)
			post(t, a.qp, &verbs.SendWR{ID: uint64(i), Opcode: verbs.OpSend, Flags: verbs.Signaled, SGL: sge(a.mr, 0, tc.n)})
			require.Equal(t, verbs.WC{ID: 200 + uint64(i), Status: verbs.StatusSuccess, Opcode: verbs.OpRecv,
				ByteLen: uint32(tc.n), QPN: b.qp.Num()}, waitWC(t, b.cq, 1)[0])
			require.Equal(t, verbs.StatusSuccess, waitWC(t, a.cq, 1)[0].Status)
			var got []byte
			for _, s := range sgl {
				off := int(s.Addr - b.mr.Addr())
				got = append(got, b.mem.Bytes()[off:off+int(s.Length)]...)
			}
			require.Equal(t, a.mem.Bytes()[:tc.n], got[:tc.n])
		})
	}
}

func TestSendLargerThanReceiveFailsBothSides(t *testing.T) {
	a, b := pair(t, 1<<16, verbs.QPConfig{})
	postRecv(t, b.qp, 7, sge(b.mr, 0, 10)...)
	post(t, a.qp, &verbs.SendWR{ID: 1, Opcode: verbs.OpSend, Flags: verbs.Signaled, SGL: sge(a.mr, 0, 11)})
	require.Equal(t, verbs.StatusRemoteInvalidRequest, waitWC(t, a.cq, 1)[0].Status)
	got := waitWC(t, b.cq, 1)[0]
	require.Equal(t, verbs.StatusLocalLength, got.Status)
	require.Equal(t, uint64(7), got.ID)
	require.Equal(t, verbs.StateErr, a.qp.State())
}

// TestChainWriteVisibleAtImm posts many [WRITE, WRITE_WITH_IMM] chains at
// once, each into its own slot, and checks at each immediate completion
// that the WRITE's bytes are already in place.
func TestChainWriteVisibleAtImm(t *testing.T) {
	const slot, cells = 64 << 10, 32
	a, b := pair(t, slot*cells, verbs.QPConfig{})
	for i := range cells {
		postRecv(t, b.qp, uint64(i))
	}
	for i := range cells {
		src := a.mem.Bytes()[i*slot : (i+1)*slot]
		fill(src, byte(i))
		w := write(0, a.mr, i*slot, b.mr, i*slot, slot-8)
		w.Flags = 0
		w.Next = writeImm(uint64(i), a.mr, i*slot+slot-8, b.mr, i*slot+slot-8, 8, uint32(i))
		post(t, a.qp, w)
	}
	for range cells {
		wc := waitWC(t, b.cq, 1)[0]
		require.Equal(t, verbs.StatusSuccess, wc.Status)
		i := int(wc.Imm)
		require.Equal(t, a.mem.Bytes()[i*slot:(i+1)*slot], b.mem.Bytes()[i*slot:(i+1)*slot], "cell %d", i)
	}
	// Unsignaled WRITEs produce nothing: only the immediates complete.
	for i, wc := range waitWC(t, a.cq, cells) {
		require.Equal(t, uint64(i), wc.ID)
		require.Equal(t, verbs.OpWriteImm, wc.Opcode)
	}
	noWC(t, a.cq)
}

func TestRNR(t *testing.T) {
	tests := []struct {
		name     string
		rnrRetry int
	}{
		{"no retry", 0},
		{"three retries", 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := verbs.QPConfig{RNRRetry: tc.rnrRetry, MinRNRTimer: time.Millisecond}
			a, b := pair(t, 4096, cfg)
			w := writeImm(1, a.mr, 0, b.mr, 0, 16, 5)
			w.Next = write(2, a.mr, 0, b.mr, 100, 16)
			post(t, a.qp, w)
			wcs := waitWC(t, a.cq, 2)
			require.Equal(t, verbs.StatusRNRRetryExceeded, wcs[0].Status)
			require.Equal(t, uint64(1), wcs[0].ID)
			require.Equal(t, verbs.WC{ID: 2, Status: verbs.StatusWRFlush, Opcode: verbs.OpWrite, QPN: a.qp.Num()}, wcs[1])
			require.Equal(t, verbs.StateErr, a.qp.State())
			// The WRITE behind the failed request never ran.
			require.Zero(t, countNonZero(b.mem.Bytes()[100:116]))
			noWC(t, b.cq)
		})
	}
}

// TestRNRRetriesUntilReceivePosted leaves the responder without a receive
// for several times the requester's timeout: with RNRRetry 7 the requester
// keeps waiting as long as the responder keeps retrying. (The timeout is
// kept well above the RNR timer, so that a loaded machine oversleeping a
// timer does not fail the request.)
func TestRNRRetriesUntilReceivePosted(t *testing.T) {
	cfg := verbs.QPConfig{RNRRetry: 7, MinRNRTimer: time.Millisecond, Timeout: 50 * time.Millisecond}
	a, b := pair(t, 4096, cfg)
	post(t, a.qp, writeImm(1, a.mr, 0, b.mr, 0, 4, 77))
	time.Sleep(250 * time.Millisecond)
	noWC(t, a.cq)
	postRecv(t, b.qp, 9)
	require.Equal(t, uint32(77), waitWC(t, b.cq, 1)[0].Imm)
	require.Equal(t, verbs.StatusSuccess, waitWC(t, a.cq, 1)[0].Status)
	require.Equal(t, verbs.StateRTS, a.qp.State())
}
