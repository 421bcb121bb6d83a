package cell

import "fmt"

type recvState uint8

const (
	recvFree    recvState = iota
	recvGranted           // waiting for its final
	recvHeld              // final in, held while a down path could write
)

// recvRange is a receive range from Recv to its Event.
type recvRange struct {
	RecvRange
	seq   uint32
	state recvState
	hold  uint64 // paths whose reset it waits for
	flen  int64  // length the final or the tail reported
	// tailed: its tail is in, and it ends once every cell up to last has
	// landed. held: a Hold took that back, and it waits for its final.
	tailed, held bool
	last         uint32
}

// receiver is the receiving half of a connection.
type receiver struct {
	ranges []recvRange // slot seq mod MaxRanges
	mask   uint32
	seq    uint32 // sequence number of the next Recv
	oldest uint32 // oldest range without its Event
	// seen is the duplicate filter: slot id mod Window holds the last id
	// that landed there, with bit 32 set. Ids in flight together differ by
	// less than Window, so they never share a slot.
	seen   []uint64
	idMask uint32
	high   uint32 // highest id seen
	// low is the oldest id not seen: every cell before it has landed.
	// The sender's ids in flight lie within Window of it, so the seen
	// filter answers for every id from low on.
	low uint32
	// tails counts the ranges tailed and not held, waiting for low to
	// pass their last cell.
	tails int
	// acks keeps, per hold-ack ring slot, an answer to a hold that found
	// no path up, to write once one is back. An answer lost with its path
	// needs no keeping: the sender sees the path fail too, and asks again.
	acks []ackRec
	// grantPath and ackPath are, per grant and hold-ack ring slot, the
	// path the last record for it went over (see Engine.slotPath).
	grantPath, ackPath []int8
}

type ackRec struct {
	a       HoldAck
	pending bool
}

const seenValid = 1 << 32

func (r *receiver) init(cfg Config) {
	*r = receiver{
		ranges:    reuse(r.ranges, cfg.MaxRanges),
		mask:      uint32(cfg.MaxRanges - 1),
		seen:      reuse(r.seen, cfg.Window),
		idMask:    uint32(cfg.Window - 1),
		high:      cfg.FirstCellID - 1,
		low:       cfg.FirstCellID,
		grantPath: reuse(r.grantPath, cfg.MaxRanges),
		ackPath:   reuse(r.ackPath, cfg.MaxRanges),
		acks:      reuse(r.acks, cfg.MaxRanges),
	}
	for i := range r.grantPath {
		r.grantPath[i], r.ackPath[i] = -1, -1
	}
}

func (r *receiver) at(seq uint32) *recvRange { return &r.ranges[seq&r.mask] }

// Recv offers memory for the peer to write: the engine emits a grant for
// it, and its Event comes once every cell of it has landed (see Tail), or
// after a recovery with the sender's final, once the sender knows every
// byte landed and nothing can write the range any more.
func (e *Engine) Recv(now int64, rr RecvRange) error {
	e.begin(now)
	r := &e.rcv
	if e.err != nil {
		return e.err
	}
	if rr.Len < 0 || rr.Len > 1<<48 {
		return fmt.Errorf("%w: peer %s: receive range tag %d has length %d", ErrInvalid, e.cfg.Peer, rr.Tag, rr.Len)
	}
	if int(r.seq-r.oldest) >= len(r.ranges) {
		return fmt.Errorf("%w: peer %s: %d receive ranges outstanding", ErrBusy, e.cfg.Peer, len(r.ranges))
	}
	x := r.at(r.seq)
	*x = recvRange{RecvRange: rr, seq: r.seq, state: recvGranted}
	r.seq++
	e.writeGrant(x)
	return nil
}

func (e *Engine) writeGrant(x *recvRange) {
	slot := x.seq & e.gmask
	if q := e.slotPath(&e.rcv.grantPath[slot]); q >= 0 {
		e.rd.Grants = append(e.rd.Grants, GrantWrite{Path: q, Slot: int(slot),
			Grant: Grant{Seq: x.seq, Addr: x.Addr, RKey: x.RKey, Len: x.Len}})
	}
}

// reemit writes again the grants still waiting for their final, and the
// answers to holds.
func (r *receiver) reemit(e *Engine) {
	for s := r.oldest; s != r.seq; s++ {
		if x := r.at(s); x.state == recvGranted && !queued(e.rd.Grants, s, func(w *GrantWrite) uint32 { return w.Grant.Seq }) {
			e.writeGrant(x)
		}
	}
	for i := range r.acks {
		if a := &r.acks[i]; a.pending {
			e.writeHoldAck(a.a)
		}
	}
}

