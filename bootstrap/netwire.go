package bootstrap

import (
	"bufio"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"
)

// The wire protocol of a store served over TCP (ServeStore, DialStore).
//
// A connection starts with a mutual challenge-response on the job secret,
// in fixed-size messages, so that the secret never crosses the wire and a
// peer that does not know it learns nothing but a random nonce:
//
//	server → client  magic[8] nonceS[32]
//	client → server  magic[8] nonceC[32] HMAC(k, "client" nonceS nonceC)
//	server → client  HMAC(k, "server" nonceS nonceC)
//
// where k is derived from the job secret (HKDF-SHA256, label storeAuthLabel).
// The server answers only a client whose MAC is right, and closes the
// connection otherwise; the client goes on only if the server's MAC is
// right. The labels keep one side's MAC from being reflected as the
// other's, and the server's fresh nonce keeps a recorded handshake from
// being replayed.
//
// Then both sides exchange frames:
//
//	length u32 | body | tag[16]
//	body = type u8 | id u64 | fields of the type
//
// length counts body and tag, at most maxFrame. tag is the first 16 bytes
// of HMAC(k_dir, seq u64 | body), where k_dir is derived from k and both
// nonces, one key per direction, and seq counts the frames sent in that
// direction from 0: a frame injected, altered, dropped, replayed or
// reordered on the way fails its tag, and the connection ends. Nothing in
// the store is secret (the job secret never enters it), so frames are not
// encrypted: an eavesdropper sees the connection info of the ranks, which
// does not let it pass the data path's handshake.
//
// Fields are u8, u64 and i64 big-endian, and byte strings (keys, values,
// messages) as a u32 length followed by the bytes. A decoder checks every
// length against what is left and the bound of its field, every flag is 0
// or 1, and a body must be consumed exactly; anything else is a malformed
// frame, and the connection ends with an error naming it.
const (
	storeMagic      = "RDMCST01"
	storeNonceSize  = 32
	storeMACSize    = sha256.Size
	storeTagSize    = 16
	storeAuthLabel  = "rdmacell store auth v1"
	storeHandshake  = 5 * time.Second // bound of a connection's handshake
	maxFrame        = 16 << 20
	maxStoreKey     = 4 << 10
	maxStoreValue   = 4 << 20
	maxStoreText    = 4 << 10
	maxStoreTTL     = 24 * time.Hour
	frameHeaderSize = 4
)

// Frame types. Requests go from client to server; every request gets one
// response with its id (an error frame, or the type's answer), except a
// watch, which gets watch frames until a watchEnd.
const (
	reqGrant     byte = 1 // ttl
	reqKeepAlive byte = 2 // lease
	reqRevoke    byte = 3 // lease
	reqPut       byte = 4 // key value lease
	reqCreate    byte = 5 // key value lease
	reqDelete    byte = 6 // key prefix
	reqList      byte = 7 // key
	reqWatch     byte = 8 // key rev
	reqUnwatch   byte = 9 // (the id of the watch)

	respOK     byte = 64 // no fields
	respGrant  byte = 65 // lease ttl
	respCreate byte = 66 // flag(created) value(existing)
	respList   byte = 67 // rev count {key value rev}
	respWatch  byte = 68 // flag(compacted) count {flag(deleted) key value rev}
	respEnd    byte = 69 // text (empty: ended by the client)
	respError  byte = 70 // code text
)

// Error codes of a respError frame.
const (
	codeOther    byte = 0
	codeNoLease  byte = 1
	codeClosed   byte = 2
	codeBadInput byte = 3
)

// frame is one decoded frame. Which fields are meaningful depends on typ.
type frame struct {
	typ    byte
	id     uint64
	key    string
	value  []byte
	lease  LeaseID
	num    int64 // a TTL in nanoseconds, or a revision
	flag   bool
	code   byte
	text   string
	kvs    []KeyValue
	events []Event
}

// errMalformed is wrapped by every error of a frame that cannot be decoded.
var errMalformed = errors.New("malformed store frame")

