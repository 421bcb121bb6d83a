package comm

// Matching. Every message names its channel (the communicator's context id
// and the channel kind) and a tag. A channel of a peer holds the receives
// posted for it that no message has taken yet, and the messages arrived
// that no receive has taken yet, each in arrival order. On the user
// channel a message goes to the oldest receive with its tag or AnyTag,
// or to an older receive from AnySource (which waits in a queue of its
// communicator, wildcard.go); on the ordered and internal channels to the
// oldest receive, whatever its tag, and a tag that differs is a mismatch.

// chanKey names a channel: a communicator's context id and a kind.
type chanKey struct {
	ctx  uint64
	kind uint8
}

// channel is one channel's queues at one peer.
type channel struct {
	postedHead, postedTail *Handle
	unexpHead, unexpTail   *inMsg
}

// kindLocal marks a message a rank sent to itself: it is the sender's
// handle, copied from when a receive takes it.
const kindLocal msgKind = 0xFF

// inMsg is a message that arrived before its receive.
type inMsg struct {
	next  *inMsg
	kind  msgKind // kindEager, kindRTS or kindLocal
	tag   uint64
	id    uint64
	n     int
	reg   bool   // the sender's memory is registered
	data  []byte // an eager message's copy, from the peer's free list
	local *Handle
}

func (p *peer) channelLocked(k chanKey) *channel {
	ch := p.chans[k]
	if ch == nil {
		ch = &channel{}
		p.chans[k] = ch
	}
	return ch
}

func (ch *channel) pushPosted(h *Handle) {
	h.next = nil
	if ch.postedTail == nil {
		ch.postedHead = h
	} else {
		ch.postedTail.next = h
	}
	ch.postedTail = h
}

// firstPosted returns the oldest receive a message with tag goes to, and
// the receive before it in the queue, dropping receives given up on the
// way; it leaves the receive in the queue.
func (ch *channel) firstPosted(tag uint64, ordered bool) (h, prev *Handle) {
	for h = ch.postedHead; h != nil; {
		next := h.next
		if h.done() || h.abandoned {
			ch.unlinkPosted(h, prev)
		} else if ordered || tagMatches(h.tag, tag) {
			return h, prev
		} else {
			prev = h
		}
		h = next
	}
	return nil, nil
}

// unlinkPosted removes h, which follows prev, from the queue.
func (ch *channel) unlinkPosted(h, prev *Handle) {
	if prev == nil {
		ch.postedHead = h.next
	} else {
		prev.next = h.next
	}
	if ch.postedTail == h {
		ch.postedTail = prev
	}
	h.next = nil
}

// tagMatches reports whether a receive for tag want takes a message with
// tag got on the user channel.
func tagMatches(want, got uint64) bool { return want == got || want == AnyTag }

func (ch *channel) pushUnexp(m *inMsg) {
	m.next = nil
	if ch.unexpTail == nil {
		ch.unexpHead = m
	} else {
		ch.unexpTail.next = m
	}
	ch.unexpTail = m
}

// takeUnexp removes and returns the message a receive with tag takes.
// Messages a rank sent itself and then gave up are dropped on the way.
func (p *peer) takeUnexp(ch *channel, tag uint64, ordered bool) *inMsg {
	var prev *inMsg
	for m := ch.unexpHead; m != nil; {
		next := m.next
		stale := m.kind == kindLocal && (m.local.done() || m.local.abandoned)
		if stale || ordered || tagMatches(tag, m.tag) {
			if prev == nil {
				ch.unexpHead = next
			} else {
				prev.next = next
			}
			if ch.unexpTail == m {
				ch.unexpTail = prev
			}
			m.next = nil
			if !stale {
				return m
			}
			p.freeMsgLocked(m)
		} else {
			prev = m
		}
		m = next
	}
	return nil
}

func (p *peer) newMsgLocked() *inMsg {
	m := p.freeMsgs
	if m == nil {
		return &inMsg{}
	}
	p.freeMsgs = m.next
	m.next = nil
	return m
}

// freeMsgLocked recycles m; an eager copy goes back to the free list and
// its credit back to the peer.
func (p *peer) freeMsgLocked(m *inMsg) {
	if m.data != nil {
		p.freeBufs = append(p.freeBufs, m.data[:0])
	}
	*m = inMsg{next: p.freeMsgs}
	p.freeMsgs = m
}

