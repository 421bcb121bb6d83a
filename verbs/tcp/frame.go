package tcp

import (
	"encoding/binary"
	"fmt"

	"github.com/rdmacell/rdmacell/verbs"
)

// Frame layout. Every frame starts with a fixed header of headerLen bytes,
// big-endian:
//
//	off size field
//	 0   2   magic (frameMagic)
//	 2   1   version (frameVersion)
//	 3   1   type (frameType)
//	 4   1   flags (flagAckReq, flagAckLazy; the other bits are reserved and zero)
//	 5   1   status (NAK only: the verbs.Status the requester reports)
//	 6   2   reserved, zero
//	 8   4   psn
//	12   4   rkey (WRITE, WRITE_WITH_IMM)
//	16   8   remote address (WRITE, WRITE_WITH_IMM)
//	24   4   payload length (data frames; at most MaxMessageSize)
//	28   4   immediate (WRITE_WITH_IMM)
//
// Data frames (WRITE, WRITE_WITH_IMM, SEND) are followed by length bytes of
// payload. Control frames (ACK, NAK, RNR, BYE) carry none, and every field
// they do not use must be zero (BYE uses none, not even psn): a strict
// decoder leaves a hostile peer less room.
const (
	headerLen    = 32
	frameMagic   = 0x5243 // "RC"
	frameVersion = 1
)

// MaxMessageSize is the largest payload of one work request. A larger
// request completes with verbs.StatusLocalLength; a frame announcing a
// larger payload is a protocol violation.
const MaxMessageSize = 1 << 30

type frameType uint8

const (
	frameWrite    frameType = 1 // requester → responder: place payload at raddr under rkey
	frameWriteImm frameType = 2 // as frameWrite, then complete a posted receive with imm
	frameSend     frameType = 3 // requester → responder: scatter payload into a posted receive
	frameAck      frameType = 4 // responder → requester: every psn up to and including psn is placed
	frameNak      frameType = 5 // responder → requester: psn failed with status; earlier ones are placed
	frameRNR      frameType = 6 // responder → requester: psn waits for a receive; the responder is alive
	frameBye      frameType = 7 // either side: the QP leaves the connection in order (reset or destroyed); nothing follows
)

func (t frameType) isData() bool { return t >= frameWrite && t <= frameSend }

// Acknowledgement requests. Acknowledgements are cumulative, so the
// requester asks for few: flagAckReq (soon) on signaled requests, whose
// completion waits for it, and on the last frame of a batch when its send
// queue is half full; flagAckLazy on the last frame of other batches, which
// the responder acknowledges with the next frame it writes anyway, or after
// lazyDelay. How soon the responder answers flagAckReq is its own choice
// (see ack.go); a request-response exchange carries its acknowledgement
// in the response's system call.
const (
	flagAckReq  = 1 << 0
	flagAckLazy = 1 << 1
)

// header is a decoded frame header.
type header struct {
	typ    frameType
	flags  uint8
	status verbs.Status
	psn    uint32
	rkey   uint32
	raddr  uint64
	length uint32
	imm    uint32
}

// encodeHeader writes h into b, which must hold headerLen bytes.
func encodeHeader(b []byte, h *header) {
	_ = b[headerLen-1]
	binary.BigEndian.PutUint16(b[0:], frameMagic)
	b[2] = frameVersion
	b[3] = byte(h.typ)
	b[4] = h.flags
	b[5] = byte(h.status)
	binary.BigEndian.PutUint16(b[6:], 0)
	binary.BigEndian.PutUint32(b[8:], h.psn)
	binary.BigEndian.PutUint32(b[12:], h.rkey)
	binary.BigEndian.PutUint64(b[16:], h.raddr)
	binary.BigEndian.PutUint32(b[24:], h.length)
	binary.BigEndian.PutUint32(b[28:], h.imm)
}

