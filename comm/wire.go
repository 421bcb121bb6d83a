package comm

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// The control stream of a peer carries slots: one slot is one range of at
// most slotSize bytes, and holds a slot header followed by messages, each
// a fixed header and its payload. See doc.go for the protocol.

const (
	// protocolVersion numbers the wire format; HELLO checks it.
	protocolVersion = 3 // 2: SETUP, the bulk connection dialed on demand; 3: 16 KiB eager
	// slotSize is the size of a control slot; a slot is one range. It
	// holds one eager message of eagerMax bytes with its headers.
	slotSize = eagerMax + slotHeaderSize + msgHeaderSize
	// ctlSlots is the number of control slots each end keeps posted for
	// its peer, and the number of slots it sends from.
	ctlSlots = 16
	// slotHeaderSize: magic, crc, sequence number, credits, count,
	// length, padding.
	slotHeaderSize = 32
	// msgHeaderSize is the fixed part of a message.
	msgHeaderSize = 56
	// eagerMax is the largest message sent inline in a control slot:
	// 16 KiB of data and room for the 32-byte fingerprint records that
	// ride ahead of a collective's data (sixteen of them in the last
	// round of recursive doubling over 32 ranks). Over tcp on one
	// machine a rendezvous (RTS, CTS, the range on the bulk connection)
	// cost about 70 µs more than an eager message at 8 KiB, where
	// copying 16 KiB in and out costs a few µs; the slots' memory
	// (ctlSlots of them each way per peer), not the copy, bounds it.
	eagerMax = 16<<10 + 512
	// eagerCredits is the number of eager messages a sender may have
	// sent that the receiver has not matched yet: it bounds the memory
	// unexpected messages take at the receiver.
	eagerCredits = 32
	// maxCauseLen bounds the text of an ABORT.
	maxCauseLen = 1024
	// maxMessageLen bounds a message, as the engine bounds a range.
	maxMessageLen = 1 << 48
)

const slotMagic = 0x52434331 // "RCC1"

// castagnoli is used for the slot checksum, which lets a slot that
// landed be read even when its range's completion is lost with the
// connection (see salvage).
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// msgKind is the kind of a control message.
type msgKind uint8

const (
	// kindHello opens the stream: version, rank, world size, job.
	kindHello msgKind = iota + 1
	// kindEager carries a whole message inline.
	kindEager
	// kindRTS announces a message whose bytes move on the bulk stream
	// once the receiver asks for them.
	kindRTS
	// kindCTS asks for bytes [off, off+length) of message id: the
	// receiver has posted the bulk receive they fill.
	kindCTS
	// kindNack refuses message id (reason says why).
	kindNack
	// kindBye says the sender is closing its communicator.
	kindBye
	// kindAbort says a rank aborted the job (aux: its rank).
	kindAbort
	// kindSetup carries the sender's half of the bulk connection's setup
	// (see bulkExchange), which the cell driver checks before use; with
	// aux setupConnected and no payload, it says the sender's end of the
	// connection is connected.
	kindSetup
	kindLast = kindSetup
)

var kindNames = [...]string{"invalid", "hello", "eager", "rts", "cts", "nack", "bye", "abort", "setup"}

func (k msgKind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("msgKind(%d)", uint8(k))
}

// Channel kinds: a communicator has a user channel (tag matching), an
// ordered channel (for collectives) and an internal one (for its own
// collective calls such as Split).
const (
	chanUser uint8 = iota + 1
	chanOrdered
	chanInternal
)

// Flags of EAGER and RTS.
const (
	// flagRegistered: the sender's buffer is registered memory, so the
	// receiver may ask for the whole message in one range.
	flagRegistered uint8 = 1 << iota
)

// Reasons of a NACK.
const (
	reasonTruncate uint8 = iota + 1 // off: the receiver's buffer length
	reasonMismatch                  // off: the tag the receiver expected
	reasonGone                      // the receiver gave the message up
)

// header is a message's fixed part. The meaning of tag, id, length, off
// and aux depends on the kind (see doc.go).
type header struct {
	kind   msgKind
	chKind uint8
	flags  uint8
	reason uint8
	plen   uint32 // payload bytes that follow the header
	ctx    uint64
	tag    uint64
	id     uint64
	length uint64
	off    uint64
	aux    uint64
}

func (h *header) put(b []byte) {
	_ = b[msgHeaderSize-1]
	b[0], b[1], b[2], b[3] = byte(h.kind), h.chKind, h.flags, h.reason
	le := binary.LittleEndian
	le.PutUint32(b[4:], h.plen)
	le.PutUint64(b[8:], h.ctx)
	le.PutUint64(b[16:], h.tag)
	le.PutUint64(b[24:], h.id)
	le.PutUint64(b[32:], h.length)
	le.PutUint64(b[40:], h.off)
	le.PutUint64(b[48:], h.aux)
}

func (h *header) get(b []byte) {
	_ = b[msgHeaderSize-1]
	h.kind, h.chKind, h.flags, h.reason = msgKind(b[0]), b[1], b[2], b[3]
	le := binary.LittleEndian
	h.plen = le.Uint32(b[4:])
	h.ctx = le.Uint64(b[8:])
	h.tag = le.Uint64(b[16:])
	h.id = le.Uint64(b[24:])
	h.length = le.Uint64(b[32:])
	h.off = le.Uint64(b[40:])
	h.aux = le.Uint64(b[48:])
}