func (e *Engine) writeHoldAck(a HoldAck) {
	slot := a.Seq & e.gmask
	q := e.slotPath(&e.rcv.ackPath[slot])
	if q >= 0 {
		e.rd.HoldAcks = append(e.rd.HoldAcks, HoldAckWrite{Path: q, Slot: int(slot), Ack: a})
	}
	e.rcv.acks[slot] = ackRec{a: a, pending: q < 0}
}

// Final feeds a final polled from the final ring. Duplicates and stale
// records are ignored.
//
// The range is handed back at once unless a path of this end is down:
// until that path's old incarnation is gone at both ends (PathQuiet or
// PathReset here), a copy still in flight on it could land in the range,
// so the range stays quarantined. The sender
// sends a final only after the same confirmation at its end; this is the
// receiver's own guard, so that its memory never depends on the other
// end's bookkeeping alone.
func (e *Engine) Final(now int64, f Final) {
	e.begin(now)
	if e.err != nil {
		return
	}
	x := e.rcv.at(f.Seq)
	if x.state != recvGranted || x.seq != f.Seq {
		return
	}
	switch {
	case f.Status == FinalTooLong:
		e.finishRecv(x, fmt.Errorf("%w: %w", ErrRemote, ErrTooLong))
	case f.Status != FinalOK:
		e.finishRecv(x, fmt.Errorf("%w: final status %d", ErrRemote, f.Status))
	case f.Len < 0 || f.Len > x.Len:
		e.finishRecv(x, fmt.Errorf("%w: final reports %d bytes for a range of %d", ErrInvalid, f.Len, x.Len))
	default:
		x.flen = f.Len
		if x.hold = e.downMask(); x.hold == 0 {
			e.finishRecv(x, nil)
		} else {
			x.state = recvHeld
		}
	}
}

// release lifts path q's quarantine from held ranges.
func (r *receiver) release(e *Engine, q int) {
	for s := r.oldest; s != r.seq; s++ {
		if x := r.at(s); x.state == recvHeld {
			if x.hold &^= 1 << q; x.hold == 0 {
				e.finishRecv(x, nil)
			}
		}
	}
}

func (e *Engine) finishRecv(x *recvRange, err error) {
	r := &e.rcv
	if x.tailed && !x.held {
		r.tails--
	}
	x.state = recvFree
	ev := Event{Kind: Received, Tag: x.Tag, Len: x.flen}
	if err != nil {
		ev.Len = 0
		ev.Err = &RangeError{Peer: e.cfg.Peer, Dir: "receive", Tag: x.Tag, Seq: x.seq, Len: x.Len, Err: err}
		e.stats.RangesFailed++
	} else {
		e.stats.RangesReceived++
	}
	e.rd.Events = append(e.rd.Events, ev)
	for r.oldest != r.seq && r.at(r.oldest).state == recvFree {
		r.oldest++
	}
}

// arrived handles a cell's immediate completion on path p, which
// consumed the receive recv: the receive is posted again and the copy
// acknowledged over the same path. That holds on a path this end has
// given up too, as long as its QP is still the incarnation the receive
// was posted in: the peer may have resumed on the new incarnation before
// this end was told the reset is done, and must get its credit and
// token. An arrival on an incarnation that is gone (a copy that landed
// before the QP was reset, its completion read only after) gets neither:
// its QP takes no more requests of that incarnation, and a token posted
// now would go out on the new one, where it would lie in the sender's
// ring until the same cell is sent on the path again, and then
// acknowledge that copy, and every copy posted before it, unlanded. The
// sender has given up, or will give up, the old incarnation's copies and
// sends the cell again.
func (e *Engine) arrived(p *path, recv uint64, id uint32) {
	if p.state == PathDead {
		return
	}
	if recv&wrKindMask == wrKindRecv && recvIncarn(recv) != p.incarn {
		e.stats.StaleArrivals++
		return
	}
	e.repostRecv(p)
	p.alive = e.now
	st := e.rcv.check(id)
	if st == TokenOK && id == e.rcv.low {
		e.rcv.advanceLow(e)
	}
	switch st {
	case TokenDup:
		e.stats.Duplicates++
	case TokenNACK:
		e.stats.NACKsSent++
	}
	e.stats.TokensSent++
	e.rd.Tokens = append(e.rd.Tokens, TokenWrite{Path: p.idx, Slot: TokenSlot(id, e.cfg.Window),
		Token: Token{ID: id, Path: p.idx, Status: st, RxTime: e.now}})
}

