package tcp

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/internal/netchaos"
	"github.com/rdmacell/rdmacell/verbs"
	"github.com/rdmacell/rdmacell/verbs/internal/soft"
)

func TestOpenValidates(t *testing.T) {
	tests := []struct {
		name string
		opts Options
	}{
		{"no secret", Options{}},
		{"short secret", Options{Secret: []byte("fifteen bytes!!")}},
		{"bad listen address", Options{Secret: secret, ListenAddr: "no port"}},
		{"bad advertise address", Options{Secret: secret, AdvertiseAddr: "no port"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Open(tt.opts)
			require.Error(t, err)
			require.Nil(t, d)
		})
	}
	_, err := Open(Options{Secret: secret[:10]})
	require.ErrorIs(t, err, verbs.ErrInvalidArgument)
}

func TestDeviceAddr(t *testing.T) {
	e := newEnv(t)
	d, _, _ := e.device(Options{})
	host, _, err := net.SplitHostPort(d.Addr())
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1", host)
	d2, _, _ := e.device(Options{ListenAddr: ":0", Host: "node7"})
	host, _, err = net.SplitHostPort(d2.Addr())
	require.NoError(t, err)
	require.Equal(t, "node7", host, "an unspecified listen address advertises the host")
	require.Equal(t, "tcp", d.Provider())
}

