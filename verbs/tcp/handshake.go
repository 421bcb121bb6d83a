package tcp

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// The handshake authenticates both ends of a new connection with the job's
// secret and names the QP pair it is for, before a single frame is read:
//
//	dialer   → acceptor  hello:     magic, src QPN/PSN, dst QPN/PSN, nonce D, src device address
//	acceptor → dialer    challenge: nonce A, HMAC(secret, "acceptor", hello, nonce A)
//	dialer   → acceptor  response:  HMAC(secret, "dialer", hello, nonce A)
//	acceptor → dialer    verdict:   accepted, or not ready (the dialer retries)
//
// Each side answers the other's fresh nonce, so a recorded handshake cannot
// be replayed; the direction label keeps one side's answer from serving as
// the other's. The QPNs and PSNs are covered, so a connection is bound to
// one incarnation of one QP pair. The stream after the handshake is not
// encrypted or authenticated per frame: like RoCE, the provider trusts the
// network path once both ends have proved they belong to the job.
var handshakeMagic = [8]byte{'R', 'C', 'T', 'C', 'P', 0, 0, 1}

const (
	nonceLen      = 32
	macLen        = sha256.Size
	helloFixedLen = len(handshakeMagic) + 16 + nonceLen + 2
	maxAddrLen    = 255
	verdictLen    = 4
)

// Verdict codes.
const (
	verdictAccept   = 'A'
	verdictNotReady = 'N'
)

var errNotReady = errors.New("tcp: peer QP not ready for this connection")

// hello is the dialer's opening message.
type hello struct {
	srcQPN, srcPSN uint32
	dstQPN, dstPSN uint32
	nonce          [nonceLen]byte
	srcAddr        string
}

func (h *hello) marshal() []byte {
	b := make([]byte, helloFixedLen+len(h.srcAddr))
	copy(b, handshakeMagic[:])
	o := len(handshakeMagic)
	binary.BigEndian.PutUint32(b[o:], h.srcQPN)
	binary.BigEndian.PutUint32(b[o+4:], h.srcPSN)
	binary.BigEndian.PutUint32(b[o+8:], h.dstQPN)
	binary.BigEndian.PutUint32(b[o+12:], h.dstPSN)
	copy(b[o+16:], h.nonce[:])
	binary.BigEndian.PutUint16(b[o+16+nonceLen:], uint16(len(h.srcAddr)))
	copy(b[helloFixedLen:], h.srcAddr)
	return b
}

// readHello reads and parses a hello, returning it with its raw bytes,
// which both MACs cover.
// errNoHello: the connection ended before a byte of its hello, as a port
// scan or a liveness probe (see QP.peerAlive) does. That tried nothing.
var errNoHello = errors.New("closed before its hello")

func readHello(r io.Reader) (hello, []byte, error) {
	var h hello
	fixed := make([]byte, helloFixedLen, helloFixedLen+maxAddrLen)
	if _, err := io.ReadFull(r, fixed); err != nil {
		if errors.Is(err, io.EOF) {
			return h, nil, fmt.Errorf("read hello: %w: %w", errNoHello, err)
		}
		return h, nil, fmt.Errorf("read hello: %w", err)
	}
	if [8]byte(fixed[:8]) != handshakeMagic {
		return h, nil, fmt.Errorf("%w: hello with bad magic %x", ErrProtocol, fixed[:8])
	}
	o := len(handshakeMagic)
	h.srcQPN = binary.BigEndian.Uint32(fixed[o:])
	h.srcPSN = binary.BigEndian.Uint32(fixed[o+4:])
	h.dstQPN = binary.BigEndian.Uint32(fixed[o+8:])
	h.dstPSN = binary.BigEndian.Uint32(fixed[o+12:])
	copy(h.nonce[:], fixed[o+16:])
	n := int(binary.BigEndian.Uint16(fixed[o+16+nonceLen:]))
	if n == 0 || n > maxAddrLen {
		return h, nil, fmt.Errorf("%w: hello with address of %d bytes", ErrProtocol, n)
	}
	raw := fixed[:helloFixedLen+n]
	if _, err := io.ReadFull(r, raw[helloFixedLen:]); err != nil {
		return h, nil, fmt.Errorf("read hello: %w", err)
	}
	h.srcAddr = string(raw[helloFixedLen:])
	return h, raw, nil
}

func handshakeMAC(secret []byte, label string, helloRaw, nonceA []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(label))
	m.Write(helloRaw)
	m.Write(nonceA)
	return m.Sum(nil)
}

// dialHandshake runs the dialer's side. It returns an error wrapping
// ErrAuth if the acceptor does not know the secret, errNotReady if the
// acceptor's QP cannot take the connection yet, and other errors for I/O
// failures. The caller sets the connection's deadline.
func dialHandshake(rw io.ReadWriter, secret []byte, h *hello) error {
	if _, err := rand.Read(h.nonce[:]); err != nil {
		return fmt.Errorf("nonce: %w", err)
	}
	raw := h.marshal()
	if _, err := rw.Write(raw); err != nil {
		return fmt.Errorf("write hello: %w", err)
	}
	var ch [nonceLen + macLen]byte
	if _, err := io.ReadFull(rw, ch[:]); err != nil {
		return fmt.Errorf("read challenge: %w", err)
	}
	nonceA, macA := ch[:nonceLen], ch[nonceLen:]
	if !hmac.Equal(macA, handshakeMAC(secret, "acceptor", raw, nonceA)) {
		return fmt.Errorf("%w: acceptor's answer does not match the job secret", ErrAuth)
	}
	if _, err := rw.Write(handshakeMAC(secret, "dialer", raw, nonceA)); err != nil {
		return fmt.Errorf("write response: %w", err)
	}
	var v [verdictLen]byte
	if _, err := io.ReadFull(rw, v[:]); err != nil {
		// An acceptor that rejects our answer closes without a verdict.
		return fmt.Errorf("read verdict (the peer may have rejected our secret): %w", err)
	}
	switch v[0] {
	case verdictAccept:
		return nil
	case verdictNotReady:
		return errNotReady
	}
	return fmt.Errorf("%w: verdict %q", ErrProtocol, v[0])
}

// acceptHandshake runs the acceptor's side up to the verdict, which the
// caller sends with writeVerdict once it knows whether the named QP takes
// the connection. It returns the authenticated hello.
func acceptHandshake(rw io.ReadWriter, secret []byte) (hello, error) {
	h, raw, err := readHello(rw)
	if err != nil {
		return h, err
	}
	var ch [nonceLen + macLen]byte
	if _, err := rand.Read(ch[:nonceLen]); err != nil {
		return h, fmt.Errorf("nonce: %w", err)
	}
	copy(ch[nonceLen:], handshakeMAC(secret, "acceptor", raw, ch[:nonceLen]))
	if _, err := rw.Write(ch[:]); err != nil {
		return h, fmt.Errorf("write challenge: %w", err)
	}
	var resp [macLen]byte
	if _, err := io.ReadFull(rw, resp[:]); err != nil {
		return h, fmt.Errorf("read response: %w", err)
	}
	if !hmac.Equal(resp[:], handshakeMAC(secret, "dialer", raw, ch[:nonceLen])) {
		return h, fmt.Errorf("%w: dialer's answer does not match the job secret", ErrAuth)
	}
	return h, nil
}

func writeVerdict(w io.Writer, code byte) error {
	v := [verdictLen]byte{code}
	if _, err := w.Write(v[:]); err != nil {
		return fmt.Errorf("write verdict: %w", err)
	}
	return nil
}