// check classifies an arriving id. A sender's ids in flight all lie
// within Window of each other, and the highest id seen is one of them or
// older, so an id further than Window from it cannot be a cell of this
// connection.
func (r *receiver) check(id uint32) TokenStatus {
	d := seqDiff(id, r.high)
	w := int32(len(r.seen))
	if d > w || d <= -w {
		return TokenNACK
	}
	slot := &r.seen[id&r.idMask]
	if *slot == uint64(id)|seenValid {
		return TokenDup
	}
	*slot = uint64(id) | seenValid
	if d > 0 {
		r.high = id
	}
	return TokenOK
}

// advanceLow moves low past the ids seen and completes the tailed ranges
// whose cells have all landed.
func (r *receiver) advanceLow(e *Engine) {
	for r.seen[r.low&r.idMask] == uint64(r.low)|seenValid {
		r.low++
	}
	r.finishTailed(e)
}

func (r *receiver) finishTailed(e *Engine) {
	for s := r.oldest; r.tails > 0 && s != r.seq; s++ {
		if x := r.at(s); x.state == recvGranted && x.tailed && !x.held && seqBefore(x.last, r.low) {
			e.finishRecv(x, nil)
		}
	}
}

// Tail feeds a tail polled from the tail ring. The range is handed back
// as soon as every cell up to its last has landed: the sender writes no
// cell of it twice without holding it first (see Hold). Duplicates,
// stale records and tails of held ranges are ignored.
func (e *Engine) Tail(now int64, t Tail) {
	e.begin(now)
	r := &e.rcv
	if e.err != nil {
		return
	}
	x := r.at(t.Seq)
	if x.state != recvGranted || x.seq != t.Seq || x.tailed || x.held {
		return
	}
	if t.Len < 0 || t.Len > x.Len || t.Cells == 0 || t.Cells > 1<<31 {
		e.finishRecv(x, fmt.Errorf("%w: tail reports %d bytes in %d cells for a range of %d", ErrInvalid, t.Len, t.Cells, x.Len))
		return
	}
	x.tailed, x.flen, x.last = true, t.Len, t.First+t.Cells-1
	r.tails++
	r.finishTailed(e)
}

// Hold feeds a hold polled from the hold ring: the sender is about to
// write a cell of the range again. A range not complete yet is held (it
// ends with its final); one complete already is reported done, so that
// the sender writes nothing into memory handed back.
func (e *Engine) Hold(now int64, h Hold) {
	e.begin(now)
	r := &e.rcv
	if e.err != nil {
		return
	}
	x := r.at(h.Seq)
	var done bool
	switch {
	case !seqBefore(h.Seq, r.seq):
		return // never granted: not a hold of this connection's sender
	case x.seq != h.Seq:
		done = seqBefore(h.Seq, x.seq) // its slot has been granted again
		if !done {
			return
		}
	case x.state == recvFree:
		done = true
	default:
		if x.tailed && !x.held {
			r.tails--
		}
		x.held = true
	}
	a := HoldAck{Seq: h.Seq, Done: done}
	slot := h.Seq & e.gmask
	// Over the hold's own path, a path the sender trusts, unless the
	// slot's last answer went over a path still in service: the new one
	// follows it there (see slotPath).
	if last := r.ackPath[slot]; (last < 0 || !e.paths[last].live()) &&
		h.Path >= 0 && h.Path < len(e.paths) && e.paths[h.Path].state == PathUp {
		r.ackPath[slot] = int8(h.Path)
	}
	if !queued(e.rd.HoldAcks, a.Seq, func(w *HoldAckWrite) uint32 { return w.Ack.Seq }) {
		e.writeHoldAck(a)
	}
}

// repostRecv adds one receive for path p to this batch's chain.
func (e *Engine) repostRecv(p *path) {
	k := p.recvQueued
	if k == len(p.repost) {
		// Cannot happen: at most RecvDepth receives are consumed between
		// two batches, since only that many are posted.
		return
	}
	wr := &p.repost[k]
	wr.ID, wr.Next = recvWRID(p.idx, p.incarn, len(p.refill)+k), nil
	p.recvQueued++
	if k > 0 {
		p.repost[k-1].Next = wr
		for i := range e.rd.Recvs {
			if e.rd.Recvs[i].Path == p.idx && e.rd.Recvs[i].WR == &p.repost[0] {
				e.rd.Recvs[i].Count++
				return
			}
		}
	}
	e.rd.Recvs = append(e.rd.Recvs, RecvPost{Path: p.idx, WR: wr, Count: 1})
}

// fail ends every open receive range with the connection's failure.
func (r *receiver) fail(e *Engine) {
	for s := r.oldest; s != r.seq; s++ {
		if x := r.at(s); x.state != recvFree {
			e.finishRecv(x, e.err)
		}
	}
}
