package verbstest

import (
	"testing"

	"github.com/rdmacell/rdmacell/verbs"
	"github.com/stretchr/testify/require"
)

var allStates = []verbs.QPState{verbs.StateReset, verbs.StateInit, verbs.StateRTR, verbs.StateRTS, verbs.StateErr}

func testPostOutsideRTS(t *testing.T, p Provider) {
	e := newEnv(t, p)
	a, b := e.qp(0, verbs.QPConfig{}), e.qp(1, verbs.QPConfig{})
	src := e.region(0, 4096, verbs.AccessLocalWrite)
	dst := e.region(1, 4096, remoteRW)
	set(dst.Bytes(), canary)

	requirePostRefused := func(st verbs.QPState) {
		t.Helper()
		require.Equal(t, st, a.State())
		wr := write(1, src, 0, 8, dst, 0)
		bad, err := a.PostSend(wr)
		require.ErrorIs(t, err, verbs.ErrInvalidState, "post send in %v", st)
		require.Same(t, wr, bad, "post send in %v returns the refused request", st)
	}

	requirePostRefused(verbs.StateReset)
	rwr := &verbs.RecvWR{ID: 1}
	bad, err := a.PostRecv(rwr)
	require.ErrorIs(t, err, verbs.ErrInvalidState, "post receive in RESET")
	require.Same(t, rwr, bad)

	require.NoError(t, modify(a, verbs.StateInit, nil))
	require.NoError(t, modify(b, verbs.StateInit, nil))
	requirePostRefused(verbs.StateInit)
	postRecvs(t, a, 10) // receives are allowed from INIT on

	ea, eb := viaJSON(t, a.Endpoint()), viaJSON(t, b.Endpoint())
	both(t, verbs.StateRTR, a, &eb, b, &ea)
	requirePostRefused(verbs.StateRTR)
	postRecvs(t, a, 11)

	both(t, verbs.StateRTS, a, nil, b, nil)
	require.NoError(t, modify(a, verbs.StateErr, nil))
	requirePostRefused(verbs.StateErr)

	wcs := waitWCs(t, a.recv, 2, "receives posted in INIT and RTR, flushed")
	requireStatus(t, wcs[0], 10, verbs.StatusWRFlush, a.Num())
	requireStatus(t, wcs[1], 11, verbs.StatusWRFlush, a.Num())
	requireNoWC(t, a.send, "send CQ after refused posts")
	requireAll(t, dst.Bytes(), canary, "target of refused posts")
}

func testTransitions(t *testing.T, p Provider) {
	e := newEnv(t, p)
	// at builds a QP in state st (with a peer where st needs one) and
	// returns it with its peer's endpoint.
	at := func(st verbs.QPState) (*qp, verbs.Endpoint) {
		a, b := e.qp(0, verbs.QPConfig{}), e.qp(1, verbs.QPConfig{})
		if st == verbs.StateReset {
			return a, verbs.Endpoint{}
		}
		require.NoError(t, modify(a, verbs.StateInit, nil))
		require.NoError(t, modify(b, verbs.StateInit, nil))
		eb := viaJSON(t, b.Endpoint())
		switch st {
		case verbs.StateRTR:
			ea := viaJSON(t, a.Endpoint())
			both(t, verbs.StateRTR, a, &eb, b, &ea)
		case verbs.StateRTS, verbs.StateErr:
			connect(t, a, b)
			if st == verbs.StateErr {
				require.NoError(t, modify(a, verbs.StateErr, nil))
			}
		}
		require.Equal(t, st, a.State())
		return a, eb
	}
	for _, from := range allStates {
		t.Run("from "+from.String(), func(t *testing.T) {
			a, eb := at(from)
			for _, to := range allStates {
				if verbs.CanTransition(from, to) {
					continue
				}
				var remote *verbs.Endpoint
				if to == verbs.StateRTR {
					remote = &eb
				}
				err := modify(a, to, remote)
				require.ErrorIs(t, err, verbs.ErrInvalidState, "%v → %v", from, to)
				require.Equal(t, from, a.State(), "state after a refused %v → %v", from, to)
			}
			if from == verbs.StateInit {
				err := modify(a, verbs.StateRTR, nil)
				require.ErrorIs(t, err, verbs.ErrInvalidArgument, "INIT → RTR without a remote endpoint")
				other := eb
				other.Provider = "no-such-provider"
				err = modify(a, verbs.StateRTR, &other)
				require.ErrorIs(t, err, verbs.ErrInvalidArgument, "INIT → RTR to an endpoint of another provider")
				require.Equal(t, from, a.State())
			}
			require.NoError(t, modify(a, verbs.StateErr, nil), "%v → ERR", from)
			require.NoError(t, modify(a, verbs.StateReset, nil), "ERR → RESET")
			require.NoError(t, modify(a, verbs.StateInit, nil), "RESET → INIT")
		})
	}
}

// blocked posts, on a QP whose responder has no receive posted and whose
// RNRRetry never gives up, a WRITE_WITH_IMM and then the requests of rest,
// so that all of them stay outstanding until the QP leaves RTS.
func blocked(t *testing.T, a *qp, src, dst verbs.MR, rest ...*verbs.SendWR) {
	t.Helper()
	post(t, a, chain(append([]*verbs.SendWR{writeImm(1, src, 0, 4, dst, 0, 1)}, rest...)...))
}

