package verbstest

import (
	"testing"

	"github.com/rdmacell/rdmacell/verbs"
	"github.com/stretchr/testify/require"
)

func testRemoteAccess(t *testing.T, p Provider) {
	tests := []struct {
		name string
		// access of the target region
		access verbs.Access
		// aim turns a valid WRITE into the bad one
		aim func(wr *verbs.SendWR, dst verbs.MR)
	}{
		{"bad rkey", remoteRW, func(wr *verbs.SendWR, dst verbs.MR) { wr.RKey = ^dst.RKey() }},
		{"past the end", remoteRW, func(wr *verbs.SendWR, dst verbs.MR) { wr.RemoteAddr = dst.Addr() + uint64(dst.Len()) - 8 }},
		{"before the start", remoteRW, func(wr *verbs.SendWR, dst verbs.MR) { wr.RemoteAddr = dst.Addr() - 8 }},
		{"no remote write access", verbs.AccessLocalWrite | verbs.AccessRemoteRead, func(*verbs.SendWR, verbs.MR) {}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, p)
			a, b := e.pair(verbs.QPConfig{})
			src := e.region(0, 4096, verbs.AccessLocalWrite)
			dst := e.region(1, 8192, tt.access)
			good := e.region(1, 4096, remoteRW)
			fill(src.Bytes(), 9)
			set(dst.Bytes(), canary)
			set(good.Bytes(), canary)
			postRecvs(t, b, 70)

			// The failing request is unsignaled: a failure always completes.
			bad := unsignaled(write(1, src, 0, 16, dst, 0))
			tt.aim(bad, dst)
			post(t, a, chain(bad,
				write(2, src, 0, 64, good, 0),
				unsignaled(write(3, src, 0, 64, good, 64)),
				writeImm(4, src, 0, 64, good, 128, 1),
			))
			wcs := waitWCs(t, a.send, 4, "completions after a remote access error")
			requireStatus(t, wcs[0], 1, verbs.StatusRemoteAccess, a.Num())
			for i, wc := range wcs[1:] {
				requireStatus(t, wc, uint64(i+2), verbs.StatusWRFlush, a.Num())
			}
			require.Equal(t, verbs.StateErr, a.State(), "requester after a remote access error")
			requireAll(t, dst.Bytes(), canary, "target of the refused WRITE")
			requireAll(t, good.Bytes(), canary, "target of the flushed requests")
			// The responder may have left RTS too, as an RNIC's does, and
			// flushed its receive; the flushed immediate must not have
			// consumed it.
			var wc [2]verbs.WC
			for _, c := range wc[:b.recv.Poll(wc[:])] {
				requireStatus(t, c, 70, verbs.StatusWRFlush, b.Num())
			}

			_, err := a.PostSend(write(5, src, 0, 8, good, 0))
			require.ErrorIs(t, err, verbs.ErrInvalidState, "posting on a QP in ERR")
		})
	}
}

func testLocalProtection(t *testing.T, p Provider) {
	tests := []struct {
		name string
		aim  func(s *verbs.SGE, src verbs.MR)
	}{
		{"bad lkey", func(s *verbs.SGE, src verbs.MR) { s.LKey = ^src.LKey() }},
		{"past the local region", func(s *verbs.SGE, src verbs.MR) { s.Addr = src.Addr() + uint64(src.Len()) - 4 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, p)
			a, _ := e.pair(verbs.QPConfig{})
			src := e.region(0, 4096, verbs.AccessLocalWrite)
			dst := e.region(1, 4096, remoteRW)
			set(dst.Bytes(), canary)
			bad := write(1, src, 0, 16, dst, 0)
			tt.aim(&bad.SGL[0], src)
			post(t, a, chain(bad, write(2, src, 0, 16, dst, 16)))
			wcs := waitWCs(t, a.send, 2, "completions after a local protection error")
			requireStatus(t, wcs[0], 1, verbs.StatusLocalProtection, a.Num())
			requireStatus(t, wcs[1], 2, verbs.StatusWRFlush, a.Num())
			require.Equal(t, verbs.StateErr, a.State(), "requester after a local protection error")
			requireAll(t, dst.Bytes(), canary, "target")
		})
	}
}