// eagerBufLocked returns a buffer for an unexpected eager message. There
// are at most eagerCredits of them per peer.
func (p *peer) eagerBufLocked(n int) []byte {
	if k := len(p.freeBufs); k > 0 {
		b := p.freeBufs[k-1]
		p.freeBufs = p.freeBufs[:k-1]
		return b[:n]
	}
	return make([]byte, n, eagerMax)
}

// incomingLocked handles an EAGER or RTS message: it goes to its receive
// if one is posted, or waits in its channel. payload is an eager
// message's bytes in the control slot, valid only during the call.
func (p *peer) incomingLocked(h *header, payload []byte) {
	m := p.newMsgLocked()
	m.kind, m.tag, m.id, m.n = h.kind, h.tag, h.id, int(h.length)
	m.reg = h.flags&flagRegistered != 0
	if m.kind == kindRTS {
		p.startBulkLocked() // its bytes come over the bulk stream
	}
	if _, closed := p.w.closedCtx.Load(h.ctx); closed {
		p.refuseLocked(m, nil)
		p.freeMsgLocked(m)
		return
	}
	k := chanKey{h.ctx, h.chKind}
	ch := p.channelLocked(k)
	if r := p.matchLocked(k, ch, h.tag); r != nil {
		p.deliverLocked(r, m, payload)
		p.freeMsgLocked(m)
		return
	}
	if m.kind == kindEager {
		m.data = p.eagerBufLocked(len(payload))
		copy(m.data, payload)
	}
	p.pushUnexpLocked(k, ch, m)
}

// matchLocked removes and returns the receive a message arriving on
// channel k with tag goes to: the oldest receive posted for it at this
// peer, unless a receive from any rank that it fits was posted before
// that one (wildcard.go).
func (p *peer) matchLocked(k chanKey, ch *channel, tag uint64) *Handle {
	ordered := k.kind != chanUser
	r, prev := ch.firstPosted(tag, ordered)
	if !ordered && p.w.wild.active.Load() > 0 {
		if a := p.w.wild.claimLocked(p, k.ctx, tag, r); a != nil {
			return a
		}
	}
	if r != nil {
		ch.unlinkPosted(r, prev)
	}
	return r
}

// pushUnexpLocked queues a message no receive took yet, and wakes the
// probes waiting for one on the user channel.
func (p *peer) pushUnexpLocked(k chanKey, ch *channel, m *inMsg) {
	ch.pushUnexp(m)
	if k.kind == chanUser && p.w.wild.active.Load() > 0 {
		p.w.wild.arrived(k.ctx)
	}
}

// deliverLocked gives message m to receive r. For an eager message
// arriving now, payload holds its bytes; otherwise they are in m.
func (p *peer) deliverLocked(r *Handle, m *inMsg, payload []byte) {
	if m.kind == kindEager {
		if m.data != nil {
			payload = m.data
		}
		if !p.self {
			p.owed++ // its slot or copy is free once this returns
		}
	}
	r.gotTag = m.tag
	if r.chKind != chanUser && m.tag != r.tag {
		mis := &MismatchError{Rank: r.c.rank, Peer: r.peerCR, Want: r.tag, Got: m.tag}
		switch m.kind {
		case kindRTS:
			p.queueNackLocked(m.id, reasonMismatch, r.tag)
		case kindLocal:
			m.local.finishLocked(0, mis)
		}
		r.finishLocked(0, mis)
		return
	}
	if m.n > len(r.buf) {
		trunc := &TruncateError{Rank: r.c.rank, Peer: r.peerCR, Tag: m.tag, Len: m.n, Cap: len(r.buf)}
		switch m.kind {
		case kindRTS:
			p.queueNackLocked(m.id, reasonTruncate, uint64(len(r.buf)))
		case kindLocal:
			m.local.finishLocked(0, trunc)
		}
		r.finishLocked(0, trunc)
		return
	}
	switch m.kind {
	case kindEager:
		copy(r.buf, payload)
		r.finishLocked(m.n, nil)
	case kindLocal:
		copy(r.buf, m.local.buf)
		m.local.finishLocked(m.n, nil)
		r.finishLocked(m.n, nil)
	case kindRTS:
		r.id, r.total = m.id, m.n
		r.zero = r.reg != nil && m.reg
		p.rxWait = append(p.rxWait, r)
	}
}

