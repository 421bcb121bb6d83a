package tcp

import (
	"encoding/binary"
	"testing"

	"github.com/rdmacell/rdmacell/verbs"
	"github.com/stretchr/testify/require"
)

var validHeaders = []header{
	{typ: frameWrite, psn: 7, rkey: 0xdeadbeef, raddr: 0x7f0000001000, length: 4096},
	{typ: frameWrite, flags: flagAckReq, psn: 0xffffffff},
	{typ: frameSend, flags: flagAckLazy, psn: 2},
	{typ: frameWriteImm, rkey: 1, raddr: 1, length: MaxMessageSize, imm: 0xc0ffee},
	{typ: frameSend, psn: 3, length: 12},
	{typ: frameAck, psn: 99},
	{typ: frameNak, psn: 5, status: verbs.StatusRemoteAccess},
	{typ: frameNak, psn: 5, status: verbs.StatusRNRRetryExceeded},
	{typ: frameNak, psn: 5, status: verbs.StatusRemoteInvalidRequest},
	{typ: frameRNR, psn: 1},
	{typ: frameBye},
}

func TestHeaderRoundTrip(t *testing.T) {
	for _, h := range validHeaders {
		t.Run(h.typ.String(), func(t *testing.T) {
			var b [headerLen]byte
			encodeHeader(b[:], &h)
			got, err := decodeHeader(b[:])
			require.NoError(t, err)
			require.Equal(t, h, got)
		})
	}
}

func TestDecodeHeaderRejects(t *testing.T) {
	base := func(h header) []byte {
		b := make([]byte, headerLen)
		encodeHeader(b, &h)
		return b
	}
	write := header{typ: frameWrite, psn: 1, rkey: 2, raddr: 0x1000, length: 8}
	tests := []struct {
		name string
		b    []byte
	}{
		{"short", base(write)[:headerLen-1]},
		{"empty", nil},
		{"bad magic", func() []byte { b := base(write); b[0] ^= 1; return b }()},
		{"bad version", func() []byte { b := base(write); b[2] = 2; return b }()},
		{"reserved bits", func() []byte { b := base(write); b[7] = 1; return b }()},
		{"type zero", func() []byte { b := base(write); b[3] = 0; return b }()},
		{"unknown type", func() []byte { b := base(write); b[3] = 8; return b }()},
		{"reserved flag", func() []byte { b := base(write); b[4] = 4; return b }()},
		{"status on data", func() []byte { b := base(write); b[5] = 1; return b }()},
		{"too long", base(header{typ: frameWrite, length: MaxMessageSize + 1})},
		{"range wraps", base(header{typ: frameWrite, raddr: ^uint64(0) - 3, length: 8})},
		{"send with rkey", base(header{typ: frameSend, rkey: 1, length: 1})},
		{"send with address", base(header{typ: frameSend, raddr: 1, length: 1})},
		{"write with imm", base(header{typ: frameWrite, imm: 1})},
		{"send with imm", base(header{typ: frameSend, imm: 1})},
		{"ack with length", base(header{typ: frameAck, length: 1})},
		{"ack with flags", base(header{typ: frameAck, flags: flagAckReq})},
		{"ack with rkey", base(header{typ: frameAck, rkey: 1})},
		{"ack with status", base(header{typ: frameAck, status: verbs.StatusRemoteAccess})},
		{"rnr with imm", base(header{typ: frameRNR, imm: 1})},
		{"bye with psn", base(header{typ: frameBye, psn: 1})},
		{"bye with length", base(header{typ: frameBye, length: 1})},
		{"bye with status", base(header{typ: frameBye, status: verbs.StatusRemoteAccess})},
		{"type after the last", base(header{typ: frameBye + 1})},
		{"nak without status", base(header{typ: frameNak})},
		{"nak with flush status", base(header{typ: frameNak, status: verbs.StatusWRFlush})},
		{"nak with unknown status", base(header{typ: frameNak, status: 200})},
		{"nak with address", base(header{typ: frameNak, status: verbs.StatusRemoteAccess, raddr: 8})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := decodeHeader(tt.b)
			require.ErrorIs(t, err, ErrProtocol)
		})
	}
}

// FuzzDecodeHeader checks that the decoder never panics and accepts only
// canonical headers: whatever it accepts encodes back to the same bytes,
// within the limits the responder relies on.
func FuzzDecodeHeader(f *testing.F) {
	for _, h := range validHeaders {
		var b [headerLen]byte
		encodeHeader(b[:], &h)
		f.Add(b[:])
	}
	f.Add(make([]byte, headerLen))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := decodeHeader(b)
		if err != nil {
			require.ErrorIs(t, err, ErrProtocol)
			return
		}
		var again [headerLen]byte
		encodeHeader(again[:], &h)
		require.Equal(t, b[:headerLen], again[:], "accepted a non-canonical header")
		if h.typ.isData() {
			require.LessOrEqual(t, h.length, uint32(MaxMessageSize))
			require.GreaterOrEqual(t, h.raddr+uint64(h.length), h.raddr)
		} else {
			require.Zero(t, h.length)
		}
		require.Equal(t, uint16(frameMagic), binary.BigEndian.Uint16(b))
	})
}
