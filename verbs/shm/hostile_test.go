package shm

import (
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/rdmacell/rdmacell/verbs"
)

// TestMalformedRequestClosesConnection writes broken descriptors into the
// pair segment as a confused peer would: the responder closes the
// connection instead of acting on them, and the requester's next request
// fails.
func TestMalformedRequestClosesConnection(t *testing.T) {
	tests := []struct {
		name string
		seq  uint32 // added to the last sequence number
		d    desc
	}{
		{"sequence jump", 5, desc{op: descImm}},
		{"unknown opcode", 1, desc{op: 9}},
		{"imm with payload", 1, desc{op: descImm, len: 4}},
		{"send chunk beyond staging", 1, desc{op: descSend, len: stagingSize + 1, total: stagingSize + 1}},
		{"send chunk not at the start", 1, desc{op: descSend, len: 10, total: 20, off: 10}},
		{"send chunk past its total", 1, desc{op: descSend, len: 30, total: 20}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, b := pair(t, 4096, verbs.QPConfig{})
			postRecv(t, b.qp, 1, sge(b.mr, 0, 4096)...)
			l := a.qp.(*QP).link.Load()
			l.pair.postRequest(tc.seq, tc.d)
			l.ringPeer()
			bl := b.qp.(*QP).link.Load()
			require.Eventually(t, bl.isDown, waitLimit, time.Millisecond)
			require.ErrorIs(t, bl.downErr, errProtocol)
			noWC(t, b.cq)
			post(t, a.qp, write(2, a.mr, 0, b.mr, 0, 8))
			require.Equal(t, verbs.StatusRetryExceeded, waitWC(t, a.cq, 1)[0].Status)
		})
	}
}

// TestHostileHandshakes connects to a device with broken handshakes; the
// device drops each connection and keeps serving.
func TestHostileHandshakes(t *testing.T) {
	x := newNode(t, openDevice(t), 4096, rw, verbs.QPConfig{})
	memfd := func() int {
		fd, err := unix.MemfdCreate("x", unix.MFD_CLOEXEC)
		require.NoError(t, err)
		return fd
	}
	good := hello{fromQPN: 1, toQPN: x.qp.Num(), addr: "@elsewhere"}
	tests := []struct {
		name string
		msg  []byte
		fds  func() []int
	}{
		{"garbage", []byte("hello there"), nil},
		{"hello without descriptors", good.encode(), nil},
		{"hello with unsealed segment", good.encode(), func() []int { return []int{memfd(), memfd()} }},
		{"fetch before hello", encodeFetch(1, 1), nil},
		{"empty address", func() []byte { b := good.encode(); b[28], b[29] = 0, 0; return b[:30] }(), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			nc, err := net.Dial("unixpacket", x.dev.Addr())
			require.NoError(t, err)
			c := nc.(*net.UnixConn)
			defer c.Close()
			var fds []int
			if tc.fds != nil {
				fds = tc.fds()
			}
			require.NoError(t, send(c, tc.msg, fds...))
			closeFds(fds)
			require.NoError(t, c.SetReadDeadline(time.Now().Add(waitLimit)))
			// Either a refusal or the connection closes; never acceptance.
			for {
				msg, got, err := receive(c, make([]byte, maxMsg), make([]byte, oobSpace))
				if err != nil {
					require.True(t, errors.Is(err, errEOF) || errors.Is(err, unix.ECONNRESET), "%v", err)
					break
				}
				closeFds(got)
				r, err := decodeReply(msg)
				require.NoError(t, err)
				require.True(t, r.refused)
			}
		})
	}
	// The device still connects QPs.
	y := newNode(t, openDevice(t), 4096, rw, verbs.QPConfig{})
	connect(t, x, y)
	post(t, x.qp, write(1, x.mr, 0, y.mr, 0, 8))
	require.Equal(t, verbs.StatusSuccess, waitWC(t, x.cq, 1)[0].Status)
}