// postRecvLocked matches a new receive against the messages waiting in
// its channel, or queues it.
func (p *peer) postRecvLocked(r *Handle) {
	p.linkLive(r)
	ch := p.channelLocked(chanKey{r.ctx, r.chKind})
	if m := p.takeUnexp(ch, r.tag, r.chKind != chanUser); m != nil {
		p.deliverLocked(r, m, nil)
		p.freeMsgLocked(m)
		p.progressLocked()
		return
	}
	ch.pushPosted(r)
}

// postSendLocked starts a send: eager when it is small and credits allow,
// else announced with an RTS. A send to this rank itself waits in the
// channel as a message until a receive copies it.
func (p *peer) postSendLocked(s *Handle) {
	p.linkLive(s)
	s.total = len(s.buf)
	if p.self {
		p.sendSelfLocked(s)
		return
	}
	p.nextID++
	s.id = p.nextID
	h := header{chKind: s.chKind, ctx: s.ctx, tag: s.tag, id: s.id, length: uint64(len(s.buf))}
	if len(s.buf) <= eagerMax && p.credits > 0 {
		p.credits--
		h.kind = kindEager
		p.pend.push(ctlItem{h: h, payload: s.buf, handle: s})
	} else {
		h.kind = kindRTS
		if s.reg != nil {
			h.flags |= flagRegistered
		}
		p.startBulkLocked() // the receiver's CTSs will ask for its bytes there
		p.tx[s.id] = s
		p.pend.push(ctlItem{h: h, handle: s})
	}
	p.progressLocked()
}

// takeArrivedLocked completes receive r from a message that arrived
// before the peer left, if one is waiting whole in r's channel: what a
// rank sent before closing is still received.
func (p *peer) takeArrivedLocked(r *Handle) bool {
	ch := p.chans[chanKey{r.ctx, r.chKind}]
	if ch == nil {
		return false
	}
	m := p.takeUnexp(ch, r.tag, r.chKind != chanUser)
	if m == nil {
		return false
	}
	if m.kind == kindRTS {
		// Its bytes can no longer be asked for.
		p.freeMsgLocked(m)
		return false
	}
	p.linkLive(r)
	p.deliverLocked(r, m, nil)
	p.freeMsgLocked(m)
	return true
}

// sendSelfLocked sends a message to this rank itself. A small one is
// copied and complete at once, as an eager message to a peer would be; a
// larger one waits as the sender's own buffer until a receive copies it.
func (p *peer) sendSelfLocked(s *Handle) {
	k := chanKey{s.ctx, s.chKind}
	ch := p.channelLocked(k)
	m := p.newMsgLocked()
	m.tag, m.n = s.tag, len(s.buf)
	if r := p.matchLocked(k, ch, s.tag); r != nil {
		m.kind, m.local = kindLocal, s
		p.deliverLocked(r, m, nil)
		p.freeMsgLocked(m)
		return
	}
	if len(s.buf) <= eagerMax {
		m.kind = kindEager
		m.data = p.eagerBufLocked(len(s.buf))
		copy(m.data, s.buf)
		s.finishLocked(len(s.buf), nil)
	} else {
		m.kind, m.local = kindLocal, s
	}
	p.pushUnexpLocked(k, ch, m)
}

// dropChannelLocked forgets the messages waiting in a channel of a closed
// communicator: eager ones give their credit back, and the senders of
// announced ones are told that no receive will come.
func (p *peer) dropChannelLocked(k chanKey, err error) {
	ch := p.chans[k]
	if ch == nil {
		return
	}
	delete(p.chans, k)
	for m := ch.unexpHead; m != nil; {
		next := m.next
		p.refuseLocked(m, err)
		p.freeMsgLocked(m)
		m = next
	}
}

// refuseLocked turns away a message no receive will take.
func (p *peer) refuseLocked(m *inMsg, err error) {
	switch m.kind {
	case kindEager:
		if !p.self {
			p.owed++
		}
	case kindRTS:
		p.queueNackLocked(m.id, reasonGone, 0)
	case kindLocal:
		m.local.cancelLocked(err)
	}
}
