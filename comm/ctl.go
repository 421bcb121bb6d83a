package comm

import (
	"fmt"
)

// The control stream: slots of messages, sent in sequence and received
// into ctlSlots receives kept posted, slot s in buffer s mod ctlSlots.

func (p *peer) recvSlot(i int) []byte {
	return p.slots.bytes()[i*slotSize : (i+1)*slotSize]
}

func (p *peer) sendSlot(i int) []byte {
	return p.slots.bytes()[(ctlSlots+i)*slotSize : (ctlSlots+i+1)*slotSize]
}

// postCtlRecvLocked posts the receive of slot sequence seq.
func (p *peer) postCtlRecvLocked(seq uint64) error {
	i := int(seq % ctlSlots)
	o, err := p.ctl.recvAt(p.slots.addr+uint64(i*slotSize), p.slotRKey, slotSize)
	if err != nil {
		return err
	}
	p.rops[i] = o
	return nil
}

// ctlReceivedLocked handles the slot at the head of the stream.
func (p *peer) ctlReceivedLocked() {
	i := int(p.rseq % ctlSlots)
	_, n, err := p.rops[i].Test()
	if err != nil {
		p.linkFailedLocked(fmt.Errorf("control stream: %w", err))
		return
	}
	p.rops[i] = nil
	if err := p.dispatchSlotLocked(p.recvSlot(i)[:n], p.rseq, false); err != nil {
		p.linkFailedLocked(fmt.Errorf("%w: control slot from rank %d: %w", ErrProtocol, p.rank, err))
		return
	}
	p.rseq++
	if p.down {
		return
	}
	if err := p.postCtlRecvLocked(p.rseq + ctlSlots - 1); err != nil {
		p.linkFailedLocked(fmt.Errorf("control stream: %w", err))
	}
}

// dispatchSlotLocked handles every message of slot seq. A salvaged slot
// (read after its link failed) is only searched for goodbyes and aborts.
func (p *peer) dispatchSlotLocked(b []byte, seq uint64, salvage bool) error {
	var r slotReader
	if err := r.open(b, seq); err != nil {
		return err
	}
	if !salvage {
		p.credits += int(r.credits)
	}
	var h header
	for {
		payload, ok, err := r.next(&h)
		if err != nil {
			return err
		}
		if !ok {
			return nil
		}
		if salvage && h.kind != kindBye && h.kind != kindAbort {
			continue
		}
		if err := p.handleLocked(&h, payload); err != nil {
			return err
		}
		if p.down && !salvage {
			return nil
		}
	}
}

func (p *peer) handleLocked(h *header, payload []byte) error {
	switch h.kind {
	case kindHello:
		return p.helloLocked(h, payload)
	case kindEager, kindRTS:
		p.incomingLocked(h, payload)
	case kindCTS:
		return p.ctsLocked(h)
	case kindNack:
		p.nackLocked(h)
	case kindBye:
		p.byeSeen = true
		if p.err == nil {
			p.err = &PeerError{Rank: p.rank, Host: p.host, PID: p.pid, Err: ErrPeerClosed}
			p.failPending = p.err
		}
		p.checkQuietLocked()
	case kindSetup:
		if h.aux == setupConnected {
			// The peer sent its setup before this, and confirms only
			// after it got this end's.
			if p.bulkSetup == nil {
				return fmt.Errorf("a bulk connection confirmed before its setup")
			}
			select {
			case <-p.bulkUpIn:
				return fmt.Errorf("a bulk connection confirmed twice")
			default:
				close(p.bulkUpIn)
			}
			break
		}
		if p.bulkSetup != nil {
			return fmt.Errorf("a second setup of the bulk connection")
		}
		// The peer dials because of an RTS, which it queued before this
		// and this end's dial started on.
		p.bulkSetup = append([]byte(nil), payload...)
		close(p.bulkSetupIn)
	case kindAbort:
		if int(h.aux) != p.rank {
			return fmt.Errorf("abort from rank %d names rank %d", p.rank, h.aux)
		}
		if p.abortPending == nil {
			p.abortPending = &AbortError{Rank: p.rank, Host: p.host, PID: p.pid, Cause: string(payload)}
		}
	}
	return nil
}

// helloLocked checks that the peer is the rank of this job it should be.
func (p *peer) helloLocked(h *header, payload []byte) error {
	w := p.w
	switch {
	case h.tag != protocolVersion:
		return fmt.Errorf("hello: protocol version %d, want %d", h.tag, protocolVersion)
	case int(h.id) != p.rank:
		return fmt.Errorf("hello: the peer says it is rank %d, want rank %d", h.id, p.rank)
	case int(h.length) != w.size:
		return fmt.Errorf("hello: world size %d, want %d", h.length, w.size)
	case string(payload) != w.opts.Job:
		return fmt.Errorf("hello: job %q, want %q", payload, w.opts.Job)
	}
	if !p.helloSeen {
		p.helloSeen = true
	}
	return nil
}

