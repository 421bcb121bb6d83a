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
//   - the request ring, written by s as requester: one descriptor per
//     request that needs the responder (WRITE_WITH_IMM, or one chunk of a
//     SEND), and the sequence number of the last one published;
//   - the claim word of s's requests: the last one the responder took, and
//     whether s cancelled the rest (see take and cancel);
//   - the acknowledgement of s's requests, written by the peer: the last
//     sequence number answered with its status in one word, a progress
//     counter the responder bumps while it retries a receiver-not-ready
//     request, and the sequence number of the request it is retrying so;
//   - the number of receives s has posted, written by s as responder: the
//     peer's requester counts the receives its requests will consume
//     against it, and pipelines a WRITE_WITH_IMM only when a receive is
//     sure to be there (see request.go);
//   - an "attached" flag that s raises when its QP uses the segment;
//   - s's staging area, into which s copies SEND payload for the peer.
//
// Every field lives on its own cache line with a single writer (the claim
// word excepted, which both change by compare-and-swap), and sequence
// numbers are published last with atomic stores, so a reader that sees a
// sequence number sees the descriptor and every byte written before it,
// including the bytes of earlier WRITEs. The ring holds ringSlots
// descriptors: a requester publishes request seq only once request
// seq-ringSlots is acknowledged, so a slot is never rewritten while the
// responder may read it, and the segment's size is fixed.
const (
	pairMagic   = 0x52494150 // "PAIR"
	pairVersion = 2
	stagingSize = 128 << 10
	ringSlots   = 256
	descSize    = 32
	ringBase    = 2048
	pairHeader  = 20 << 10 // ringBase + 2 rings, rounded up to a page
	pairSize    = pairHeader + 2*stagingSize

	sideBlock = 512 // bytes per side, from sideBase

	sideBase       = 64
	offBellSeq     = 0   // u32
	offBellFlag    = 64  // u32: the engine sleeps
	offReqSeq      = 128 // u32: last request published
	offClaim       = 192 // u64: last taken << 32 | claimCancelled
	offAck         = 256 // u64: last answered << 32 | status
	offProgress    = 264 // u32
	offRNRSeq      = 268 // u32
	offRecvsPosted = 320 // u32: receives this side has posted
	offAttached    = 384 // u32
)

// claimCancelled, set in a claim word, says the requester withdrew every
// request after the last one taken. The responder takes each request, by
// a compare-and-swap that advances the last taken one, just before it
// acts on it (consumes a receive); a requester that gives up (a flush, a
// timeout) sets the flag. Whoever changes the word first wins, so a
// request flushed at the requester is never executed later by the
// responder.
const claimCancelled = 1

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

// descAt is the first word of ring slot seq of side.
func (p pairView) descAt(side int, seq uint32, field int) *uint32 {
	return word(p.b, ringBase+side*ringSlots*descSize+int(seq%ringSlots)*descSize+4*field)
}

// postRequest publishes d as request seq of this side.
func (p pairView) postRequest(seq uint32, d desc) {
	s := p.side
	atomic.StoreUint32(p.descAt(s, seq, 0), d.op)
	atomic.StoreUint32(p.descAt(s, seq, 1), d.imm)
	atomic.StoreUint32(p.descAt(s, seq, 2), d.len)
	atomic.StoreUint32(p.descAt(s, seq, 3), d.total)
	atomic.StoreUint32(p.descAt(s, seq, 4), d.off)
	atomic.StoreUint32(p.at(s, offReqSeq), seq)
}

// peerRequestSeq is the sequence number of the peer's last request.
func (p pairView) peerRequestSeq() uint32 { return atomic.LoadUint32(p.at(1-p.side, offReqSeq)) }

// peerRequest reads the descriptor of the peer's request seq, which the
// caller knows to be published and not yet answered.
func (p pairView) peerRequest(seq uint32) desc {
	s := 1 - p.side
	return desc{
		op:    atomic.LoadUint32(p.descAt(s, seq, 0)),
		imm:   atomic.LoadUint32(p.descAt(s, seq, 1)),
		len:   atomic.LoadUint32(p.descAt(s, seq, 2)),
		total: atomic.LoadUint32(p.descAt(s, seq, 3)),
		off:   atomic.LoadUint32(p.descAt(s, seq, 4)),
	}
}

func (p pairView) claim(side int) *uint64 {
	return dword(p.b, sideBase+side*sideBlock+offClaim)
}

// take claims the peer's request seq, the one after the last taken, for
// execution; it fails if the requester cancelled it.
func (p pairView) take(seq uint32) bool {
	return atomic.CompareAndSwapUint64(p.claim(1-p.side), uint64(seq-1)<<32, uint64(seq)<<32)
}

// cancel withdraws this side's requests that the responder has not taken.
func (p pairView) cancel() {
	c := p.claim(p.side)
	for {
		w := atomic.LoadUint64(c)
		if w&claimCancelled != 0 || atomic.CompareAndSwapUint64(c, w, w|claimCancelled) {
			return
		}
	}
}

// ack acknowledges the peer's requests up to seq, the last with status.
func (p pairView) ack(seq, status uint32) {
	atomic.StoreUint64(dword(p.b, sideBase+(1-p.side)*sideBlock+offAck), uint64(seq)<<32|uint64(status))
}

// bumpProgress tells the peer its request is still being worked on.
func (p pairView) bumpProgress() { atomic.AddUint32(p.at(1-p.side, offProgress), 1) }

// notReady tells the peer that its request seq found no receive and is
// being retried.
func (p pairView) notReady(seq uint32) { atomic.StoreUint32(p.at(1-p.side, offRNRSeq), seq) }

// retriedRNR is the sequence number of this side's request the responder
// last retried for want of a receive.
func (p pairView) retriedRNR() uint32 { return atomic.LoadUint32(p.at(p.side, offRNRSeq)) }

// acked returns the last acknowledged sequence number of this side's
// requests and the status it was answered with.
func (p pairView) acked() (seq, status uint32) {
	w := atomic.LoadUint64(dword(p.b, sideBase+p.side*sideBlock+offAck))
	return uint32(w >> 32), uint32(w)
}

// progress returns the responder's progress counter.
func (p pairView) progress() uint32 { return atomic.LoadUint32(p.at(p.side, offProgress)) }

// setRecvsPosted publishes how many receives this side has posted.
func (p pairView) setRecvsPosted(n uint32) { atomic.StoreUint32(p.at(p.side, offRecvsPosted), n) }

// peerRecvsPosted is how many receives the peer has posted.
func (p pairView) peerRecvsPosted() uint32 { return atomic.LoadUint32(p.at(1-p.side, offRecvsPosted)) }

// attach marks this side as using the segment.
func (p pairView) attach() { atomic.StoreUint32(p.at(p.side, offAttached), 1) }

// peerAttached reports whether the peer uses the segment.
func (p pairView) peerAttached() bool { return atomic.LoadUint32(p.at(1-p.side, offAttached)) != 0 }

// seqLE reports whether sequence number a is at or before b, modulo 2^32.
func seqLE(a, b uint32) bool { return int32(b-a) >= 0 }
