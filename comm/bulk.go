package comm

import (
	"fmt"
)

// The bulk stream: the receiver of a message announced by RTS posts a
// receive for a chunk and asks for it with a CTS; the sender answers CTSs
// in the order they arrive, each with one send. Both ends therefore post
// the stream's ranges in the same order.

// askLocked posts receives for the chunks of matched messages and queues
// their CTSs, as far as ranges, chunk depth and staging buffers allow.
func (p *peer) askLocked() {
	kept := p.rxWait[:0]
	for _, h := range p.rxWait {
		if h.abandoned {
			if !h.asked {
				// The sender waits for CTSs that will not come. A
				// receive given up before it asked for anything is
				// done already, and owes the NACK all the same.
				p.queueNackLocked(h.id, reasonGone, 0)
				h.asked = true
			}
			h.settleLocked()
			continue
		}
		if h.done() {
			continue
		}
		for !h.asked && p.brecvF.len() < maxBulkRanges && !p.down {
			if !p.askChunkLocked(h) {
				break
			}
		}
		if !h.asked && !h.done() {
			kept = append(kept, h)
		}
	}
	clear(p.rxWait[len(kept):])
	p.rxWait = kept
}

// askChunkLocked asks for h's next chunk; false means it has to wait.
func (p *peer) askChunkLocked(h *Handle) bool {
	if p.bulk == nil {
		return false // dialing: the RTS that matched h started it
	}
	n := h.total - h.issued
	if !h.zero {
		if h.inflight >= maxChunkDepth {
			return false
		}
		n = min(n, stageChunk)
	}
	stage := -1
	var addr uint64
	var rkey uint32
	if h.reg != nil {
		addr = h.reg.addr + uint64(h.regOff+h.issued)
		rkey = h.reg.mrs[p.dev].RKey()
	} else {
		i, ok, err := p.w.recvStage.get(p)
		if err != nil {
			h.cancelLocked(err)
			return false
		}
		if !ok {
			return false
		}
		stage, addr, rkey = i, p.w.recvStage.addr(i), p.w.recvStage.reg.mrs[p.dev].RKey()
	}
	o, err := p.bulk.recvAt(addr, rkey, int64(n))
	if err != nil {
		p.w.recvStage.put(stage)
		p.linkFailedLocked(fmt.Errorf("bulk stream: %w", err))
		return false
	}
	p.brecvF.push(bulkXfer{op: o, h: h, off: h.issued, n: n, stage: stage})
	p.queueCTSLocked(h.id, h.issued, n)
	h.issued += n
	h.inflight++
	if h.issued == h.total {
		h.asked = true
	}
	return true
}

// bulkReceivedLocked handles the oldest bulk receive once it completed.
func (p *peer) bulkReceivedLocked() {
	x := p.brecvF.pop()
	_, n, err := x.op.Test()
	if err != nil {
		p.w.recvStage.put(x.stage)
		x.h.inflight--
		p.linkFailedLocked(fmt.Errorf("bulk stream: %w", err))
		return
	}
	h := x.h
	h.inflight--
	switch {
	case n != x.n:
		// The sender gave the message up and answered with nothing.
		h.cancelLocked(fmt.Errorf("comm: rank %d: receive from rank %d with tag %#x: got %d of %d bytes: %w",
			h.c.rank, h.peerCR, h.tag, h.moved, h.total, ErrCancelled))
	case x.stage >= 0 && !h.abandoned:
		copy(h.buf[x.off:x.off+n], p.w.recvStage.buf(x.stage))
	}
	p.w.recvStage.put(x.stage)
	h.moved += n
	h.chunks++
	if h.settleLocked() {
		return
	}
	if h.asked && h.inflight == 0 {
		h.finishLocked(h.total, nil)
	}
}

// postBulkSendsLocked answers CTSs in order, as far as ranges and staging
// buffers allow.
func (p *peer) postBulkSendsLocked() {
	if p.bulk == nil {
		return // dialing: the RTS these answers are for started it
	}
	for p.bsendQ.len() > 0 && p.bsendF.len() < maxBulkRanges && !p.down {
		x := p.bsendQ.front()
		h := x.h
		if h != nil && (h.abandoned || h.done()) {
			h = nil
		}
		stage, n := -1, x.n
		var addr uint64
		var lkey uint32
		switch {
		case h == nil:
			// The stream must stay in step: answer with nothing.
			addr, lkey, n = p.slots.addr, p.slotLKey, 0
		case h.reg != nil:
			addr = h.reg.addr + uint64(h.regOff+x.off)
			lkey = h.reg.mrs[p.dev].LKey()
		default:
			i, ok, err := p.w.sendStage.get(p)
			if err != nil {
				h.cancelLocked(err)
				continue
			}
			if !ok {
				return
			}
			copy(p.w.sendStage.buf(i), h.buf[x.off:x.off+n])
			stage, addr, lkey = i, p.w.sendStage.addr(i), p.w.sendStage.reg.mrs[p.dev].LKey()
		}
		o, err := p.bulk.sendAt(addr, lkey, int64(n))
		if err != nil {
			p.w.sendStage.put(stage)
			p.linkFailedLocked(fmt.Errorf("bulk stream: %w", err))
			return
		}
		y := p.bsendQ.pop()
		y.op, y.h, y.n, y.stage = o, h, n, stage
		if h != nil {
			h.inflight++
		}
		p.bsendF.push(y)
	}
}

// bulkSentLocked handles the oldest bulk send once it completed.
func (p *peer) bulkSentLocked() {
	x := p.bsendF.pop()
	_, _, err := x.op.Test()
	p.w.sendStage.put(x.stage)
	h := x.h
	if h != nil {
		h.inflight--
	}
	if err != nil {
		p.linkFailedLocked(fmt.Errorf("bulk stream: %w", err))
		return
	}
	if h == nil {
		return
	}
	h.moved += x.n
	h.chunks++
	if h.settleLocked() {
		return
	}
	if h.moved == h.total {
		h.finishLocked(h.total, nil)
	}
}