// ctsLocked queues the answer to a CTS: the asked bytes of the message,
// or nothing if the message was given up.
func (p *peer) ctsLocked(h *header) error {
	s := p.tx[h.id]
	if s != nil {
		end := h.off + h.length
		switch {
		case end > uint64(s.total) || end < h.off:
			return fmt.Errorf("cts for bytes %d..%d of a %d-byte message", h.off, end, s.total)
		case s.reg == nil && h.length > stageChunk:
			return fmt.Errorf("cts for %d bytes of unregistered memory, more than a %d-byte chunk", h.length, stageChunk)
		}
		if s.abandoned {
			s = nil
		}
	}
	p.bsendQ.push(bulkXfer{h: s, off: int(h.off), n: int(h.length), stage: -1})
	return nil
}

// nackLocked fails the send the receiver refused.
func (p *peer) nackLocked(h *header) {
	s := p.tx[h.id]
	if s == nil {
		return
	}
	delete(p.tx, h.id)
	var err error
	switch h.reason {
	case reasonTruncate:
		err = &TruncateError{Rank: s.peerCR, Peer: s.c.rank, Tag: s.tag, Len: s.total, Cap: int(h.off)}
	case reasonMismatch:
		err = &MismatchError{Rank: s.peerCR, Peer: s.c.rank, Want: h.off, Got: s.tag}
	default:
		err = fmt.Errorf("comm: rank %d gave up its receive of the message: %w", s.peerCR, ErrCancelled)
	}
	s.cancelLocked(err)
}

func (p *peer) queueNackLocked(id uint64, reason uint8, off uint64) {
	p.pend.push(ctlItem{h: header{kind: kindNack, reason: reason, id: id, off: off}})
}

func (p *peer) queueCTSLocked(id uint64, off, n int) {
	p.pend.push(ctlItem{h: header{kind: kindCTS, id: id, off: uint64(off), length: uint64(n)}})
}

// flushLocked packs waiting control messages into free send slots and
// sends them. It also sends a slot with no message to give back credits
// when many are owed and nothing else is going.
func (p *peer) flushLocked() {
	for (p.pend.len() > 0 || p.owed >= eagerCredits/2) && p.sseq-p.sdone < ctlSlots && !p.down {
		i := int(p.sseq % ctlSlots)
		s := &p.sslots[i]
		p.sw.reset(p.sendSlot(i))
		for p.pend.len() > 0 {
			it := p.pend.front()
			if it.handle != nil && (it.handle.abandoned || it.handle.done()) {
				// Given up before it left: the peer never hears of it.
				if it.h.kind == kindEager {
					p.credits++
				}
				p.pend.pop()
				continue
			}
			if !p.sw.room(len(it.payload)) {
				break
			}
			p.sw.add(&it.h, it.payload)
			switch it.h.kind {
			case kindEager:
				// Its bytes are in the slot now: the send is done,
				// as an MPI eager send is once its buffer is free.
				it.handle.finishLocked(len(it.handle.buf), nil)
			case kindBye:
				p.byeSeq = p.sseq
			case kindAbort:
				p.abortSeq = p.sseq
			}
			p.pend.pop()
		}
		if p.sw.count == 0 && p.owed == 0 {
			return
		}
		n := p.sw.finish(p.sseq, uint32(p.owed))
		p.owed = 0
		o, err := p.ctl.sendAt(p.slots.addr+uint64((ctlSlots+i)*slotSize), p.slotLKey, int64(n))
		if err != nil {
			p.linkFailedLocked(fmt.Errorf("control stream: %w", err))
			return
		}
		s.op = o
		p.sseq++
	}
}

// ctlSentLocked handles the oldest send slot once it has landed: the slot
// is free, and a goodbye or abort in it has landed.
func (p *peer) ctlSentLocked() {
	s := &p.sslots[p.sdone%ctlSlots]
	if _, _, err := s.op.Test(); err != nil {
		p.linkFailedLocked(fmt.Errorf("control stream: %w", err))
		return
	}
	s.op = nil
	if p.byeQueued && p.byeSeq == p.sdone {
		p.byeLanded = true
	}
	if p.abortQueued && p.abortSeq == p.sdone {
		p.abortLanded = true
	}
	p.sdone++
	p.checkQuietLocked()
}

// queueByeLocked queues the goodbye of a closing rank.
func (p *peer) queueByeLocked() {
	if p.byeQueued || p.down {
		return
	}
	p.byeQueued = true
	p.byeSeq = ^uint64(0)
	p.pend.push(ctlItem{h: header{kind: kindBye}})
	p.progressLocked()
}

// queueAbortLocked queues an abort of this rank, with its cause.
func (p *peer) queueAbortLocked(cause []byte) {
	if p.down || p.abortQueued {
		return
	}
	p.abortQueued = true
	p.abortSeq = ^uint64(0)
	p.pend.push(ctlItem{h: header{kind: kindAbort, aux: uint64(p.w.rank)}, payload: cause})
	p.progressLocked()
}

// queueHelloLocked queues this rank's hello.
func (p *peer) queueHelloLocked() {
	w := p.w
	p.pend.push(ctlItem{h: header{kind: kindHello, tag: protocolVersion, id: uint64(w.rank), length: uint64(w.size)},
		payload: []byte(w.opts.Job)})
	p.progressLocked()
}