func testFlushOnErr(t *testing.T, p Provider) {
	e := newEnv(t, p)
	a, b := e.pair(verbs.QPConfig{RNRRetry: rnrForever})
	src := e.region(0, 4096, verbs.AccessLocalWrite)
	dst := e.region(1, 4096, remoteRW)
	set(dst.Bytes(), canary)
	postRecvs(t, a, 10, 11, 12)
	blocked(t, a, src, dst,
		write(2, src, 0, 64, dst, 1024),
		unsignaled(write(3, src, 0, 64, dst, 2048)),
		&verbs.SendWR{ID: 4, Opcode: verbs.OpSend, Flags: verbs.Signaled, SGL: []verbs.SGE{sge(src, 0, 8)}},
	)
	requireNoWC(t, a.send, "send CQ while the first request waits for a receive")

	require.NoError(t, modify(a, verbs.StateErr, nil))
	require.Equal(t, verbs.StateErr, a.State())
	for i, wc := range waitWCs(t, a.send, 4, "flushed send requests") {
		requireStatus(t, wc, uint64(i+1), verbs.StatusWRFlush, a.Num())
	}
	for i, wc := range waitWCs(t, a.recv, 3, "flushed receive requests") {
		requireStatus(t, wc, uint64(10+i), verbs.StatusWRFlush, a.Num())
	}
	// Requests behind the blocked one were never executed: in-order
	// placement forbids landing them first.
	requireAll(t, dst.Bytes()[1024:], canary, "targets of requests behind the blocked one")

	// The flushed requests are gone for good: receives posted now at the
	// responder are not consumed by them. A software provider's responder
	// may have followed its peer into ERR (its connection closed); then
	// there is nothing left to consume anything.
	if _, err := b.PostRecv(&verbs.RecvWR{ID: 20, Next: &verbs.RecvWR{ID: 21}}); err != nil {
		require.ErrorIs(t, err, verbs.ErrInvalidState, "post receive on the responder")
		require.Equal(t, verbs.StateErr, b.State(), "responder refusing receives")
		return
	}
	require.NoError(t, modify(b, verbs.StateErr, nil))
	for i, wc := range waitWCs(t, b.recv, 2, "responder receives, flushed") {
		requireStatus(t, wc, uint64(20+i), verbs.StatusWRFlush, b.Num())
	}
}

func testResetDiscards(t *testing.T, p Provider) {
	e := newEnv(t, p)
	a, _ := e.pair(verbs.QPConfig{RNRRetry: rnrForever})
	src := e.region(0, 4096, verbs.AccessLocalWrite)
	dst := e.region(1, 4096, remoteRW)
	postRecvs(t, a, 10, 11)
	blocked(t, a, src, dst, write(2, src, 0, 64, dst, 64))

	require.NoError(t, modify(a, verbs.StateReset, nil))
	require.Equal(t, verbs.StateReset, a.State())
	requireNoWC(t, a.send, "send CQ after RESET")
	requireNoWC(t, a.recv, "receive CQ after RESET")

	c := e.qp(1, verbs.QPConfig{})
	connect(t, a, c)
	post(t, a, write(3, src, 0, 64, dst, 128))
	requireOK(t, waitWC(t, a.send, "WRITE after reset and reconnect"), 3, verbs.OpWrite, a.Num())
	requireNoWC(t, a.send, "send CQ: no completion of a discarded request")
	requireNoWC(t, a.recv, "receive CQ: no completion of a discarded receive")
}

func testReconnect(t *testing.T, p Provider) {
	for _, fresh := range []bool{true, false} {
		name := "both ends reset"
		if fresh {
			name = "to a fresh peer QP"
		}
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, p)
			a, b := e.pair(verbs.QPConfig{})
			src := e.region(0, 4096, verbs.AccessLocalWrite)
			dst := e.region(1, 4096, remoteRW)
			for round := range 3 {
				fill(src.Bytes(), uint64(round))
				postRecvs(t, b, uint64(round))
				post(t, a, chain(unsignaled(write(1, src, 0, 1000, dst, 0)), writeImm(2, src, 1000, 24, dst, 1000, uint32(round))))
				requireImm(t, waitWC(t, b.recv, "immediate"), uint64(round), uint32(round), 24, b.Num())
				requireOK(t, waitWC(t, a.send, "chain"), 2, verbs.OpWriteImm, a.Num())
				requireBytes(t, src.Bytes()[:1024], dst.Bytes()[:1024], "bytes written after reconnect")

				require.NoError(t, modify(a, verbs.StateErr, nil))
				require.NoError(t, modify(a, verbs.StateReset, nil))
				if fresh {
					b = e.qp(1, verbs.QPConfig{})
				} else {
					require.NoError(t, modify(b, verbs.StateErr, nil))
					require.NoError(t, modify(b, verbs.StateReset, nil))
				}
				connect(t, a, b)
			}
			requireNoWC(t, a.send, "send CQ after reconnects")
		})
	}
}

func testCloseFlushes(t *testing.T, p Provider) {
	e := newEnv(t, p)
	a, _ := e.pair(verbs.QPConfig{RNRRetry: rnrForever})
	src := e.region(0, 4096, verbs.AccessLocalWrite)
	dst := e.region(1, 4096, remoteRW)
	postRecvs(t, a, 10)
	blocked(t, a, src, dst, write(2, src, 0, 64, dst, 64))
	_, err := bounded("QP Close", func() (struct{}, error) { return struct{}{}, a.Close() })
	require.NoError(t, err)
	for i, wc := range waitWCs(t, a.send, 2, "send requests flushed by Close") {
		requireStatus(t, wc, uint64(i+1), verbs.StatusWRFlush, a.Num())
	}
	requireStatus(t, waitWC(t, a.recv, "receive flushed by Close"), 10, verbs.StatusWRFlush, a.Num())
}
