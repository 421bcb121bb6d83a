package cell

import "encoding/binary"

// Ring record layouts. Drivers write tokens, grants and finals into the
// peer's rings in these formats and decode what lands in their own, so
// that every driver (and the simulator) speaks the same wire. Integers
// are little-endian. Each record carries a marker and a check byte, so a
// zeroed slot or a torn write does not decode. A sender's token ring has
// Window slots of TokenSize bytes, its grant ring MaxRanges slots of
// GrantSize; a receiver's final ring MaxRanges slots of FinalSize. The
// output naming a record gives its slot.
const (
	TokenSize = 16
	GrantSize = 32
	FinalSize = 16
)

const (
	markToken = 0xC7
	markGrant = 0xC6
	markFinal = 0xC5
)

// check folds a record's bytes, but the check byte at i, into one.
func check(b []byte, i int) byte {
	x := byte(0x5A)
	for j, v := range b {
		if j != i {
			x = x<<1 | x>>7
			x ^= v
		}
	}
	return x
}

// PutToken encodes t into b[:TokenSize].
func PutToken(b []byte, t Token) {
	b = b[:TokenSize]
	binary.LittleEndian.PutUint32(b[0:], t.ID)
	b[4] = byte(t.Path)
	b[5] = byte(t.Status)
	b[6] = markToken
	binary.LittleEndian.PutUint64(b[8:], uint64(t.RxTime))
	b[7] = check(b, 7)
}

// ReadToken decodes a token from b[:TokenSize]; ok is false for a slot
// that holds no whole token.
func ReadToken(b []byte) (t Token, ok bool) {
	b = b[:TokenSize]
	if b[6] != markToken || b[7] != check(b, 7) {
		return Token{}, false
	}
	return Token{
		ID:     binary.LittleEndian.Uint32(b[0:]),
		Path:   int(b[4]),
		Status: TokenStatus(b[5]),
		RxTime: int64(binary.LittleEndian.Uint64(b[8:])),
	}, true
}

// PutGrant encodes g into b[:GrantSize].
func PutGrant(b []byte, g Grant) {
	b = b[:GrantSize]
	clear(b)
	binary.LittleEndian.PutUint32(b[0:], g.Seq)
	binary.LittleEndian.PutUint32(b[4:], g.RKey)
	binary.LittleEndian.PutUint64(b[8:], g.Addr)
	binary.LittleEndian.PutUint64(b[16:], uint64(g.Len))
	b[24] = markGrant
	b[31] = check(b, 31)
}

// ReadGrant decodes a grant from b[:GrantSize].
func ReadGrant(b []byte) (g Grant, ok bool) {
	b = b[:GrantSize]
	if b[24] != markGrant || b[31] != check(b, 31) {
		return Grant{}, false
	}
	return Grant{
		Seq:  binary.LittleEndian.Uint32(b[0:]),
		RKey: binary.LittleEndian.Uint32(b[4:]),
		Addr: binary.LittleEndian.Uint64(b[8:]),
		Len:  int64(binary.LittleEndian.Uint64(b[16:])),
	}, true
}

// PutFinal encodes f into b[:FinalSize].
func PutFinal(b []byte, f Final) {
	b = b[:FinalSize]
	binary.LittleEndian.PutUint32(b[0:], f.Seq)
	b[4] = byte(f.Status)
	b[5] = markFinal
	b[6] = 0
	binary.LittleEndian.PutUint64(b[8:], uint64(f.Len))
	b[7] = check(b, 7)
}

// ReadFinal decodes a final from b[:FinalSize].
func ReadFinal(b []byte) (f Final, ok bool) {
	b = b[:FinalSize]
	if b[5] != markFinal || b[7] != check(b, 7) {
		return Final{}, false
	}
	return Final{
		Seq:    binary.LittleEndian.Uint32(b[0:]),
		Status: FinalStatus(b[4]),
		Len:    int64(binary.LittleEndian.Uint64(b[8:])),
	}, true
}