// appendFrameBody encodes f's type, id and fields.
func appendFrameBody(b []byte, f *frame) []byte {
	b = append(b, f.typ)
	b = binary.BigEndian.AppendUint64(b, f.id)
	bytesField := func(v []byte) {
		b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
		b = append(b, v...)
	}
	i64 := func(v int64) { b = binary.BigEndian.AppendUint64(b, uint64(v)) }
	flag := func(v bool) {
		if v {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
	}
	keyValue := func(kv KeyValue) {
		bytesField([]byte(kv.Key))
		bytesField(kv.Value)
		i64(kv.Revision)
	}
	switch f.typ {
	case reqGrant:
		i64(f.num)
	case reqKeepAlive, reqRevoke:
		i64(int64(f.lease))
	case reqPut, reqCreate:
		bytesField([]byte(f.key))
		bytesField(f.value)
		i64(int64(f.lease))
	case reqDelete:
		bytesField([]byte(f.key))
		flag(f.flag)
	case reqList:
		bytesField([]byte(f.key))
	case reqWatch:
		bytesField([]byte(f.key))
		i64(f.num)
	case reqUnwatch, respOK:
	case respGrant:
		i64(int64(f.lease))
		i64(f.num)
	case respCreate:
		flag(f.flag)
		bytesField(f.value)
	case respList:
		i64(f.num)
		b = binary.BigEndian.AppendUint32(b, uint32(len(f.kvs)))
		for _, kv := range f.kvs {
			keyValue(kv)
		}
	case respWatch:
		flag(f.flag)
		b = binary.BigEndian.AppendUint32(b, uint32(len(f.events)))
		for _, ev := range f.events {
			flag(ev.Deleted)
			keyValue(ev.KV)
		}
	case respEnd:
		bytesField([]byte(f.text))
	case respError:
		b = append(b, f.code)
		bytesField([]byte(f.text))
	}
	return b
}

// decoder reads the fields of a frame body, remembering the first error.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: "+format, append([]any{errMalformed}, args...)...)
	}
}

