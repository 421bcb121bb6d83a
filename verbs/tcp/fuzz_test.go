package tcp

import (
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/rdmacell/rdmacell/verbs"
	"github.com/stretchr/testify/require"
)

// The responder fuzz target lays out one allocation as
//
//	guard | A (remote write) | guard | B (no remote write) | guard | C (receives) | guard
//
// and feeds a byte stream to a QP in RTR as if its authenticated peer sent
// it. Only A and the receive buffers in C may change.
const fuzzPage = 4096

type fuzzTarget struct {
	e       *env
	pd      *PD
	mem     []byte
	regions [3]verbs.MR // A, B, C
	cq      verbs.CQ
}

// fuzzEnv builds the device, memory and regions a fuzz target's inputs
// run against. Built per fuzz test, not once per process: the memory goes
// with the test's cleanup, and a second run (-count) would use it freed.
func fuzzEnv(f *testing.F) *fuzzTarget {
	e := newEnv(f)
	_, pd, _ := e.device(Options{})
	m, err := verbs.Alloc(7 * fuzzPage)
	require.NoError(f, err)
	e.mems = append(e.mems, m)
	cq, err := pd.d.CreateCQ(16)
	require.NoError(f, err)
	ft := &fuzzTarget{e: e, pd: pd, mem: m.Bytes(), cq: cq}
	access := []verbs.Access{
		verbs.AccessLocalWrite | verbs.AccessRemoteWrite,
		verbs.AccessLocalWrite | verbs.AccessRemoteRead,
		verbs.AccessLocalWrite,
	}
	for i, a := range access {
		off := (2*i + 1) * fuzzPage
		mr, err := pd.RegMR(ft.mem[off:off+fuzzPage], a)
		require.NoError(f, err)
		ft.regions[i] = mr
	}
	return ft
}

// patch makes a fuzzed stream meaningful without teaching the fuzzer our
// random keys: in each frame header, an rkey below 3 becomes the key of
// region A, B or C, and a remote address below a page becomes an offset
// into that region (A when the rkey was not an index).
func (ft *fuzzTarget) patch(b []byte) {
	for off := 0; off+headerLen <= len(b); {
		h := b[off:]
		region := ft.regions[0]
		if k := binary.BigEndian.Uint32(h[12:]); k < 3 {
			region = ft.regions[k]
			binary.BigEndian.PutUint32(h[12:], region.RKey())
		}
		if a := binary.BigEndian.Uint64(h[16:]); a < fuzzPage {
			binary.BigEndian.PutUint64(h[16:], region.Addr()+a)
		}
		off += headerLen
		if t := frameType(h[3]); t.isData() {
			off += int(binary.BigEndian.Uint32(h[24:]) % (1 << 20))
		}
	}
}

func seedFrames(hs ...header) []byte {
	var out []byte
	for _, h := range hs {
		out = append(out, frame(h, make([]byte, h.length))...)
	}
	return out
}

// FuzzResponder feeds arbitrary streams to a responder QP with registered
// regions and posted receives: it must never panic, never write outside
// region A and the posted receive buffers, and always end the connection
// and its goroutines.
func FuzzResponder(f *testing.F) {
	f.Add(seedFrames(header{typ: frameWrite, flags: flagAckReq, psn: 0, rkey: 0, raddr: 100, length: 64}))
	f.Add(seedFrames(
		header{typ: frameWrite, psn: 0, rkey: 0, raddr: 0, length: 16},
		header{typ: frameWriteImm, psn: 1, rkey: 0, raddr: 4000, length: 96, imm: 5},
		header{typ: frameSend, flags: flagAckReq, psn: 2, length: 150},
		header{typ: frameSend, psn: 3, length: 16},
	))
	// Signaled WRITE_WITH_IMMs, whose acknowledgements are held for an
	// answer, between a signaled WRITE and a lazy one.
	f.Add(seedFrames(
		header{typ: frameWriteImm, flags: flagAckReq, psn: 0, rkey: 0, raddr: 0, length: 8, imm: 1},
		header{typ: frameWrite, flags: flagAckReq, psn: 1, rkey: 0, raddr: 8, length: 8},
		header{typ: frameWriteImm, flags: flagAckReq, psn: 2, rkey: 0, raddr: 16, length: 0, imm: 2},
		header{typ: frameWrite, flags: flagAckLazy, psn: 3, rkey: 0, raddr: 24, length: 8},
	))
	f.Add(seedFrames(header{typ: frameWrite, psn: 0, rkey: 1, raddr: 0, length: 8}))
	f.Add(seedFrames(header{typ: frameWrite, psn: 0, rkey: 0, raddr: 4090, length: 8}))
	f.Add(seedFrames(header{typ: frameSend, psn: 0, length: 300}))
	f.Add(seedFrames(header{typ: frameAck, psn: 0}, header{typ: frameRNR, psn: 0}))
	f.Add(seedFrames(header{typ: frameWrite, psn: 0, rkey: 0, raddr: 0, length: 8}, header{typ: frameBye},
		header{typ: frameWrite, psn: 1, rkey: 0, raddr: 8, length: 8}))
	f.Add([]byte("not a frame at all, but long enough to hold a header"))
	ft := fuzzEnv(f)
	f.Fuzz(func(t *testing.T, stream []byte) {
		ft.patch(stream)
		for i := range ft.mem {
			ft.mem[i] = 0xa5
		}
		vq, err := ft.pd.CreateQP(verbs.QPConfig{SendCQ: ft.cq, RecvCQ: ft.cq, MaxSGE: 2})
		require.NoError(t, err)
		q := vq.(*QP)
		defer func() {
			require.NoError(t, q.Close())
			var wc [8]verbs.WC
			for ft.cq.Poll(wc[:]) > 0 {
			}
		}()
		require.NoError(t, q.Modify(verbs.StateInit, nil))
		c := ft.regions[2]
		recvs := []*verbs.RecvWR{
			{ID: 1, SGL: []verbs.SGE{sgeOf(c, 0, 100), sgeOf(c, 200, 100)}},
			{ID: 2, SGL: []verbs.SGE{sgeOf(c, 1000, 16)}},
		}
		recvs[0].Next = recvs[1]
		_, err = q.PostRecv(recvs[0])
		require.NoError(t, err)
		peer := verbs.Endpoint{Provider: "tcp", Addr: fakePeer.Addr, QPN: 1, PSN: 0}
		require.NoError(t, q.Modify(verbs.StateRTR, &peer))

		ours, theirs := net.Pipe()
		q.mu.Lock()
		l := newLinkLocked(q, ours)
		q.mu.Unlock()
		l.start()
		replies := drain(theirs)
		_, _ = theirs.Write(stream)
		theirs.Close()
		select {
		case <-replies:
		case <-time.After(waitLimit):
			require.FailNow(t, "the responder did not end the connection")
		}
		done := make(chan struct{})
		go func() { l.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(waitLimit):
			require.FailNow(t, "the link's goroutines did not end")
		}

		may := make([]bool, len(ft.mem))
		mark := func(mr verbs.MR, off, n int) {
			base := int(mr.Addr()-verbs.AddrOf(ft.mem)) + off
			for i := base; i < base+n; i++ {
				may[i] = true
			}
		}
		mark(ft.regions[0], 0, fuzzPage)
		mark(c, 0, 100)
		mark(c, 200, 100)
		mark(c, 1000, 16)
		for i, b := range ft.mem {
			if !may[i] && b != 0xa5 {
				require.FailNowf(t, "write outside the allowed memory", "byte %d of the allocation changed to %#x", i, b)
			}
		}
	})
}
