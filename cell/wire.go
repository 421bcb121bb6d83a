package cell

import "encoding/binary"

// Ring record layouts. Drivers write tokens, grants, finals, tails, holds
// and hold acks into the peer's rings in these formats and decode what
// lands in their own, so that every driver speaks the same wire. Integers
// are little-endian. A sender's token ring has Window slots of TokenSize
// bytes, its grant ring MaxRanges slots of GrantSize and its hold-ack
// ring MaxRanges slots of HoldSize; a receiver's final ring has MaxRanges
// slots of FinalSize, its tail ring MaxRanges of TailSize and its hold
// ring MaxRanges of HoldSize. The output naming a record gives its slot.
//
// A ring slot is read while the peer may be writing it, and nothing
// orders the reader's loads against the writer's stores: a WRITE is
// placed in any order and in pieces (an RNIC by PCIe transaction, the tcp
// provider as the socket delivers, the shm provider by memmove). So a
// decoder copies the slot once and decodes only that copy, and every
// record carries a marker and a 32-bit check over all its other bytes: a
// zeroed slot, a torn write, or a copy that mixes two records does not
// decode (the check passes such a mix about once in 2^32). Decoding from
// the slot itself, field by field, once let a torn final decode with a
// sequence number it was never written with; the reader then cleared the
// slot, and the real final, complete a moment later, was lost.
const (
	TokenSize = 16
	GrantSize = 32
	FinalSize = 16
	TailSize  = 24
	HoldSize  = 16
)

// TokenSlot is the slot of a sender's token ring (of window slots, a
// power of two) that the token of cell id goes into: the receiver
// writes it there (TokenWrite.Slot), the sender looks for it there.
func TokenSlot(id uint32, window int) int { return int(id & uint32(window-1)) }

const (
	markToken = 0xC7
	markGrant = 0xC6
	markFinal = 0xC5
	markTail  = 0xC4
	markHold  = 0xC3
	markAck   = 0xC2
)

// maxFinalLen bounds a final's length, which travels in 48 bits; ranges
// are at most 1<<48 bytes.
const maxFinalLen = 1<<48 - 1

// check hashes a record whose 4-byte check field at b[at:at+4] is zero.
func check(b []byte) uint32 {
	h := uint64(0x9E3779B97F4A7C15)
	for i := 0; i < len(b); i += 8 {
		h ^= binary.LittleEndian.Uint64(b[i:])
		h *= 0xBF58476D1CE4E5B9
		h ^= h >> 31
	}
	h *= 0x94D049BB133111EB
	return uint32(h ^ h>>32)
}

// seal writes the check of the record in b into b[at:at+4].
func seal(b []byte, at int) {
	binary.LittleEndian.PutUint32(b[at:], 0)
	binary.LittleEndian.PutUint32(b[at:], check(b))
}

// intact reports whether the record copied into b carries its marker at
// mark and a valid check at at.
func intact(b []byte, mark int, want byte, at int) bool {
	if b[mark] != want {
		return false
	}
	got := binary.LittleEndian.Uint32(b[at:])
	binary.LittleEndian.PutUint32(b[at:], 0)
	return check(b) == got
}

// Token layout: ID [0:4], Path [4], Status [5], marker [6], zero [7], the
// low 32 bits of RxTime [8:12], check [12:16].

// PutToken encodes t into b[:TokenSize]. Only the low 32 bits of RxTime
// travel.
func PutToken(b []byte, t Token) {
	b = b[:TokenSize]
	binary.LittleEndian.PutUint32(b[0:], t.ID)
	b[4] = byte(t.Path)
	b[5] = byte(t.Status)
	b[6] = markToken
	b[7] = 0
	binary.LittleEndian.PutUint32(b[8:], uint32(t.RxTime))
	seal(b, 12)
}

// ReadToken decodes a token from b[:TokenSize], which may be under a
// write; ok is false unless it holds a whole token. RxTime comes back as
// the 32 bits that travel.
func ReadToken(b []byte) (t Token, ok bool) {
	var r [TokenSize]byte
	copy(r[:], b[:TokenSize])
	if !intact(r[:], 6, markToken, 12) {
		return Token{}, false
	}
	return Token{
		ID:     binary.LittleEndian.Uint32(r[0:]),
		Path:   int(r[4]),
		Status: TokenStatus(r[5]),
		RxTime: int64(binary.LittleEndian.Uint32(r[8:])),
	}, true
}

// Grant layout: Seq [0:4], RKey [4:8], Addr [8:16], Len [16:24], marker
// [24], zero [25:28], check [28:32].

// PutGrant encodes g into b[:GrantSize].
func PutGrant(b []byte, g Grant) {
	b = b[:GrantSize]
	clear(b)
	binary.LittleEndian.PutUint32(b[0:], g.Seq)
	binary.LittleEndian.PutUint32(b[4:], g.RKey)
	binary.LittleEndian.PutUint64(b[8:], g.Addr)
	binary.LittleEndian.PutUint64(b[16:], uint64(g.Len))
	b[24] = markGrant
	seal(b, 28)
}

