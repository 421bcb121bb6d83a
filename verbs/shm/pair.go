package shm

import (
	"sync/atomic"
)

// A pair segment joins two connected QPs. The QP that dials creates it and
// is side 0, the QP it connects to is side 1. For each side s it holds:
//
//   - the doorbell of side s's engine (a futex word and a sleeping flag),
//     rung by the peer after each request or acknowledgement it writes for
//     s, and by local code after a post;
//   - the request slot, written by s as requester: a sequence number and
//     the descriptor of the last request that needs the responder
//     (WRITE_WITH_IMM, or one chunk of a SEND);
//   - the acknowledgement slot for s's requests, written by the peer: the
//     sequence number acknowledged, its status, a progress counter the
//     responder bumps while it retries a receiver-not-ready request, and
//     the sequence number of the request it is retrying so;
//   - an "attached" flag that s raises when its QP uses the segment;
//   - s's staging area, into which s copies SEND payload for the peer.
//
// Every field lives on its own cache line with a single writer, and
// sequence numbers are published last with atomic stores, so a reader
// that sees a sequence number sees the descriptor and every byte written
// before it, including the bytes of earlier WRITEs. Requests are executed
// in order and one at a time needs the responder, so one slot per
// direction is enough.
const (
	pairMagic   = 0x52494150 // "PAIR"
	pairVersion = 1
	stagingSize = 128 << 10
	pairHeader  = 4096
	pairSize    = pairHeader + 2*stagingSize

	sideBlock = 512 // bytes per side, from sideBase

	sideBase    = 64
	offBellSeq  = 0   // u32
	offBellFlag = 64  // u32: the engine sleeps
	offReqSeq   = 128 // u32, then op, imm, len, total, off
	offClaim    = 152 // u64: seq<<32 | claimOpen, claimTaken or claimCancelled
	offAckSeq   = 256 // u32, then status, progress, RNR seq
	offAttached = 384 // u32
)

// Claim states of a request. The requester opens each request; the
// responder takes it just before it acts on it (consumes a receive), and a
// requester that gives up on it (a flush, a timeout) cancels it. Whoever
// changes it first wins, so a request flushed at the requester is never
// executed later by the responder.
const (
	claimOpen      = 0
	claimTaken     = 1
	claimCancelled = 2
)

// Request descriptor opcodes.
const (
	descImm  = 1
	descSend = 2
)

// pairView is one side's view of a pair segment.
type pairView struct {
	b    []byte
	side int
}

func (p pairView) at(side, off int) *uint32 { return word(p.b, sideBase+side*sideBlock+off) }

func initPair(b []byte) {
	atomic.StoreUint32(word(b, 4), pairVersion)
	atomic.StoreUint32(word(b, 8), stagingSize)
	atomic.StoreUint32(word(b, 0), pairMagic)
}

func pairValid(b []byte) bool {
	return atomic.LoadUint32(word(b, 0)) == pairMagic &&
		atomic.LoadUint32(word(b, 4)) == pairVersion &&
		atomic.LoadUint32(word(b, 8)) == stagingSize
}

// bell returns the doorbell of side's engine.
func (p pairView) bell(side int) bell {
	return bell{seq: p.at(side, offBellSeq), sleeping: p.at(side, offBellFlag)}
}

// staging returns side's staging area.
func (p pairView) staging(side int) []byte {
	o := pairHeader + side*stagingSize
	return p.b[o : o+stagingSize : o+stagingSize]
}

// desc is a request that needs the responder.
type desc struct {
	op, imm, len, total, off uint32
}

// postRequest publishes d as request seq of this side.
func (p pairView) postRequest(seq uint32, d desc) {
	s := p.side
	atomic.StoreUint32(p.at(s, offReqSeq+4), d.op)
	atomic.StoreUint32(p.at(s, offReqSeq+8), d.imm)
	atomic.StoreUint32(p.at(s, offReqSeq+12), d.len)
	atomic.StoreUint32(p.at(s, offReqSeq+16), d.total)
	atomic.StoreUint32(p.at(s, offReqSeq+20), d.off)
	atomic.StoreUint64(p.claim(s), uint64(seq)<<32|claimOpen)
	atomic.StoreUint32(p.at(s, offReqSeq), seq)
}

// peerRequestSeq is the sequence number of the peer's last request.
func (p pairView) peerRequestSeq() uint32 { return atomic.LoadUint32(p.at(1-p.side, offReqSeq)) }

// peerRequest reads the descriptor of the peer's last request.
func (p pairView) peerRequest() desc {
	s := 1 - p.side
	return desc{
		op:    atomic.LoadUint32(p.at(s, offReqSeq+4)),
		imm:   atomic.LoadUint32(p.at(s, offReqSeq+8)),
		len:   atomic.LoadUint32(p.at(s, offReqSeq+12)),
		total: atomic.LoadUint32(p.at(s, offReqSeq+16)),
		off:   atomic.LoadUint32(p.at(s, offReqSeq+20)),
	}
}

func (p pairView) claim(side int) *uint64 {
	return dword(p.b, sideBase+side*sideBlock+offClaim)
}

// take claims the peer's request seq for execution; it fails if the
// requester cancelled it.
func (p pairView) take(seq uint32) bool {
	return atomic.CompareAndSwapUint64(p.claim(1-p.side), uint64(seq)<<32|claimOpen, uint64(seq)<<32|claimTaken)
}

// cancel withdraws this side's request seq unless the responder took it.
func (p pairView) cancel(seq uint32) {
	atomic.CompareAndSwapUint64(p.claim(p.side), uint64(seq)<<32|claimOpen, uint64(seq)<<32|claimCancelled)
}

// ack acknowledges the peer's request seq with status.
func (p pairView) ack(seq, status uint32) {
	s := 1 - p.side
	atomic.StoreUint32(p.at(s, offAckSeq+4), status)
	atomic.StoreUint32(p.at(s, offAckSeq), seq)
}

// bumpProgress tells the peer its request is still being worked on.
func (p pairView) bumpProgress() { atomic.AddUint32(p.at(1-p.side, offAckSeq+8), 1) }

// notReady tells the peer that its request seq found no receive and is
// being retried.
func (p pairView) notReady(seq uint32) { atomic.StoreUint32(p.at(1-p.side, offAckSeq+12), seq) }

// retriedRNR is the sequence number of this side's request the responder
// last retried for want of a receive.
func (p pairView) retriedRNR() uint32 { return atomic.LoadUint32(p.at(p.side, offAckSeq+12)) }

// acked returns the last acknowledged sequence number of this side's
// requests, its status and the responder's progress counter.
func (p pairView) acked() (seq, status, progress uint32) {
	s := p.side
	seq = atomic.LoadUint32(p.at(s, offAckSeq))
	status = atomic.LoadUint32(p.at(s, offAckSeq+4))
	progress = atomic.LoadUint32(p.at(s, offAckSeq+8))
	return seq, status, progress
}

// attach marks this side as using the segment.
func (p pairView) attach() { atomic.StoreUint32(p.at(p.side, offAttached), 1) }

// peerAttached reports whether the peer uses the segment.
func (p pairView) peerAttached() bool { return atomic.LoadUint32(p.at(1-p.side, offAttached)) != 0 }