// check validates what can be validated of a header alone.
func (h *header) check() error {
	switch {
	case h.kind < kindHello || h.kind > kindLast:
		return fmt.Errorf("message kind %d", uint8(h.kind))
	case (h.kind == kindEager || h.kind == kindRTS) && (h.chKind < chanUser || h.chKind > chanInternal):
		return fmt.Errorf("%v message on channel kind %d", h.kind, h.chKind)
	case h.kind == kindSetup && h.plen > eagerMax:
		return fmt.Errorf("setup message of %d bytes", h.plen)
	case h.kind == kindSetup && h.aux > setupConnected:
		return fmt.Errorf("setup message of phase %d", h.aux)
	case h.kind == kindSetup && h.aux == setupConnected && h.plen != 0:
		return fmt.Errorf("connection confirmation with %d bytes of payload", h.plen)
	case h.kind == kindEager && (h.length != uint64(h.plen) || h.plen > eagerMax):
		return fmt.Errorf("eager message of %d bytes with %d inline", h.length, h.plen)
	case h.kind != kindEager && h.kind != kindHello && h.kind != kindAbort && h.kind != kindSetup && h.plen != 0:
		return fmt.Errorf("%v message with %d bytes of payload", h.kind, h.plen)
	case (h.kind == kindRTS || h.kind == kindCTS) && (h.length > maxMessageLen || h.off > maxMessageLen):
		return fmt.Errorf("%v message of length %d at offset %d", h.kind, h.length, h.off)
	case h.kind == kindNack && (h.reason < reasonTruncate || h.reason > reasonGone):
		return fmt.Errorf("nack with reason %d", h.reason)
	}
	return nil
}

// slotWriter packs messages into a send slot.
type slotWriter struct {
	b     []byte
	n     int
	count int
}

func (w *slotWriter) reset(b []byte) {
	w.b, w.n, w.count = b, slotHeaderSize, 0
}

// room reports whether a message with plen bytes of payload still fits.
func (w *slotWriter) room(plen int) bool { return w.n+msgHeaderSize+plen <= len(w.b) }

// add appends a message; the caller checked room.
func (w *slotWriter) add(h *header, payload []byte) {
	h.plen = uint32(len(payload))
	h.put(w.b[w.n:])
	w.n += msgHeaderSize
	w.n += copy(w.b[w.n:], payload)
	w.count++
}

// finish writes the slot header and returns the slot's length.
func (w *slotWriter) finish(seq uint64, credits uint32) int {
	le := binary.LittleEndian
	le.PutUint32(w.b[0:], slotMagic)
	le.PutUint64(w.b[8:], seq)
	le.PutUint32(w.b[16:], credits)
	le.PutUint32(w.b[20:], uint32(w.count))
	le.PutUint32(w.b[24:], uint32(w.n))
	le.PutUint32(w.b[28:], 0)
	le.PutUint32(w.b[4:], crc32.Checksum(w.b[8:w.n], castagnoli))
	return w.n
}

// slotReader walks the messages of a received slot.
type slotReader struct {
	b       []byte
	n       int
	left    int
	credits uint32
}

// slotLen returns the length a slot's header claims, to read a slot whose
// range did not report its length (see salvage); 0 if it cannot be one.
func slotLen(b []byte) int {
	n := int(binary.LittleEndian.Uint32(b[24:]))
	if n < slotHeaderSize || n > len(b) {
		return 0
	}
	return n
}

// open validates the slot header and checksum of the bytes of b, which
// must be the whole slot.
func (r *slotReader) open(b []byte, seq uint64) error {
	if len(b) < slotHeaderSize {
		return fmt.Errorf("slot %d of %d bytes, want at least %d", seq, len(b), slotHeaderSize)
	}
	le := binary.LittleEndian
	switch {
	case int(le.Uint32(b[24:])) != len(b):
		return fmt.Errorf("slot %d of %d bytes claims %d", seq, len(b), le.Uint32(b[24:]))
	case le.Uint32(b[0:]) != slotMagic:
		return fmt.Errorf("slot %d: bad magic %#x", seq, le.Uint32(b[0:]))
	case le.Uint64(b[8:]) != seq:
		return fmt.Errorf("slot %d: carries sequence number %d", seq, le.Uint64(b[8:]))
	case le.Uint32(b[4:]) != crc32.Checksum(b[8:], castagnoli):
		return fmt.Errorf("slot %d: checksum mismatch", seq)
	}
	r.b, r.n = b, slotHeaderSize
	r.credits = le.Uint32(b[16:])
	r.left = int(le.Uint32(b[20:]))
	if r.credits > eagerCredits {
		return fmt.Errorf("slot %d: returns %d credits, more than %d", seq, r.credits, eagerCredits)
	}
	return nil
}

// next decodes the next message; ok is false at the end.
func (r *slotReader) next(h *header) (payload []byte, ok bool, err error) {
	if r.left == 0 {
		if r.n != len(r.b) {
			return nil, false, fmt.Errorf("%d stray bytes after the last message", len(r.b)-r.n)
		}
		return nil, false, nil
	}
	if len(r.b)-r.n < msgHeaderSize {
		return nil, false, fmt.Errorf("message header cut short at byte %d", r.n)
	}
	h.get(r.b[r.n:])
	r.n += msgHeaderSize
	if err := h.check(); err != nil {
		return nil, false, err
	}
	if int(h.plen) > len(r.b)-r.n {
		return nil, false, fmt.Errorf("%v message payload of %d bytes cut short", h.kind, h.plen)
	}
	payload = r.b[r.n : r.n+int(h.plen)]
	r.n += int(h.plen)
	r.left--
	return payload, true, nil
}