// ReadGrant decodes a grant from b[:GrantSize], which may be under a
// write.
func ReadGrant(b []byte) (g Grant, ok bool) {
	var r [GrantSize]byte
	copy(r[:], b[:GrantSize])
	if !intact(r[:], 24, markGrant, 28) || r[25]|r[26]|r[27] != 0 {
		return Grant{}, false
	}
	return Grant{
		Seq:  binary.LittleEndian.Uint32(r[0:]),
		RKey: binary.LittleEndian.Uint32(r[4:]),
		Addr: binary.LittleEndian.Uint64(r[8:]),
		Len:  int64(binary.LittleEndian.Uint64(r[16:])),
	}, true
}

// Final layout: Seq [0:4], Status [4], marker [5], Len in 48 bits
// [6:12], check [12:16].

// PutFinal encodes f into b[:FinalSize] (the length as putLen48 does).
func PutFinal(b []byte, f Final) {
	b = b[:FinalSize]
	binary.LittleEndian.PutUint32(b[0:], f.Seq)
	b[4] = byte(f.Status)
	b[5] = markFinal
	putLen48(b[6:], f.Len)
	seal(b, 12)
}

// putLen48 writes a range length in 48 bits; one outside 0..2^48−1 cannot
// be a range's and goes as maxFinalLen, which the receiver refuses as
// longer than its range.
func putLen48(b []byte, v int64) {
	n := uint64(v)
	if v < 0 || n > maxFinalLen {
		n = maxFinalLen
	}
	binary.LittleEndian.PutUint16(b, uint16(n))
	binary.LittleEndian.PutUint32(b[2:], uint32(n>>16))
}

func readLen48(b []byte) int64 {
	return int64(uint64(binary.LittleEndian.Uint16(b)) | uint64(binary.LittleEndian.Uint32(b[2:]))<<16)
}

// ReadFinal decodes a final from b[:FinalSize], which may be under a
// write.
func ReadFinal(b []byte) (f Final, ok bool) {
	var r [FinalSize]byte
	copy(r[:], b[:FinalSize])
	if !intact(r[:], 5, markFinal, 12) {
		return Final{}, false
	}
	return Final{
		Seq:    binary.LittleEndian.Uint32(r[0:]),
		Status: FinalStatus(r[4]),
		Len:    readLen48(r[6:]),
	}, true
}

// Tail layout: Seq [0:4], First [4:8], Cells [8:12], Len in 48 bits
// [12:18], marker [18], zero [19], check [20:24].

// PutTail encodes t into b[:TailSize], its length as PutFinal does.
func PutTail(b []byte, t Tail) {
	b = b[:TailSize]
	binary.LittleEndian.PutUint32(b[0:], t.Seq)
	binary.LittleEndian.PutUint32(b[4:], t.First)
	binary.LittleEndian.PutUint32(b[8:], t.Cells)
	putLen48(b[12:], t.Len)
	b[18] = markTail
	b[19] = 0
	seal(b, 20)
}

// ReadTail decodes a tail from b[:TailSize], which may be under a write.
func ReadTail(b []byte) (t Tail, ok bool) {
	var r [TailSize]byte
	copy(r[:], b[:TailSize])
	if !intact(r[:], 18, markTail, 20) || r[19] != 0 {
		return Tail{}, false
	}
	return Tail{
		Seq:   binary.LittleEndian.Uint32(r[0:]),
		First: binary.LittleEndian.Uint32(r[4:]),
		Cells: binary.LittleEndian.Uint32(r[8:]),
		Len:   readLen48(r[12:]),
	}, true
}

// Hold and HoldAck layout: Seq [0:4], Done [4] (0 or 1; 0 in a hold),
// marker [5], Path [6] (0 in a hold ack), zero [7:12], check [12:16].

// PutHold encodes h into b[:HoldSize].
func PutHold(b []byte, h Hold) { putHold(b, h.Seq, false, byte(h.Path), markHold) }

// ReadHold decodes a hold from b[:HoldSize], which may be under a write.
func ReadHold(b []byte) (Hold, bool) {
	seq, done, path, ok := readHold(b, markHold)
	return Hold{Seq: seq, Path: int(path)}, ok && !done
}

// PutHoldAck encodes a into b[:HoldSize].
func PutHoldAck(b []byte, a HoldAck) { putHold(b, a.Seq, a.Done, 0, markAck) }

// ReadHoldAck decodes a hold ack from b[:HoldSize], which may be under a
// write.
func ReadHoldAck(b []byte) (HoldAck, bool) {
	seq, done, path, ok := readHold(b, markAck)
	return HoldAck{Seq: seq, Done: done}, ok && path == 0
}

func putHold(b []byte, seq uint32, done bool, path, mark byte) {
	b = b[:HoldSize]
	clear(b)
	binary.LittleEndian.PutUint32(b[0:], seq)
	if done {
		b[4] = 1
	}
	b[5] = mark
	b[6] = path
	seal(b, 12)
}

func readHold(b []byte, mark byte) (seq uint32, done bool, path byte, ok bool) {
	var r [HoldSize]byte
	copy(r[:], b[:HoldSize])
	if !intact(r[:], 5, mark, 12) || r[4] > 1 || r[7]|r[8]|r[9]|r[10]|r[11] != 0 {
		return 0, false, 0, false
	}
	return binary.LittleEndian.Uint32(r[0:]), r[4] == 1, r[6], true
}
