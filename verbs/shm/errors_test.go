package shm

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/verbs"
)

func TestRemoteAccessLeavesTargetUntouched(t *testing.T) {
	const size = 8192
	tests := []struct {
		name string
		// target returns the rkey and address of the bad WRITE; it may
		// register or deregister regions on b.
		target func(t *testing.T, b *node) (rkey uint32, addr uint64)
	}{
		{"bad rkey", func(t *testing.T, b *node) (uint32, uint64) { return b.mr.RKey() ^ 0x5a5a, b.mr.Addr() }},
		{"past the end", func(t *testing.T, b *node) (uint32, uint64) { return b.mr.RKey(), b.mr.Addr() + size - 8 }},
		{"before the start", func(t *testing.T, b *node) (uint32, uint64) { return b.mr.RKey(), b.mr.Addr() - 1 }},
		{"no remote write", func(t *testing.T, b *node) (uint32, uint64) {
			mr, err := b.pd.RegMR(b.mem.Bytes()[:4096], verbs.AccessLocalWrite)
			require.NoError(t, err)
			t.Cleanup(func() { _ = mr.Close() })
			return mr.RKey(), mr.Addr()
		}},
		{"region of another PD", func(t *testing.T, b *node) (uint32, uint64) {
			pd, err := b.dev.AllocPD()
			require.NoError(t, err)
			mr, err := pd.RegMR(b.mem.Bytes()[:4096], rw)
			require.NoError(t, err)
			t.Cleanup(func() { _ = mr.Close() })
			return mr.RKey(), mr.Addr()
		}},
		{"deregistered", func(t *testing.T, b *node) (uint32, uint64) {
			rkey, addr := b.mr.RKey(), b.mr.Addr()
			require.NoError(t, b.mr.Close())
			return rkey, addr
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, b := pair(t, size, verbs.QPConfig{})
			fill(b.mem.Bytes(), 0x77)
			want := append([]byte(nil), b.mem.Bytes()...)
			// A first WRITE warms the requester's caches of the region.
			post(t, a.qp, write(1, a.mr, 0, b.mr, 0, 16))
			require.Equal(t, verbs.StatusSuccess, waitWC(t, a.cq, 1)[0].Status)
			copy(want, a.mem.Bytes()[:16])

			rkey, addr := tc.target(t, b)
			bad := &verbs.SendWR{ID: 2, Opcode: verbs.OpWrite, SGL: sge(a.mr, 0, 16), RemoteAddr: addr, RKey: rkey}
			bad.Next = write(3, a.mr, 0, b.mr, 64, 16)
			post(t, a.qp, bad)
			wcs := waitWC(t, a.cq, 2)
			require.Equal(t, verbs.WC{ID: 2, Status: verbs.StatusRemoteAccess, Opcode: verbs.OpWrite, QPN: a.qp.Num()}, wcs[0])
			require.Equal(t, verbs.StatusWRFlush, wcs[1].Status)
			require.Equal(t, verbs.StateErr, a.qp.State())
			require.Equal(t, want, b.mem.Bytes())
		})
	}
}

// TestPeerNotConnectedTimesOut brings up one side only: its requests wait
// for the peer within Timeout × (RetryCount+1) and then fail, whether the
// lone side dialled (and its connection is parked at the peer) or waits to
// be dialled.
func TestPeerNotConnectedTimesOut(t *testing.T) {
	for _, role := range []string{"dialer", "listener"} {
		t.Run(role, func(t *testing.T) {
			cfg := verbs.QPConfig{Timeout: 5 * time.Millisecond, RetryCount: 2}
			x := newNode(t, openDevice(t), 4096, rw, cfg)
			y := newNode(t, openDevice(t), 4096, rw, cfg)
			ex, ey := x.qp.Endpoint(), y.qp.Endpoint()
			lone, other := x, ey
			if dials(ex.Addr, ex.QPN, ey) != (role == "dialer") {
				lone, other = y, ex
			}
			require.NoError(t, lone.qp.Modify(verbs.StateRTR, &other))
			require.NoError(t, lone.qp.Modify(verbs.StateRTS, nil))
			peer := x
			if lone == x {
				peer = y
			}
			post(t, lone.qp, write(1, lone.mr, 0, peer.mr, 0, 8))
			require.Equal(t, verbs.StatusRetryExceeded, waitWC(t, lone.cq, 1)[0].Status)
			require.Equal(t, verbs.StateErr, lone.qp.State())
		})
	}
}

// TestPeerResetFailsRequests: a peer QP that is reset closes the
// connection, and the requests of the QP still connected to it fail.
func TestPeerResetFailsRequests(t *testing.T) {
	a, b := pair(t, 4096, verbs.QPConfig{})
	require.NoError(t, b.qp.Modify(verbs.StateReset, nil))
	post(t, a.qp, writeImm(1, a.mr, 0, b.mr, 0, 8, 1))
	require.Equal(t, verbs.StatusRetryExceeded, waitWC(t, a.cq, 1)[0].Status)
	require.Equal(t, verbs.StateErr, a.qp.State())
}

