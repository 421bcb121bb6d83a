package tcp

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/rdmacell/rdmacell/verbs"
	"github.com/stretchr/testify/require"
)

// fakePeer is the endpoint a raw client claims. Its address sorts before
// any 127.0.0.1 device address, so the QP under test accepts and never
// dials it.
var fakePeer = verbs.Endpoint{Provider: "tcp", Addr: "127.0.0.0:9", QPN: 77, PSN: 1000}

// rawTarget is a QP in RTR waiting for fakePeer, with a region a raw
// client may write into.
type rawTarget struct {
	d   *Device
	q   *tqp
	dst verbs.MR
	log *logBuf
}

func newRawTarget(t *testing.T, e *env) *rawTarget {
	d, pd, lb := e.device(Options{})
	q := e.qp(pd, verbs.QPConfig{})
	dst := e.region(pd, 4096, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	setAll(dst.Bytes(), 0xee)
	require.NoError(t, q.Modify(verbs.StateInit, nil))
	ep := fakePeer
	require.NoError(t, q.Modify(verbs.StateRTR, &ep))
	return &rawTarget{d: d, q: q, dst: dst, log: lb}
}

// dialRaw connects to rt's QP as fakePeer with the given secret.
func (rt *rawTarget) dialRaw(t *testing.T, key []byte) (net.Conn, error) {
	c, err := net.Dial("tcp", rt.d.Addr())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	require.NoError(t, c.SetDeadline(time.Now().Add(waitLimit)))
	h := hello{srcQPN: fakePeer.QPN, srcPSN: fakePeer.PSN, dstQPN: rt.q.Num(), dstPSN: rt.q.Endpoint().PSN, srcAddr: fakePeer.Addr}
	return c, dialHandshake(c, key, &h)
}

func frame(h header, payload []byte) []byte {
	b := make([]byte, headerLen, headerLen+len(payload))
	encodeHeader(b, &h)
	return append(b, payload...)
}

func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// TestHostileFrames sends frames from a raw client that passed the
// handshake: malformed ones close the connection and move the QP to ERR
// with ErrProtocol; refused ones get a NAK; memory outside what a valid
// request names stays untouched; nothing panics.
func TestHostileFrames(t *testing.T) {
	psn := fakePeer.PSN
	payload := []byte("0123456789abcdef")
	type check func(t *testing.T, rt *rawTarget, reply []byte)
	protocolErr := func(t *testing.T, rt *rawTarget, reply []byte) {
		waitState(t, rt.q.QP, verbs.StateErr)
		require.ErrorIs(t, rt.q.Err(), ErrProtocol)
		require.Contains(t, rt.log.String(), "malformed frame")
	}
	nak := func(st verbs.Status) check {
		return func(t *testing.T, rt *rawTarget, reply []byte) {
			require.GreaterOrEqual(t, len(reply), headerLen, "reply %x", reply)
			h, err := decodeHeader(reply[len(reply)-headerLen:])
			require.NoError(t, err)
			require.Equal(t, frameNak, h.typ)
			require.Equal(t, st, h.status)
			require.ErrorIs(t, rt.q.Err(), ErrResponder)
		}
	}
	tests := []struct {
		name string
		// stream builds what the client sends, given the target region.
		stream func(dst verbs.MR) []byte
		check  check
		// placed is how many bytes at the start of the region a valid
		// request wrote before the bad one; the rest must be untouched.
		placed int
	}{
		{"garbage", func(verbs.MR) []byte { return []byte(strings.Repeat("GET / HTTP/1.1\r\n", 8)) }, protocolErr, 0},
		{"unknown type", func(dst verbs.MR) []byte {
			b := frame(header{typ: frameWrite, psn: psn, rkey: dst.RKey(), raddr: dst.Addr(), length: 16}, payload)
			b[3] = 9
			return b
		}, protocolErr, 0},
		{"length beyond maximum", func(dst verbs.MR) []byte {
			b := frame(header{typ: frameWrite, psn: psn, rkey: dst.RKey(), raddr: dst.Addr()}, nil)
			b[24], b[25], b[26], b[27] = 0xff, 0xff, 0xff, 0xff
			return b
		}, protocolErr, 0},
		{"psn out of order", func(dst verbs.MR) []byte {
			return frame(header{typ: frameWrite, psn: psn + 1, rkey: dst.RKey(), raddr: dst.Addr(), length: 16}, payload)
		}, protocolErr, 0},
		{"ack for nothing in flight", func(verbs.MR) []byte { return frame(header{typ: frameAck, psn: 5}, nil) }, protocolErr, 0},
		{"nak for nothing in flight", func(verbs.MR) []byte {
			return frame(header{typ: frameNak, psn: 5, status: verbs.StatusRemoteAccess}, nil)
		}, protocolErr, 0},
		{"valid write, then garbage", func(dst verbs.MR) []byte {
			return cat(frame(header{typ: frameWrite, psn: psn, rkey: dst.RKey(), raddr: dst.Addr(), length: 16}, payload),
				[]byte("garbage that is long enough for a header"))
		}, protocolErr, 16},
		{"write past the region", func(dst verbs.MR) []byte {
			return frame(header{typ: frameWrite, flags: flagAckReq, psn: psn, rkey: dst.RKey(), raddr: dst.Addr() + 4090, length: 16}, payload)
		}, nak(verbs.StatusRemoteAccess), 0},
		{"write under a guessed rkey", func(dst verbs.MR) []byte {
			return frame(header{typ: frameWrite, psn: psn, rkey: dst.RKey() + 1, raddr: dst.Addr(), length: 16}, payload)
		}, nak(verbs.StatusRemoteAccess), 0},
		{"requests after a refused one", func(dst verbs.MR) []byte {
			return cat(frame(header{typ: frameWrite, psn: psn, rkey: dst.RKey(), raddr: dst.Addr() + 4095, length: 2}, payload[:2]),
				frame(header{typ: frameWrite, psn: psn + 1, rkey: dst.RKey(), raddr: dst.Addr(), length: 16}, payload))
		}, nak(verbs.StatusRemoteAccess), 0},
		{"send without a receive", func(verbs.MR) []byte {
			return frame(header{typ: frameSend, psn: psn, length: 16}, payload)
		}, nak(verbs.StatusRNRRetryExceeded), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			rt := newRawTarget(t, e)
			c, err := rt.dialRaw(t, secret)
			require.NoError(t, err)
			replies := drain(c)
			_, err = c.Write(tt.stream(rt.dst))
			require.NoError(t, err)
			var reply []byte
			select {
			case reply = <-replies: // the QP closed the connection
			case <-time.After(waitLimit):
				require.FailNow(t, "connection still open")
			}
			tt.check(t, rt, reply)
			require.Equal(t, payload[:tt.placed], rt.dst.Bytes()[:tt.placed])
			requireAll(t, rt.dst.Bytes()[tt.placed:], 0xee, "region beyond the valid requests")
		})
	}
}

