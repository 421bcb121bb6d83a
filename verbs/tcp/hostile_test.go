package tcp

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/rdmacell/rdmacell/internal/syncbuf"
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
	log *syncbuf.Buffer
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
// gets a connection and both report it. The dialing QP fails at once with
// ErrAuth; the accepting QP's requests fail with an error completion for
// want of a connection; no byte reaches either side.
func TestWrongSecret(t *testing.T) {
	e := newEnv(t)
	da, pa, la := e.device(Options{Secret: []byte("job A secret, 32 bytes long.....")})
	db, pb, lb := e.device(Options{Secret: []byte("job B secret, 32 bytes long.....")})
	cfg := verbs.QPConfig{Timeout: 50 * time.Millisecond, RetryCount: 1}
	a, b := e.qp(pa, cfg), e.qp(pb, cfg)
	srcA := e.region(pa, 4096, verbs.AccessLocalWrite)
	srcB := e.region(pb, 4096, verbs.AccessLocalWrite)
	dstA := e.region(pa, 4096, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	dstB := e.region(pb, 4096, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	setAll(dstA.Bytes(), 0xee)
	setAll(dstB.Bytes(), 0xee)
	require.NoError(t, a.Modify(verbs.StateInit, nil))
	require.NoError(t, b.Modify(verbs.StateInit, nil))
	ea, eb := a.Endpoint(), b.Endpoint()
	require.NoError(t, a.Modify(verbs.StateRTR, &eb))
	require.NoError(t, b.Modify(verbs.StateRTR, &ea))
	for _, q := range []*tqp{a, b} {
		// The dialer may have failed its handshake already.
		if err := q.Modify(verbs.StateRTS, nil); err != nil {
			require.ErrorIs(t, err, verbs.ErrInvalidState)
			require.True(t, q.dialer, "only the dialer fails by itself")
		}
	}

	type side struct {
		q        *tqp
		src, dst verbs.MR
		log      *syncbuf.Buffer
		addr     string
	}
	dialer, acceptor := side{a, srcA, dstB, la, da.Addr()}, side{b, srcB, dstA, lb, db.Addr()}
	if !a.dialer {
		dialer, acceptor = acceptor, dialer
	}
	require.True(t, dialer.q.dialer)

	// The dialer sees the acceptor's answer fail, says so naming it, and
	// cannot post at all.
	waitState(t, dialer.q.QP, verbs.StateErr)
	require.ErrorIs(t, dialer.q.Err(), ErrAuth)
	waitFor(t, "the dialer to log the failure", func() bool { return strings.Contains(dialer.log.String(), "authentication failed") })
	require.Contains(t, dialer.log.String(), "peer="+acceptor.addr)
	_, err := dialer.q.PostSend(writeWR(1, verbs.OpWrite, dialer.src, 0, 64, dialer.dst, 0))
	require.ErrorIs(t, err, verbs.ErrInvalidState)

	// The acceptor saw a dialer give up before answering, and its own
	// request fails for want of a connection.
	waitFor(t, "the acceptor to log the refusal", func() bool { return strings.Contains(acceptor.log.String(), "refused connection") })
	_, err = acceptor.q.PostSend(writeWR(2, verbs.OpWrite, acceptor.src, 0, 64, acceptor.dst, 0))
	require.NoError(t, err)
	require.Equal(t, verbs.StatusRetryExceeded, waitWCs(t, acceptor.q.send, 1)[0].Status)
	require.ErrorIs(t, acceptor.q.Err(), ErrConnLost)

	requireAll(t, dstA.Bytes(), 0xee, "region of job A")
	requireAll(t, dstB.Bytes(), 0xee, "region of job B")
}