// A device behind a forwarder advertises the forwarder: its QPs' peers
// dial that address, and the connection (handshake included) works
// through it. Both devices are behind one, since either QP may dial.
func TestAdvertisedAddress(t *testing.T) {
	e := newEnv(t)
	var pds [2]*PD
	var pxs [2]*netchaos.Proxy
	for i := range pds {
		px, err := netchaos.Listen()
		require.NoError(t, err)
		t.Cleanup(func() { _ = px.Close() })
		var d *Device
		d, pds[i], _ = e.device(Options{AdvertiseAddr: px.Addr()})
		px.Forward(d.ListenAddr())
		require.Equal(t, px.Addr(), d.Addr())
		require.NotEqual(t, d.ListenAddr(), d.Addr())
		pxs[i] = px
	}
	a, b := e.qp(pds[0], verbs.QPConfig{}), e.qp(pds[1], verbs.QPConfig{})
	require.Equal(t, pxs[0].Addr(), a.Endpoint().Addr)
	connect(t, a, b)
	src, dst := e.region(pds[1], 4096, verbs.AccessLocalWrite), e.region(pds[0], 4096, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	pattern(src.Bytes(), 7)
	_, err := b.PostSend(writeWR(1, verbs.OpWrite, src, 0, 4096, dst, 0))
	require.NoError(t, err)
	wcs := waitWCs(t, b.send, 1)
	require.Equal(t, verbs.StatusSuccess, wcs[0].Status)
	require.Equal(t, src.Bytes(), dst.Bytes())
	require.Len(t, append(pxs[0].Links(), pxs[1].Links()...), 1, "the connection went through a forwarder")
}

func TestCreateQPValidates(t *testing.T) {
	e := newEnv(t)
	d, pd, _ := e.device(Options{})
	other, _, _ := e.device(Options{})
	own, err := d.CreateCQ(8)
	require.NoError(t, err)
	foreign, err := other.CreateCQ(8)
	require.NoError(t, err)
	stray, err := soft.NewCQ(8)
	require.NoError(t, err)
	tests := []struct {
		name string
		cfg  verbs.QPConfig
	}{
		{"no CQs", verbs.QPConfig{}},
		{"CQ of another device", verbs.QPConfig{SendCQ: own, RecvCQ: foreign}},
		{"CQ of no device", verbs.QPConfig{SendCQ: stray, RecvCQ: own}},
		{"RNR retry 8", verbs.QPConfig{SendCQ: own, RecvCQ: own, RNRRetry: 8}},
		{"negative retry count", verbs.QPConfig{SendCQ: own, RecvCQ: own, RetryCount: -1}},
		{"huge SGE count", verbs.QPConfig{SendCQ: own, RecvCQ: own, MaxSGE: 1000}},
		{"bad local address", verbs.QPConfig{SendCQ: own, RecvCQ: own, LocalAddr: "nowhere"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, err := pd.CreateQP(tt.cfg)
			require.ErrorIs(t, err, verbs.ErrInvalidArgument)
			require.Nil(t, q)
		})
	}
}

func TestModifyRTRValidates(t *testing.T) {
	e := newEnv(t)
	d, pd, _ := e.device(Options{})
	q := e.qp(pd, verbs.QPConfig{})
	require.NoError(t, q.Modify(verbs.StateInit, nil))
	self := q.Endpoint()
	tests := []struct {
		name string
		ep   verbs.Endpoint
	}{
		{"itself", self},
		{"no address", verbs.Endpoint{Provider: "tcp", QPN: 1}},
		{"address without port", verbs.Endpoint{Provider: "tcp", Addr: "127.0.0.1", QPN: 1}},
		{"RNR retry 9", verbs.Endpoint{Provider: "tcp", Addr: d.Addr(), QPN: 1, RNRRetry: 9}},
		{"other provider", verbs.Endpoint{Provider: "shm", Addr: d.Addr(), QPN: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := q.Modify(verbs.StateRTR, &tt.ep)
			require.ErrorIs(t, err, verbs.ErrInvalidArgument)
			require.Equal(t, verbs.StateInit, q.State())
		})
	}
}

func TestPDCloseRefusesWhileInUse(t *testing.T) {
	e := newEnv(t)
	_, pd, _ := e.device(Options{})
	mr := e.region(pd, 4096, verbs.AccessLocalWrite)
	require.ErrorIs(t, pd.Close(), verbs.ErrInvalidArgument)
	require.NoError(t, mr.Close())
	require.NoError(t, pd.Close())
	require.ErrorIs(t, pd.Close(), verbs.ErrClosed)
}

// freePort returns a loopback port nobody listens on.
func freePort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

// TestLocalAddrBindsConnection pins both QPs' connection to a chosen local
// address and port, and reconnects from the same port after a reset.
func TestLocalAddrBindsConnection(t *testing.T) {
	e := newEnv(t)
	_, pa, _ := e.device(Options{})
	_, pb, _ := e.device(Options{})
	la, lb := freePort(t), freePort(t)
	a := e.qp(pa, verbs.QPConfig{LocalAddr: la})
	b := e.qp(pb, verbs.QPConfig{LocalAddr: lb})
	src := e.region(pa, 4096, verbs.AccessLocalWrite)
	dst := e.region(pb, 4096, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	pattern(src.Bytes(), 3)
	for round := range 2 {
		connect(t, a, b)
		_, err := a.PostSend(writeWR(uint64(round), verbs.OpWrite, src, 0, 100, dst, 0))
		require.NoError(t, err)
		require.Equal(t, verbs.StatusSuccess, waitWCs(t, a.send, 1)[0].Status)
		require.Equal(t, src.Bytes()[:100], dst.Bytes()[:100])

		dialer, want := a, la
		if !a.dialer {
			dialer, want = b, lb
		}
		dialer.mu.Lock()
		got := dialer.link.conn.LocalAddr().String()
		dialer.mu.Unlock()
		require.Equal(t, want, got, "round %d: local address of the dialer's connection", round)

		for _, q := range []*tqp{a, b} {
			require.NoError(t, q.Modify(verbs.StateErr, nil))
			require.NoError(t, q.Modify(verbs.StateReset, nil))
		}
	}
}

// TestNoConnection posts on a QP whose peer never connects, whether it is
// the side that dials or the one that waits: the request fails with
// StatusRetryExceeded after Timeout × (RetryCount+1).
func TestNoConnection(t *testing.T) {
	tests := []struct {
		name   string
		peer   string
		dialer bool
	}{
		{"dialing a closed port", "127.255.255.254:1", true},
		{"waiting for a peer that never dials", "127.0.0.0:1", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			_, pd, _ := e.device(Options{})
			q := e.qp(pd, verbs.QPConfig{Timeout: 20 * time.Millisecond, RetryCount: 2})
			src := e.region(pd, 4096, verbs.AccessLocalWrite)
			require.NoError(t, q.Modify(verbs.StateInit, nil))
			require.NoError(t, q.Modify(verbs.StateRTR, &verbs.Endpoint{Provider: "tcp", Addr: tt.peer, QPN: 5}))
			require.Equal(t, tt.dialer, q.dialer)
			require.NoError(t, q.Modify(verbs.StateRTS, nil))
			_, err := q.PostRecv(&verbs.RecvWR{ID: 9})
			require.NoError(t, err)
			wr := &verbs.SendWR{ID: 1, Opcode: verbs.OpWrite, SGL: []verbs.SGE{sgeOf(src, 0, 8)}, RemoteAddr: 4096, RKey: 1}
			wr.Next = &verbs.SendWR{ID: 2, Opcode: verbs.OpSend}
			_, err = q.PostSend(wr)
			require.NoError(t, err)
			wcs := waitWCs(t, q.send, 2)
			require.Equal(t, verbs.StatusRetryExceeded, wcs[0].Status, "unsignaled, but failed")
			require.Equal(t, verbs.StatusWRFlush, wcs[1].Status)
			require.Equal(t, verbs.StatusWRFlush, waitWCs(t, q.recv, 1)[0].Status)
			require.Equal(t, verbs.StateErr, q.State())
			require.ErrorIs(t, q.Err(), ErrConnLost)
		})
	}
}

// TestPeerGoneWhileIdle closes the peer of an idle QP: like an RNIC, the
// QP notices nothing until it sends; then the request fails with
// StatusRetryExceeded and the QP moves to ERR.
func TestPeerGoneWhileIdle(t *testing.T) {
	e := newEnv(t)
	a, b, pa, _ := e.pair(verbs.QPConfig{})
	src := e.region(pa, 4096, verbs.AccessLocalWrite)
	_, err := a.PostRecv(&verbs.RecvWR{ID: 7})
	require.NoError(t, err)
	// One round trip first, so the connection is surely up.
	_, err = a.PostSend(&verbs.SendWR{ID: 1, Opcode: verbs.OpWrite, Flags: verbs.Signaled})
	require.NoError(t, err)
	require.Equal(t, verbs.StatusSuccess, waitWCs(t, a.send, 1)[0].Status)

	require.NoError(t, b.Close())
	waitFor(t, "the lost connection", func() bool { return a.Err() != nil })
	require.ErrorIs(t, a.Err(), ErrConnLost)
	require.Equal(t, verbs.StateRTS, a.State())
	require.Zero(t, a.recv.Poll(make([]verbs.WC, 1)), "an idle QP's receives stay posted")

	_, err = a.PostSend(writeWR(2, verbs.OpWrite, src, 0, 8, src, 0))
	require.NoError(t, err)
	require.Equal(t, verbs.StatusRetryExceeded, waitWCs(t, a.send, 1)[0].Status)
	require.Equal(t, verbs.StatusWRFlush, waitWCs(t, a.recv, 1)[0].Status)
	require.Equal(t, verbs.StateErr, a.State())
}

// TestHotPathDoesNotAllocate posts and completes WRITEs, WRITE_WITH_IMMs
// and SENDs in steady state and counts the allocations of the whole
// process, both sides' goroutines included.
func TestHotPathDoesNotAllocate(t *testing.T) {
	e := newEnv(t)
	a, b, pa, pb := e.pair(verbs.QPConfig{MaxSGE: 2})
	src := e.region(pa, 1<<20, verbs.AccessLocalWrite)
	dst := e.region(pb, 1<<20, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	write := writeWR(1, verbs.OpWrite, src, 0, 64<<10, dst, 0)
	write.SGL = append(write.SGL, sgeOf(src, 100<<10, 3000))
	imm := writeWR(2, verbs.OpWriteImm, src, 0, 4096, dst, 512<<10)
	send := &verbs.SendWR{ID: 3, Opcode: verbs.OpSend, Flags: verbs.Signaled, SGL: []verbs.SGE{sgeOf(src, 0, 100)}}
	recv := &verbs.RecvWR{ID: 4, SGL: []verbs.SGE{sgeOf(dst, 900<<10, 128)}}
	wc := make([]verbs.WC, 4)
	ctx := context.Background()
	round := func() {
		if _, err := b.PostRecv(recv); err != nil {
			panic(err)
		}
		if _, err := b.PostRecv(recv); err != nil {
			panic(err)
		}
		for _, wr := range []*verbs.SendWR{write, imm, send} {
			if _, err := a.PostSend(wr); err != nil {
				panic(err)
			}
			if _, err := a.send.Wait(ctx, wc); err != nil {
				panic(err)
			}
		}
		for got := 0; got < 2; {
			n, err := b.recv.Wait(ctx, wc)
			if err != nil {
				panic(err)
			}
			got += n
		}
	}
	round() // warm up: first writev caches its iovec array
	allocs := testing.AllocsPerRun(200, round)
	require.Zero(t, allocs, "allocations per round of 3 requests")
}

// TestFlushedRequestNeverLands flushes a WRITE_WITH_IMM that waits at the
// responder for a receive, then posts one there: the flushed request must
// not consume it, nor place its bytes, although they sit in the
// responder's socket.
func TestFlushedRequestNeverLands(t *testing.T) {
	e := newEnv(t)
	a, b, pa, pb := e.pair(verbs.QPConfig{RNRRetry: 7})
	src := e.region(pa, 4096, verbs.AccessLocalWrite)
	dst := e.region(pb, 4096, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	pattern(src.Bytes(), 1)
	setAll(dst.Bytes(), 0xee)
	_, err := a.PostSend(writeWR(1, verbs.OpWriteImm, src, 0, 64, dst, 0))
	require.NoError(t, err)
	waitFor(t, "the responder's RNR notice", func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.rnrWait
	})
	require.NoError(t, a.Modify(verbs.StateErr, nil))
	require.Equal(t, verbs.StatusWRFlush, waitWCs(t, a.send, 1)[0].Status)
	b.mu.Lock()
	l := b.link
	b.mu.Unlock()
	require.NotNil(t, l)
	waitFor(t, "the requester's close to reach the responder", l.rd.peerGone)

	_, err = b.PostRecv(&verbs.RecvWR{ID: 5})
	require.NoError(t, err)
	waitFor(t, "the responder to drop the connection", func() bool { return b.Err() != nil })
	require.ErrorIs(t, b.Err(), ErrConnLost)
	require.NoError(t, b.Modify(verbs.StateErr, nil))
	require.Equal(t, verbs.WC{ID: 5, Status: verbs.StatusWRFlush, Opcode: verbs.OpRecv, QPN: b.Num()}, waitWCs(t, b.recv, 1)[0])
	requireAll(t, dst.Bytes(), 0xee, "target of the flushed request")
}

// TestRemoteWriteWatched: a region's watcher hears of every WRITE that
// landed in it in full, and of nothing else: not a WRITE_WITH_IMM (which
// completes a receive instead), not a WRITE into another region, nothing
// once unset.
func TestRemoteWriteWatched(t *testing.T) {
	e := newEnv(t)
	a, b, pa, pb := e.pair(verbs.QPConfig{})
	src := e.region(pa, 4096, verbs.AccessLocalWrite)
	dst := e.region(pb, 4096, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	other := e.region(pb, 4096, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	pattern(src.Bytes(), 3)
	w, ok := dst.(verbs.WriteWatcher)
	require.True(t, ok, "tcp regions are write watchers")
	landed := make(chan []byte, 8)
	w.OnRemoteWrite(func() { landed <- append([]byte(nil), dst.Bytes()[100:164]...) })

	_, err := a.PostSend(writeWR(1, verbs.OpWrite, src, 0, 64, dst, 100))
	require.NoError(t, err)
	select {
	case got := <-landed:
		require.Equal(t, src.Bytes()[:64], got, "the watcher runs once the bytes are there")
	case <-time.After(10 * time.Second):
		t.Fatal("the watcher did not hear of the WRITE")
	}

	_, err = b.PostRecv(&verbs.RecvWR{ID: 2})
	require.NoError(t, err)
	_, err = a.PostSend(writeWR(3, verbs.OpWriteImm, src, 0, 64, dst, 0))
	require.NoError(t, err)
	waitWCs(t, b.recv, 1)
	_, err = a.PostSend(writeWR(4, verbs.OpWrite, src, 0, 64, other, 0))
	require.NoError(t, err)
	w.OnRemoteWrite(nil)
	_, err = a.PostSend(writeWR(5, verbs.OpWrite, src, 0, 64, dst, 0))
	require.NoError(t, err)
	// A send completes once the responder placed the data, after it
	// called the watcher.
	waitWCs(t, a.send, 4)
	require.Empty(t, landed)
}