func TestConnectRejectsBadEndpoints(t *testing.T) {
	x := newNode(t, openDevice(t), 4096, rw, verbs.QPConfig{})
	y := newNode(t, openDevice(t), 4096, rw, verbs.QPConfig{})
	// The node that dials, and an endpoint of a QP its peer does not have.
	from, to := x, y.qp.Endpoint()
	if !dials(x.dev.Addr(), x.qp.Num(), to) {
		from, to = y, x.qp.Endpoint()
	}
	missing := to
	missing.QPN = 999
	tests := []struct {
		name   string
		remote *verbs.Endpoint
	}{
		{"no endpoint", nil},
		{"other provider", &verbs.Endpoint{Provider: "tcp", Addr: to.Addr, QPN: to.QPN}},
		{"other host", &verbs.Endpoint{Provider: ProviderName, Addr: to.Addr, QPN: to.QPN, Host: "elsewhere"}},
		{"no address", &verbs.Endpoint{Provider: ProviderName, QPN: to.QPN}},
		{"itself", func() *verbs.Endpoint { e := from.qp.Endpoint(); return &e }()},
		{"RNR retry out of range", &verbs.Endpoint{Provider: ProviderName, Addr: to.Addr, QPN: to.QPN, RNRRetry: 8}},
		{"QP the peer does not have", &missing},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := from.qp.Modify(verbs.StateRTR, tc.remote)
			require.ErrorIs(t, err, verbs.ErrInvalidArgument)
			require.Equal(t, verbs.StateInit, from.qp.State())
		})
	}
	gone := to
	gone.Addr = "@rdmacell-shm-no-such-device"
	require.Error(t, from.qp.Modify(verbs.StateRTR, &gone))
	require.Equal(t, verbs.StateInit, from.qp.State())
}

func TestCreateQPValidatesConfig(t *testing.T) {
	d := openDevice(t)
	pd, err := d.AllocPD()
	require.NoError(t, err)
	cq, err := d.CreateCQ(8)
	require.NoError(t, err)
	foreign, err := openDevice(t).CreateCQ(8)
	require.NoError(t, err)
	tests := []struct {
		name string
		cfg  verbs.QPConfig
	}{
		{"no CQs", verbs.QPConfig{}},
		{"CQ of another device", verbs.QPConfig{SendCQ: cq, RecvCQ: foreign}},
		{"RNRRetry 8", verbs.QPConfig{SendCQ: cq, RecvCQ: cq, RNRRetry: 8}},
		{"negative MaxSGE", verbs.QPConfig{SendCQ: cq, RecvCQ: cq, MaxSGE: -1}},
		{"negative timeout", verbs.QPConfig{SendCQ: cq, RecvCQ: cq, Timeout: -time.Second}},
		{"negative retry count", verbs.QPConfig{SendCQ: cq, RecvCQ: cq, RetryCount: -1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := pd.CreateQP(tc.cfg)
			require.ErrorIs(t, err, verbs.ErrInvalidArgument)
		})
	}
}

func TestPostSendValidates(t *testing.T) {
	a, b := pair(t, 4096, verbs.QPConfig{MaxSGE: 2})
	tests := []struct {
		name string
		wr   *verbs.SendWR
	}{
		{"opcode", &verbs.SendWR{ID: 1, Opcode: verbs.OpRecv}},
		{"too many SGEs", &verbs.SendWR{ID: 1, Opcode: verbs.OpWrite, SGL: make([]verbs.SGE, 3), RKey: b.mr.RKey()}},
		{"unknown flags", &verbs.SendWR{ID: 1, Opcode: verbs.OpWrite, Flags: 0x80}},
		{"too long", &verbs.SendWR{ID: 1, Opcode: verbs.OpSend, SGL: []verbs.SGE{{Length: 1 << 31}, {Length: 1}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			good := write(7, a.mr, 0, b.mr, 0, 8)
			good.Next = tc.wr
			bad, err := a.qp.PostSend(good)
			require.ErrorIs(t, err, verbs.ErrInvalidArgument)
			require.Same(t, tc.wr, bad)
			require.Equal(t, uint64(7), waitWC(t, a.cq, 1)[0].ID, "the request before the bad one was posted")
		})
	}
}

// TestUnresponsivePeerTimesOut: a peer that is alive (its socket open) but
// does not answer fails WRITE_WITH_IMMs after Timeout × (RetryCount+1).
func TestUnresponsivePeerTimesOut(t *testing.T) {
	a, b := pair(t, 4096, verbs.QPConfig{Timeout: 10 * time.Millisecond, RetryCount: 1})
	postRecv(t, b.qp, 1)
	// Hold the responder role of b, as a stopped process would.
	e := b.qp.(*QP).running.Load()
	require.Eventually(t, func() bool { return e.respBusy.CompareAndSwap(false, true) }, waitLimit, time.Microsecond)
	defer e.respBusy.Store(false)
	post(t, a.qp, writeImm(1, a.mr, 0, b.mr, 0, 8, 1))
	require.Equal(t, verbs.StatusRetryExceeded, waitWC(t, a.cq, 1)[0].Status)
	require.Equal(t, verbs.StateErr, a.qp.State())
}

// Peers map the memory file of a region, and adopted memory has none:
// registering it is refused, and the PD registers on as before.
func TestRegMRRefusesAdoptedMemory(t *testing.T) {
	d := openDevice(t)
	pd, err := d.AllocPD()
	require.NoError(t, err)
	defer pd.Close()
	m, err := verbs.Adopt(make([]byte, 4096))
	require.NoError(t, err)
	defer m.Free()
	_, err = pd.RegMR(m.Bytes(), rw)
	require.ErrorIs(t, err, verbs.ErrInvalidArgument)
	a, err := verbs.Alloc(4096)
	require.NoError(t, err)
	defer a.Free()
	mr, err := pd.RegMR(a.Bytes(), rw)
	require.NoError(t, err)
	require.NoError(t, mr.Close())
}