// decodeHeader parses and validates the header at the start of b. It is a
// pure function: anything it returns without error is a header the
// receiver can act on without further syntax checks (the semantic checks,
// psn order and memory access, are the caller's). Errors wrap ErrProtocol.
func decodeHeader(b []byte) (header, error) {
	var h header
	if len(b) < headerLen {
		return h, fmt.Errorf("%w: header of %d bytes, want %d", ErrProtocol, len(b), headerLen)
	}
	if m := binary.BigEndian.Uint16(b[0:]); m != frameMagic {
		return h, fmt.Errorf("%w: bad magic %#04x", ErrProtocol, m)
	}
	if b[2] != frameVersion {
		return h, fmt.Errorf("%w: version %d, want %d", ErrProtocol, b[2], frameVersion)
	}
	if r := binary.BigEndian.Uint16(b[6:]); r != 0 {
		return h, fmt.Errorf("%w: reserved header bits %#04x set", ErrProtocol, r)
	}
	h = header{
		typ:    frameType(b[3]),
		flags:  b[4],
		status: verbs.Status(b[5]),
		psn:    binary.BigEndian.Uint32(b[8:]),
		rkey:   binary.BigEndian.Uint32(b[12:]),
		raddr:  binary.BigEndian.Uint64(b[16:]),
		length: binary.BigEndian.Uint32(b[24:]),
		imm:    binary.BigEndian.Uint32(b[28:]),
	}
	switch h.typ {
	case frameWrite, frameWriteImm, frameSend:
		if h.flags&^(flagAckReq|flagAckLazy) != 0 {
			return h, fmt.Errorf("%w: %s frame with reserved flags %#02x", ErrProtocol, h.typ, h.flags)
		}
		if h.status != 0 {
			return h, fmt.Errorf("%w: %s frame with status %d", ErrProtocol, h.typ, h.status)
		}
		if h.length > MaxMessageSize {
			return h, fmt.Errorf("%w: %s frame of %d bytes exceeds the %d byte maximum", ErrProtocol, h.typ, h.length, MaxMessageSize)
		}
		if h.typ == frameSend && (h.rkey != 0 || h.raddr != 0) {
			return h, fmt.Errorf("%w: SEND frame with remote address", ErrProtocol)
		}
		if h.typ != frameWriteImm && h.imm != 0 {
			return h, fmt.Errorf("%w: %s frame with immediate data", ErrProtocol, h.typ)
		}
		if h.raddr+uint64(h.length) < h.raddr {
			return h, fmt.Errorf("%w: %s frame range %#x+%d wraps", ErrProtocol, h.typ, h.raddr, h.length)
		}
	case frameAck, frameNak, frameRNR, frameBye:
		if h.flags != 0 || h.rkey != 0 || h.raddr != 0 || h.length != 0 || h.imm != 0 {
			return h, fmt.Errorf("%w: %s frame with data fields set", ErrProtocol, h.typ)
		}
		if h.typ == frameBye && h.psn != 0 {
			return h, fmt.Errorf("%w: BYE frame with psn %d", ErrProtocol, h.psn)
		}
		if h.typ == frameNak {
			switch h.status {
			case verbs.StatusRemoteAccess, verbs.StatusRemoteInvalidRequest, verbs.StatusRNRRetryExceeded:
			default:
				return h, fmt.Errorf("%w: NAK with status %d", ErrProtocol, h.status)
			}
		} else if h.status != 0 {
			return h, fmt.Errorf("%w: %s frame with status %d", ErrProtocol, h.typ, h.status)
		}
	default:
		return h, fmt.Errorf("%w: unknown frame type %d", ErrProtocol, h.typ)
	}
	return h, nil
}

var frameNames = [...]string{"INVALID", "WRITE", "WRITE_WITH_IMM", "SEND", "ACK", "NAK", "RNR", "BYE"}

func (t frameType) String() string {
	if int(t) < len(frameNames) {
		return frameNames[t]
	}
	return fmt.Sprintf("frame(%d)", uint8(t))
}
