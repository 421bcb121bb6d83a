package verbstest

import (
	"testing"

	"github.com/rdmacell/rdmacell/verbs"
	"github.com/stretchr/testify/require"
)

func testIndependentQPs(t *testing.T, p Provider) {
	const paths = 4
	e := newEnv(t, p)
	src := e.region(0, 64<<10, verbs.AccessLocalWrite)
	dst := e.region(1, paths*64<<10, remoteRW)
	fill(src.Bytes(), 11)

	var as, bs [paths]*qp
	seen := map[uint32]bool{}
	for i := range paths {
		as[i], bs[i] = e.pair(verbs.QPConfig{RNRRetry: rnrForever})
		require.False(t, seen[as[i].Num()], "QP number %d reused on one device", as[i].Num())
		seen[as[i].Num()] = true
	}
	// Path 0 stalls: its responder has no receive, so its request waits
	// in RNR retries, forever.
	post(t, as[0], writeImm(1, src, 0, 64, dst, 0, 1))

	for i := 1; i < paths; i++ {
		base := i * 64 << 10
		postRecvs(t, bs[i], uint64(i))
		var wrs []*verbs.SendWR
		for k := range 16 {
			wrs = append(wrs, unsignaled(write(uint64(k), src, k*4096, 4096, dst, base+k*4096)))
		}
		wrs = append(wrs, writeImm(100, src, 0, 0, dst, base, uint32(i)))
		post(t, as[i], chain(wrs...))
	}
	for i := 1; i < paths; i++ {
		requireOK(t, waitWC(t, as[i].send, "WRITEs beside a stalled QP"), 100, verbs.OpWriteImm, as[i].Num())
		requireImm(t, waitWC(t, bs[i].recv, "immediate beside a stalled QP"), uint64(i), uint32(i), 0, bs[i].Num())
		base := i * 64 << 10
		requireBytes(t, src.Bytes(), dst.Bytes()[base:base+64<<10], "bytes written beside a stalled QP")
	}

	requireNoWC(t, as[0].send, "stalled QP's send CQ")
	require.Equal(t, verbs.StateRTS, as[0].State(), "a QP waiting in RNR retries is still in RTS")
	postRecvs(t, bs[0], 0)
	requireOK(t, waitWC(t, as[0].send, "stalled request after its receive"), 1, verbs.OpWriteImm, as[0].Num())
	requireImm(t, waitWC(t, bs[0].recv, "stalled immediate"), 0, 1, 64, bs[0].Num())
}