// TestHandshakeRefusesStrangers checks that a client that does not know
// the secret, or speaks something else, cannot write a byte and leaves the
// QP able to take its real peer.
func TestHandshakeRefusesStrangers(t *testing.T) {
	tests := []struct {
		name string
		try  func(t *testing.T, rt *rawTarget)
	}{
		{"wrong secret", func(t *testing.T, rt *rawTarget) {
			c, err := rt.dialRaw(t, []byte("not the secret of this job!"))
			require.ErrorIs(t, err, ErrAuth)
			// Whatever it writes now goes nowhere.
			_, _ = c.Write(frame(header{typ: frameWrite, psn: fakePeer.PSN, rkey: rt.dst.RKey(), raddr: rt.dst.Addr(), length: 4}, []byte("evil")))
		}},
		{"no handshake", func(t *testing.T, rt *rawTarget) {
			c, err := net.Dial("tcp", rt.d.Addr())
			require.NoError(t, err)
			defer c.Close()
			_, _ = c.Write(frame(header{typ: frameWrite, psn: fakePeer.PSN, rkey: rt.dst.RKey(), raddr: rt.dst.Addr(), length: 4}, []byte("evil")))
			require.NoError(t, c.(*net.TCPConn).CloseWrite())
			_ = c.SetReadDeadline(time.Now().Add(waitLimit))
			b := make([]byte, 256)
			n, _ := c.Read(b)
			// The device answered the "hello" with a challenge at most;
			// it never accepted the connection.
			require.LessOrEqual(t, n, nonceLen+macLen)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			rt := newRawTarget(t, e)
			tt.try(t, rt)
			waitFor(t, "the refusal to be logged", func() bool { return strings.Contains(rt.log.String(), "refused connection") })
			require.Contains(t, rt.log.String(), "peer=127.0.0.1:", "the log names the remote address")
			requireAll(t, rt.dst.Bytes(), 0xee, "target of the stranger")
			require.Equal(t, verbs.StateRTR, rt.q.State())

			// The real peer still gets in.
			c, err := rt.dialRaw(t, secret)
			require.NoError(t, err)
			_, err = c.Write(frame(header{typ: frameWrite, flags: flagAckReq, psn: fakePeer.PSN, rkey: rt.dst.RKey(), raddr: rt.dst.Addr(), length: 4}, []byte("good")))
			require.NoError(t, err)
			var ack [headerLen]byte
			_, err = c.Read(ack[:])
			require.NoError(t, err)
			h, err := decodeHeader(ack[:])
			require.NoError(t, err)
			require.Equal(t, header{typ: frameAck, psn: fakePeer.PSN}, h)
			require.Equal(t, []byte("good"), rt.dst.Bytes()[:4])
		})
	}
}