func (d *decoder) take(n int, what string) []byte {
	if d.err != nil {
		return nil
	}
	if n > len(d.b) {
		d.fail("%s needs %d bytes, %d left", what, n, len(d.b))
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) u8(what string) byte {
	if v := d.take(1, what); v != nil {
		return v[0]
	}
	return 0
}

func (d *decoder) u32(what string) uint32 {
	if v := d.take(4, what); v != nil {
		return binary.BigEndian.Uint32(v)
	}
	return 0
}

func (d *decoder) u64(what string) uint64 {
	if v := d.take(8, what); v != nil {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

// i64 reads a signed integer that must lie in [lo, hi].
func (d *decoder) i64(what string, lo, hi int64) int64 {
	v := int64(d.u64(what))
	if d.err == nil && (v < lo || v > hi) {
		d.fail("%s %d, want %d..%d", what, v, lo, hi)
	}
	return v
}

func (d *decoder) flag(what string) bool {
	v := d.u8(what)
	if d.err == nil && v > 1 {
		d.fail("%s %d, want 0 or 1", what, v)
	}
	return v == 1
}

// bytes reads a byte string of at most limit bytes. The result is a copy:
// frames are read into a reused buffer.
func (d *decoder) bytes(what string, limit int) []byte {
	n := d.u32(what + " length")
	if d.err == nil && int64(n) > int64(limit) {
		d.fail("%s of %d bytes, want at most %d", what, n, limit)
	}
	v := d.take(int(n), what)
	if v == nil {
		return nil
	}
	return append([]byte(nil), v...)
}

func (d *decoder) str(what string, limit int) string { return string(d.bytes(what, limit)) }

// keyValue reads a key, its value and its revision.
func (d *decoder) keyValue() KeyValue {
	kv := KeyValue{Key: d.str("key", maxStoreKey), Value: d.bytes("value", maxStoreValue)}
	kv.Revision = d.i64("revision", 1, maxRev)
	return kv
}

// count reads the number of entries of a list whose entries take at least
// minSize bytes each, so that a count cannot claim more than the frame
// holds.
func (d *decoder) count(what string, minSize int) int {
	n := d.u32(what)
	if d.err == nil && int64(n)*int64(minSize) > int64(len(d.b)) {
		d.fail("%s %d, but only %d bytes left", what, n, len(d.b))
	}
	return int(n)
}

// Bounds of the integer fields.
const (
	maxLeaseID = 1<<63 - 1
	maxRev     = 1<<63 - 1
)

// decodeFrameBody decodes a body as appendFrameBody writes it. request says
// which side's frames are expected: a client never sends a response type,
// nor a server a request type.
func decodeFrameBody(body []byte, request bool) (frame, error) {
	d := decoder{b: body}
	f := frame{typ: d.u8("frame type"), id: d.u64("frame id")}
	if d.err != nil {
		return frame{}, d.err
	}
	if isRequest := f.typ < respOK; isRequest != request {
		dir := "server to client"
		if request {
			dir = "client to server"
		}
		return frame{}, fmt.Errorf("%w: frame type %d is not sent %s", errMalformed, f.typ, dir)
	}
	switch f.typ {
	case reqGrant:
		f.num = d.i64("lease TTL (ns)", 1, int64(maxStoreTTL))
	case reqKeepAlive, reqRevoke:
		f.lease = LeaseID(d.i64("lease", 1, maxLeaseID))
	case reqPut, reqCreate:
		f.key = d.str("key", maxStoreKey)
		f.value = d.bytes("value", maxStoreValue)
		f.lease = LeaseID(d.i64("lease", 0, maxLeaseID))
	case reqDelete:
		f.key = d.str("key", maxStoreKey)
		f.flag = d.flag("prefix flag")
	case reqList:
		f.key = d.str("prefix", maxStoreKey)
	case reqWatch:
		f.key = d.str("prefix", maxStoreKey)
		f.num = d.i64("watch revision", 0, maxRev)
	case reqUnwatch, respOK:
	case respGrant:
		f.lease = LeaseID(d.i64("lease", 1, maxLeaseID))
		f.num = d.i64("lease TTL (ns)", 1, int64(maxStoreTTL))
	case respCreate:
		f.flag = d.flag("created flag")
		f.value = d.bytes("existing value", maxStoreValue)
	case respList:
		f.num = d.i64("list revision", 0, maxRev)
		n := d.count("key count", 4+4+8)
		for i := 0; i < n && d.err == nil; i++ {
			f.kvs = append(f.kvs, d.keyValue())
		}
	case respWatch:
		f.flag = d.flag("compacted flag")
		n := d.count("event count", 1+4+4+8)
		for i := 0; i < n && d.err == nil; i++ {
			ev := Event{Deleted: d.flag("deleted flag")}
			ev.KV = d.keyValue()
			f.events = append(f.events, ev)
		}
	case respEnd:
		f.text = d.str("message", maxStoreText)
	case respError:
		f.code = d.u8("error code")
		if d.err == nil && f.code > codeBadInput {
			d.fail("error code %d, want 0..%d", f.code, codeBadInput)
		}
		f.text = d.str("message", maxStoreText)
	default:
		d.fail("unknown frame type %d", f.typ)
	}
	if d.err == nil && len(d.b) > 0 {
		d.fail("%d bytes after the fields of frame type %d", len(d.b), f.typ)
	}
	if d.err != nil {
		return frame{}, d.err
	}
	return f, nil
}

// framer reads and writes the frames of one direction each of a connection,
// with the tags of that connection's keys.
type framer struct {
	r       *bufio.Reader
	w       io.Writer
	inKey   []byte
	outKey  []byte
	inSeq   uint64
	outSeq  uint64
	inBuf   []byte
	outBuf  []byte
	request bool // the frames read are requests (this is the server)
}

// writeFrame encodes, tags and writes f. Not safe for concurrent use.
func (fr *framer) writeFrame(f *frame) error {
	b := append(fr.outBuf[:0], 0, 0, 0, 0)
	b = appendFrameBody(b, f)
	body := b[frameHeaderSize:]
	if len(body)+storeTagSize > maxFrame {
		return fmt.Errorf("store frame of type %d is %d bytes, over the %d-byte bound", f.typ, len(body), maxFrame)
	}
	b = append(b, frameTag(fr.outKey, fr.outSeq, body)...)
	binary.BigEndian.PutUint32(b, uint32(len(b)-frameHeaderSize))
	fr.outSeq++
	fr.outBuf = b
	_, err := fr.w.Write(b)
	return err
}

// readFrame reads, checks and decodes the next frame. Not safe for
// concurrent use.
func (fr *framer) readFrame() (frame, error) {
	var hdr [frameHeaderSize]byte
	if _, err := io.ReadFull(fr.r, hdr[:]); err != nil {
		return frame{}, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n < 1+8+storeTagSize || n > maxFrame {
		return frame{}, fmt.Errorf("%w: frame length %d, want %d..%d", errMalformed, n, 1+8+storeTagSize, maxFrame)
	}
	if cap(fr.inBuf) < int(n) {
		fr.inBuf = make([]byte, n)
	}
	b := fr.inBuf[:n]
	if _, err := io.ReadFull(fr.r, b); err != nil {
		return frame{}, fmt.Errorf("%w: frame of %d bytes cut short: %w", errMalformed, n, err)
	}
	body, tag := b[:len(b)-storeTagSize], b[len(b)-storeTagSize:]
	if !hmac.Equal(tag, frameTag(fr.inKey, fr.inSeq, body)) {
		return frame{}, fmt.Errorf("%w: frame %d fails its tag (altered, injected or out of order)", errMalformed, fr.inSeq)
	}
	fr.inSeq++
	return decodeFrameBody(body, fr.request)
}

// frameTag is the tag of the seq-th frame of a direction.
func frameTag(key []byte, seq uint64, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	var s [8]byte
	binary.BigEndian.PutUint64(s[:], seq)
	m.Write(s[:])
	m.Write(body)
	return m.Sum(nil)[:storeTagSize]
}

// storeAuthKey is the key of the handshake, derived from the job secret.
func storeAuthKey(secret []byte) ([]byte, error) {
	return hkdf.Key(sha256.New, secret, nil, storeAuthLabel, sha256.Size)
}

// handshakeMAC is one side's proof of the key over both nonces.
func handshakeMAC(key []byte, label string, nonceS, nonceC []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(label))
	m.Write(nonceS)
	m.Write(nonceC)
	return m.Sum(nil)
}

// newNonce draws a handshake nonce.
func newNonce() []byte {
	b := make([]byte, storeNonceSize)
	_, _ = rand.Read(b) // crypto/rand does not fail on Linux
	return b
}

// ErrStoreAuth is wrapped by the error of a connection to a served store
// whose other end does not prove the job secret: the ranks were given
// different secrets, or something else listens at the address.
var ErrStoreAuth = errors.New("store authentication failed")

// serverHandshake runs the server's side of the handshake on rw and
// returns the framer of the connection.
func serverHandshake(rw io.ReadWriter, key []byte) (*framer, error) {
	nonceS := newNonce()
	if _, err := rw.Write(append([]byte(storeMagic), nonceS...)); err != nil {
		return nil, err
	}
	r := bufio.NewReader(rw)
	msg := make([]byte, len(storeMagic)+storeNonceSize+storeMACSize)
	if _, err := io.ReadFull(r, msg); err != nil {
		return nil, fmt.Errorf("%w: client hello: %w", ErrStoreAuth, err)
	}
	if string(msg[:len(storeMagic)]) != storeMagic {
		return nil, fmt.Errorf("%w: client hello does not start with %q", ErrStoreAuth, storeMagic)
	}
	nonceC := msg[len(storeMagic) : len(storeMagic)+storeNonceSize]
	if !hmac.Equal(msg[len(storeMagic)+storeNonceSize:], handshakeMAC(key, "client", nonceS, nonceC)) {
		return nil, fmt.Errorf("%w: the client does not know the job secret", ErrStoreAuth)
	}
	if _, err := rw.Write(handshakeMAC(key, "server", nonceS, nonceC)); err != nil {
		return nil, err
	}
	return newFramer(r, rw, key, nonceS, nonceC, true), nil
}

// clientHandshake runs the client's side of the handshake on rw.
func clientHandshake(rw io.ReadWriter, key []byte) (*framer, error) {
	r := bufio.NewReader(rw)
	hello := make([]byte, len(storeMagic)+storeNonceSize)
	if _, err := io.ReadFull(r, hello); err != nil {
		// Not an answer yet (a server busy, full, or going away): the
		// caller may try again.
		return nil, fmt.Errorf("server hello: %w", err)
	}
	if string(hello[:len(storeMagic)]) != storeMagic {
		return nil, fmt.Errorf("%w: the server's hello does not start with %q: not an RDMACell store", ErrStoreAuth, storeMagic)
	}
	nonceS := hello[len(storeMagic):]
	nonceC := newNonce()
	msg := append([]byte(storeMagic), nonceC...)
	msg = append(msg, handshakeMAC(key, "client", nonceS, nonceC)...)
	if _, err := rw.Write(msg); err != nil {
		return nil, err
	}
	mac := make([]byte, storeMACSize)
	if _, err := io.ReadFull(r, mac); err != nil {
		return nil, fmt.Errorf("%w: the server closed the connection: it refused this rank's secret (%w)", ErrStoreAuth, err)
	}
	if !hmac.Equal(mac, handshakeMAC(key, "server", nonceS, nonceC)) {
		return nil, fmt.Errorf("%w: the server does not know the job secret", ErrStoreAuth)
	}
	return newFramer(r, rw, key, nonceS, nonceC, false), nil
}

// newFramer derives the per-direction keys of a connection.
func newFramer(r *bufio.Reader, w io.Writer, key, nonceS, nonceC []byte, server bool) *framer {
	c2s := handshakeMAC(key, "client to server", nonceS, nonceC)
	s2c := handshakeMAC(key, "server to client", nonceS, nonceC)
	fr := &framer{r: r, w: w, request: server}
	if server {
		fr.inKey, fr.outKey = c2s, s2c
	} else {
		fr.inKey, fr.outKey = s2c, c2s
	}
	return fr
}
