package verbstest

import (
	"testing"

	"github.com/rdmacell/rdmacell/verbs"
	"github.com/stretchr/testify/require"
)

// canary fills target memory before a test, so that any byte a provider
// touches by mistake shows.
const canary = 0xa5

func testWritePlacement(t *testing.T, p Provider) {
	e := newEnv(t, p)
	a, b := e.pair(verbs.QPConfig{})
	src := e.region(0, 64<<10, verbs.AccessLocalWrite)
	dst := e.region(1, 64<<10, remoteRW)
	// A WRITE must not consume a receive: one stays posted throughout.
	postRecvs(t, b, 99)

	tests := []struct {
		name          string
		soff, doff, n int
	}{
		{"zero length", 0, 0, 0},
		{"one byte", 0, 0, 1},
		{"aligned page", 4096, 8192, 4096},
		{"unaligned both ends", 3, 5, 61},
		{"odd size across pages", 4093, 4091, 4099},
		{"unaligned many pages", 1, 7, 5*4096 + 13},
		{"last byte of region", 100, 64<<10 - 1, 1},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fill(src.Bytes(), uint64(i))
			set(dst.Bytes(), canary)
			id := uint64(i + 1)
			post(t, a, write(id, src, tt.soff, tt.n, dst, tt.doff))
			requireOK(t, waitWC(t, a.send, "WRITE completion"), id, verbs.OpWrite, a.Num())

			d := dst.Bytes()
			requireBytes(t, src.Bytes()[tt.soff:tt.soff+tt.n], d[tt.doff:tt.doff+tt.n], "written bytes")
			requireAll(t, d[:tt.doff], canary, "bytes before the target")
			requireAll(t, d[tt.doff+tt.n:], canary, "bytes after the target")
		})
	}
	requireNoWC(t, b.recv, "responder receive CQ after plain WRITEs")
}

func testWriteScatterGather(t *testing.T, p Provider) {
	e := newEnv(t, p)
	a, _ := e.pair(verbs.QPConfig{MaxSGE: 4})
	s1 := e.region(0, 16<<10, verbs.AccessLocalWrite)
	s2 := e.region(0, 16<<10, verbs.AccessLocalWrite)
	dst := e.region(1, 32<<10, remoteRW)
	fill(s1.Bytes(), 1)
	fill(s2.Bytes(), 2)
	set(dst.Bytes(), canary)

	parts := []struct {
		mr     verbs.MR
		off, n int
	}{{s1, 1, 99}, {s2, 7, 3993}, {s1, 5000, 1}, {s2, 10000, 2001}}
	wr := &verbs.SendWR{ID: 7, Opcode: verbs.OpWrite, Flags: verbs.Signaled,
		RemoteAddr: dst.Addr() + 3, RKey: dst.RKey()}
	var want []byte
	for _, pt := range parts {
		wr.SGL = append(wr.SGL, sge(pt.mr, pt.off, pt.n))
		want = append(want, pt.mr.Bytes()[pt.off:pt.off+pt.n]...)
	}
	post(t, a, wr)
	requireOK(t, waitWC(t, a.send, "gathered WRITE"), 7, verbs.OpWrite, a.Num())
	d := dst.Bytes()
	requireAll(t, d[:3], canary, "bytes before the target")
	requireBytes(t, want, d[3:3+len(want)], "gathered bytes")
	requireAll(t, d[3+len(want):], canary, "bytes after the target")
}

func testWriteLarge(t *testing.T, p Provider) {
	const size = 64 << 20
	e := newEnv(t, p)
	a, _ := e.pair(verbs.QPConfig{})
	src := e.region(0, size, verbs.AccessLocalWrite)
	dst := e.region(1, size, remoteRW)
	fill(src.Bytes(), 64)
	post(t, a, write(1, src, 0, size, dst, 0))
	requireOK(t, waitWC(t, a.send, "64 MiB WRITE"), 1, verbs.OpWrite, a.Num())
	requireBytes(t, src.Bytes(), dst.Bytes(), "64 MiB written")
}

func testWriteTooManySGEs(t *testing.T, p Provider) {
	e := newEnv(t, p)
	a, _ := e.pair(verbs.QPConfig{MaxSGE: 2})
	src := e.region(0, 4096, verbs.AccessLocalWrite)
	dst := e.region(1, 4096, remoteRW)
	wr := write(1, src, 0, 10, dst, 0)
	wr.SGL = append(wr.SGL, sge(src, 10, 10), sge(src, 20, 10))
	bad, err := a.PostSend(wr)
	require.ErrorIs(t, err, verbs.ErrInvalidArgument, "3 SGEs on a QP with MaxSGE 2")
	require.Same(t, wr, bad, "the rejected request is returned as bad")
	require.Equal(t, verbs.StateRTS, a.State(), "a rejected post leaves the QP usable")

	wr.SGL = wr.SGL[:2]
	post(t, a, wr)
	requireOK(t, waitWC(t, a.send, "WRITE with 2 SGEs"), 1, verbs.OpWrite, a.Num())
}

func testSignaledOnly(t *testing.T, p Provider) {
	e := newEnv(t, p)
	a, _ := e.pair(verbs.QPConfig{})
	src := e.region(0, 4096, verbs.AccessLocalWrite)
	dst := e.region(1, 4096, remoteRW)
	fill(src.Bytes(), 3)
	var wrs []*verbs.SendWR
	var want []uint64
	for i := range 10 {
		wr := write(uint64(i), src, i*100, 100, dst, i*100)
		if i%3 == 2 || i == 9 {
			want = append(want, uint64(i))
		} else {
			unsignaled(wr)
		}
		wrs = append(wrs, wr)
	}
	post(t, a, chain(wrs...))
	wcs := waitWCs(t, a.send, len(want), "signaled WRITEs")
	for i, wc := range wcs {
		requireOK(t, wc, want[i], verbs.OpWrite, a.Num())
	}
	// The last request was signaled, so every earlier one has finished:
	// an unsignaled success must not have left a completion behind.
	requireNoWC(t, a.send, "send CQ after the last signaled WRITE")
	requireBytes(t, src.Bytes()[:1000], dst.Bytes()[:1000], "written bytes")
}

// testRelaxed posts signaled WRITEs marked Relaxed, some alone and some
// in a chain with plain ones: each still completes, in order, with its
// data in place, though nothing the peer writes comes to carry an early
// acknowledgement.
func testRelaxed(t *testing.T, p Provider) {
	e := newEnv(t, p)
	a, _ := e.pair(verbs.QPConfig{})
	src := e.region(0, 4096, verbs.AccessLocalWrite)
	dst := e.region(1, 4096, remoteRW)
	fill(src.Bytes(), 5)
	lone := write(0, src, 0, 64, dst, 0)
	lone.Flags |= verbs.Relaxed
	post(t, a, lone)
	requireOK(t, waitWC(t, a.send, "a lone relaxed WRITE"), 0, verbs.OpWrite, a.Num())
	var wrs []*verbs.SendWR
	for i := 1; i < 5; i++ {
		wr := write(uint64(i), src, i*64, 64, dst, i*64)
		if i%2 == 1 {
			wr.Flags |= verbs.Relaxed
		}
		wrs = append(wrs, wr)
	}
	post(t, a, chain(wrs...))
	for i, wc := range waitWCs(t, a.send, len(wrs), "a chain of relaxed and plain WRITEs") {
		requireOK(t, wc, uint64(i+1), verbs.OpWrite, a.Num())
	}
	requireBytes(t, src.Bytes()[:320], dst.Bytes()[:320], "written bytes")
}