func TestWireDecodersRejectMalformed(t *testing.T) {
	h := hello{fromQPN: 1, toQPN: 2, psn: 3, pd: 4, minRNR: time.Millisecond, addr: "@a"}
	got, err := decodeHello(h.encode())
	require.NoError(t, err)
	require.Equal(t, h, got)
	r := reply{refused: true, pd: 9, minRNR: time.Second, reason: "no"}
	gotR, err := decodeReply(r.encode())
	require.NoError(t, err)
	require.Equal(t, r, gotR)

	mut := func(b []byte, f func([]byte) []byte) []byte { return f(append([]byte(nil), b...)) }
	tests := []struct {
		name   string
		decode func([]byte) error
		msg    []byte
	}{
		{"hello empty", helloErr, nil},
		{"hello short", helloErr, h.encode()[:20]},
		{"hello version", helloErr, mut(h.encode(), func(b []byte) []byte { b[1] = 9; return b })},
		{"hello reserved", helloErr, mut(h.encode(), func(b []byte) []byte { b[2] = 1; return b })},
		{"hello address length", helloErr, mut(h.encode(), func(b []byte) []byte { b[28] = 200; return b })},
		{"hello trailing byte", helloErr, append(h.encode(), 0)},
		{"hello RNR timer", helloErr, mut(h.encode(), func(b []byte) []byte { b[27] = 0x80; return b })},
		{"reply status", replyErr, mut(r.encode(), func(b []byte) []byte { b[1] = 2; return b })},
		{"reply reason length", replyErr, mut(r.encode(), func(b []byte) []byte { b[16] = 50; return b })},
		{"fetch length", fixedErr, encodeFetch(1, 2)[:11]},
		{"fetch status", fixedErr, mut(encodeFetch(1, 2), func(b []byte) []byte { b[1] = 1; return b })},
		{"memory status", fixedErr, mut(encodeMemory(true, 1, 2), func(b []byte) []byte { b[1] = 7; return b })},
		{"unknown type", fixedErr, mut(encodeFetch(1, 2), func(b []byte) []byte { b[0] = 99; return b })},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.ErrorIs(t, tc.decode(tc.msg), errProtocol)
		})
	}
}

func helloErr(b []byte) error { _, err := decodeHello(b); return err }
func replyErr(b []byte) error { _, err := decodeReply(b); return err }
func fixedErr(b []byte) error { _, _, _, _, err := decodeFixed(b); return err }

// FuzzDecode feeds arbitrary packets to the control-message decoders:
// they return an error or a value that encodes back to the same bytes,
// and never panic.
func FuzzDecode(f *testing.F) {
	f.Add(hello{fromQPN: 1, toQPN: 2, addr: "@x"}.encode())
	f.Add(reply{pd: 1, reason: "r"}.encode())
	f.Add(encodeFetch(1, 2))
	f.Add(encodeMemory(false, 3, 4))
	f.Fuzz(func(t *testing.T, b []byte) {
		if h, err := decodeHello(b); err == nil {
			require.Equal(t, b, h.encode())
		}
		if r, err := decodeReply(b); err == nil {
			require.Equal(t, b, r.encode())
		}
		if typ, st, req, id, err := decodeFixed(b); err == nil {
			want := encodeFetch(req, id)
			if typ == msgMemory {
				want = encodeMemory(st == 0, req, id)
			}
			require.Equal(t, b, want)
		}
	})
}

// FuzzPeerRequests publishes arbitrary request descriptors in a pair
// segment, as a confused or hostile peer could, and lets the responder
// act on them: it must never panic, never write outside the buffers of
// the receives it was given, and it must answer (acknowledge, refuse) or
// close the connection.
func FuzzPeerRequests(f *testing.F) {
	f.Add(uint8(1), uint8(0), uint32(descImm), uint32(0), uint32(0), uint32(8), uint32(0))
	f.Add(uint8(3), uint8(0), uint32(descSend), uint32(0), uint32(100), uint32(100), uint32(0))
	f.Add(uint8(2), uint8(0), uint32(descSend), uint32(0), uint32(10), uint32(20), uint32(10))
	f.Add(uint8(1), uint8(200), uint32(descImm), uint32(7), uint32(0), uint32(1<<31), uint32(0))
	f.Fuzz(func(t *testing.T, k, jump uint8, op, imm, ln, total, off uint32) {
		a, b := pair(t, 8192, verbs.QPConfig{})
		fill(b.mem.Bytes(), 9)
		want := append([]byte(nil), b.mem.Bytes()...)
		postRecv(t, b.qp, 1, sge(b.mr, 1024, 1024)...)
		postRecv(t, b.qp, 2, sge(b.mr, 1024, 1024)...)
		l := a.qp.(*QP).link.Load()
		d := desc{op: op, imm: imm, len: ln, total: total, off: off}
		top := uint32(k%8) + 1
		for seq := uint32(1); seq <= top; seq++ {
			l.pair.postRequest(seq, d)
		}
		if jump > 0 {
			// A sequence number past what the ring holds, or past
			// descriptors never written.
			top += uint32(jump)
			atomic.StoreUint32(l.pair.at(l.pair.side, offReqSeq), top)
		}
		l.ringPeer()
		bl := b.qp.(*QP).link.Load()
		answered := func() bool {
			seq, st := l.pair.acked()
			return seq == top || st != 0 || bl.isDown()
		}
		require.Eventually(t, answered, waitLimit, 100*time.Microsecond, "the responder answers or hangs up")
		got := b.mem.Bytes()
		require.Equal(t, want[:1024], got[:1024], "bytes before the receive buffers")
		require.Equal(t, want[2048:], got[2048:], "bytes after the receive buffers")
	})
}