// TestWrongSecret connects two devices of different jobs: neither side
// gets a connection, both report it, requests fail with an error
// completion and no byte reaches the other side.
func TestWrongSecret(t *testing.T) {
	e := newEnv(t)
	da, pa, la := e.device(Options{Secret: []byte("job A secret, 32 bytes long.....")})
	db, pb, lb := e.device(Options{Secret: []byte("job B secret, 32 bytes long.....")})
	cfg := verbs.QPConfig{Timeout: 50 * time.Millisecond, RetryCount: 1}
	a, b := e.qp(pa, cfg), e.qp(pb, cfg)
	src := e.region(pa, 4096, verbs.AccessLocalWrite)
	dst := e.region(pb, 4096, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	dst2 := e.region(pa, 4096, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	setAll(dst.Bytes(), 0xee)
	setAll(dst2.Bytes(), 0xee)
	connect(t, a, b)
	_, err := a.PostSend(writeWR(1, verbs.OpWrite, src, 0, 64, dst, 0))
	require.NoError(t, err)
	_, err = b.PostSend(writeWR(2, verbs.OpWrite, src, 0, 0, dst2, 0))
	require.NoError(t, err)

	wa, wb := waitWCs(t, a.send, 1)[0], waitWCs(t, b.send, 1)[0]
	require.Equal(t, verbs.StatusRetryExceeded, wa.Status)
	require.Equal(t, verbs.StatusRetryExceeded, wb.Status)
	requireAll(t, dst.Bytes(), 0xee, "target across jobs")
	require.ErrorIs(t, errors.Join(a.Err(), b.Err()), ErrAuth, "the dialer knows why: %v / %v", a.Err(), b.Err())
	// The dialer sees the acceptor's answer fail and says so; the acceptor
	// sees a dialer that gave up before answering.
	dialer, acceptor, acceptorAddr := la, lb, db.Addr()
	if !dials(&verbs.Endpoint{Addr: da.Addr(), QPN: a.Num()}, &verbs.Endpoint{Addr: db.Addr(), QPN: b.Num()}) {
		dialer, acceptor, acceptorAddr = lb, la, da.Addr()
	}
	waitFor(t, "the dialer to log the failure", func() bool { return strings.Contains(dialer.String(), "authentication failed") })
	waitFor(t, "the acceptor to log the refusal", func() bool { return strings.Contains(acceptor.String(), "refused connection") })
	require.Contains(t, dialer.String(), "peer="+acceptorAddr)
	require.Contains(t, acceptor.String(), "refused connection")
}
