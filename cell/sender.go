package cell

import "fmt"

// sendRange is a send range from Send to its final.
type sendRange struct {
	SendRange
	seq     uint32
	active  bool // between Send and its Event
	matched bool // its grant is known
	grant   Grant
	cut     int64 // bytes cut into cells so far
	// unresolved counts its cells not yet resolved.
	unresolved int
	// first is the id of its first cell, cells how many it has so far.
	first, cells uint32
	// tailed: its tail went out with its last cell, so the receiver may
	// hand it back on its own; no final follows unless a hold took that
	// back. rescued: a cell of it went back to the re-post queue before
	// its last was cut, so it has no tail and ends with its final.
	tailed, rescued bool
	hold            holdState
	tail            Tail // storage for the Post that carries it
}

// holdState is where a tailed range stands with the receiver after a cell
// of it must be written again.
type holdState uint8

const (
	holdNone  holdState = iota
	holdAsked           // a hold is out; its cells wait in the re-post queue
	holdHeld            // the receiver waits for the final: re-posts may go
	holdDone            // the receiver had it all: nothing is written again
)

type finalRec struct {
	f     Final
	valid bool
}

type grantSlot struct {
	g     Grant
	valid bool
}

// sender is the sending half of a connection.
type sender struct {
	tq     tracker
	ranges []sendRange // slot seq mod MaxRanges
	grants []grantSlot // the peer's grants, slot seq mod MaxRanges
	// finals keeps each final sent until the peer has surely seen it (it
	// granted the slot again), to write it again if its path fails.
	finals []finalRec
	// finalPath and holdPath are, per final and hold ring slot, the path
	// the last record for it went over (see Engine.slotPath).
	finalPath, holdPath []int8
	mask                uint32
	seq                 uint32 // sequence number of the next Send
	oldest              uint32 // oldest range without its Event
	cutSeq              uint32 // the range being cut into cells
	// asked counts the ranges waiting for the answer to a hold.
	asked int
	// maxGrant is the highest grant sequence number seen, if anyGrant.
	maxGrant uint32
	anyGrant bool
}

func (s *sender) init(cfg Config) {
	*s = sender{
		tq:        s.tq,
		ranges:    reuse(s.ranges, cfg.MaxRanges),
		grants:    reuse(s.grants, cfg.MaxRanges),
		finals:    reuse(s.finals, cfg.MaxRanges),
		finalPath: reuse(s.finalPath, cfg.MaxRanges),
		holdPath:  reuse(s.holdPath, cfg.MaxRanges),
	}
	s.tq.init(cfg.Window, cfg.FirstCellID)
	for i := range s.finalPath {
		s.finalPath[i], s.holdPath[i] = -1, -1
	}
	s.mask = uint32(cfg.MaxRanges - 1)
}

func (s *sender) at(seq uint32) *sendRange { return &s.ranges[seq&s.mask] }

// Send queues a range for the peer. It is sent once the peer's grant for
// it (the grant with the same sequence number: the k-th Send fills the
// k-th Recv) has arrived, and its Event comes when every byte has landed
// and no copy of any of its cells can land any more.
func (e *Engine) Send(now int64, r SendRange) error {
	e.begin(now)
	s := &e.snd
	if e.err != nil {
		return e.err
	}
	if r.Len < 0 || r.Len > 1<<48 {
		return fmt.Errorf("%w: peer %s: send range tag %d has length %d", ErrInvalid, e.cfg.Peer, r.Tag, r.Len)
	}
	if int(s.seq-s.oldest) >= len(s.ranges) {
		return fmt.Errorf("%w: peer %s: %d send ranges outstanding", ErrBusy, e.cfg.Peer, len(s.ranges))
	}
	*s.at(s.seq) = sendRange{SendRange: r, seq: s.seq, active: true}
	s.seq++
	e.pump()
	return nil
}

// Grant feeds a grant polled from the grant ring. Duplicates and stale
// records are ignored.
func (e *Engine) Grant(now int64, g Grant) {
	e.begin(now)
	s := &e.snd
	if e.err != nil {
		return
	}
	if !s.anyGrant || seqBefore(s.maxGrant, g.Seq) {
		s.maxGrant, s.anyGrant = g.Seq, true
	}
	if !inWindow(g.Seq, s.cutSeq, uint32(len(s.grants))) {
		return
	}
	slot := &s.grants[g.Seq&s.mask]
	if slot.valid && slot.g.Seq == g.Seq {
		return
	}
	*slot = grantSlot{g: g, valid: true}
	e.pump()
}

// Token feeds a token polled from the token ring. A token for a copy
// resolves it and every copy posted before it on the same path (RC
// delivers a QP's writes in order), gives their credits back, and yields
// an RTT and a bandwidth sample. A NACK gives the path up; the token that
// drains a slow path makes it up again. Tokens that match nothing
// outstanding are ignored.
func (e *Engine) Token(now int64, t Token) {
	e.begin(now)
	if e.err != nil {
		return
	}
	if t.Path < 0 || t.Path >= len(e.paths) {
		e.stats.TokensStale++
		return
	}
	p := &e.paths[t.Path]
	k := p.find(t.ID)
	if k < 0 {
		e.stats.TokensStale++
		return
	}
	e.stats.TokensAccepted++
	p.tokens++
	nack := t.Status == TokenNACK
	start := max(p.at(0).sentAt, p.progress)
	var bytes int64
	for i := 0; i <= k; i++ {
		rec := p.popHead()
		c := e.snd.tq.at(rec.id)
		c.copies--
		if p.live() {
			p.credits++
		}
		bytes += rec.n
		if i < k || !nack {
			c.acked = true
		}
		if i == k && !nack {
			p.est.sampleLate(e.now, p.est.expect(rec.sentAt, p.progress, bytes))
			rtt := e.now - rec.sentAt
			p.est.sample(rtt)
			p.est.rate(bytes, e.now-start)
			p.est.minimum(rtt, rec.n)
			p.est.sampleDelay(rtt, rec.ahead)
		}
		if i == k && nack {
			e.requeue(c)
		}
		e.resolve(c)
	}
	p.progress = e.now
	if nack {
		e.giveUp(p, &PathError{Peer: e.cfg.Peer, Path: t.Path, Cell: t.ID, HasCell: true,
			Err: fmt.Errorf("%w: the receiver refused the cell", ErrNACK)})
	}
	e.promoteDrained(p)
	e.snd.advance()
	e.pump()
}

// resolve counts a cell off its range once nothing about it is pending.
func (e *Engine) resolve(c *cell) {
	if c.done || !c.resolved() || e.err != nil {
		return
	}
	c.done = true
	r := e.snd.at(c.rseq)
	r.unresolved--
	e.maybeFinish(r)
}

// advance slides NEXT_ACK over resolved cells, but not over one still
// named by the re-post queue: a cell that landed while queued (its late
// copy's token) stays there until it reaches the queue's head, and its
// tracking slot must not be reused meanwhile, or the queue would name the
// new cell and post it again.
func (s *sender) advance() {
	for s.tq.nextAck != s.tq.nextSend {
		if c := s.tq.at(s.tq.nextAck); !c.done || c.queued {
			return
		}
		s.tq.nextAck++
	}
}

func (e *Engine) maybeFinish(r *sendRange) {
	if r.active && r.matched && r.cut == r.Len && r.unresolved == 0 {
		e.finishSend(r, FinalOK, nil)
	}
}

// finishSend ends a range: the final tells the receiver, the event the
// application.
func (e *Engine) finishSend(r *sendRange, status FinalStatus, err error) {
	s := &e.snd
	r.active = false
	if r.hold == holdAsked {
		s.asked-- // the answer no longer matters
	}
	ev := Event{Kind: Sent, Tag: r.Tag, Len: r.Len}
	if err != nil {
		ev.Len = 0
		ev.Err = &RangeError{Peer: e.cfg.Peer, Dir: "send", Tag: r.Tag, Seq: r.seq, Len: r.Len, Err: err}
		e.stats.RangesFailed++
	} else {
		e.stats.RangesSent++
	}
	// A tailed range needs no final unless a hold took its tail back, or
	// may have: one asked and not answered yet.
	if status != 0 && (!r.tailed || r.hold == holdAsked || r.hold == holdHeld) {
		f := Final{Seq: r.seq, Len: ev.Len, Status: status}
		s.finals[r.seq&s.mask] = finalRec{f: f, valid: true}
		e.writeFinal(f)
	}
	e.rd.Events = append(e.rd.Events, ev)
	for s.oldest != s.seq && !s.at(s.oldest).active {
		s.oldest++
	}
}

func (e *Engine) writeFinal(f Final) {
	slot := f.Seq & e.gmask
	if q := e.slotPath(&e.snd.finalPath[slot]); q >= 0 {
		e.rd.Finals = append(e.rd.Finals, FinalWrite{Path: q, Slot: int(slot), Final: f})
	}
}

// reemit writes again the finals whose ring slot the receiver has not
// granted again (those it may not have seen), and the holds not yet
// answered.
func (s *sender) reemit(e *Engine) {
	for q := s.oldest; q != s.seq; q++ {
		if r := s.at(q); r.active && r.hold == holdAsked && !queued(e.rd.Holds, q, func(w *HoldWrite) uint32 { return w.Hold.Seq }) {
			e.writeHold(r)
		}
	}
	for i := range s.finals {
		f := &s.finals[i]
		if f.valid && !(s.anyGrant && seqDiff(s.maxGrant, f.f.Seq) >= int32(len(s.finals))) && !queued(e.rd.Finals, f.f.Seq, func(w *FinalWrite) uint32 { return w.Final.Seq }) {
			e.writeFinal(f.f)
		}
	}
}

// requeue puts a cell that may not have landed back on the re-post queue.
// A copy of it may still land after the re-post has, so its range can no
// longer be completed by the receiver on its tail alone: a range whose
// tail has not gone out gets none, and one whose tail has is held first.
func (e *Engine) requeue(c *cell) {
	e.snd.tq.queue(c)
	r := e.snd.at(c.rseq)
	switch {
	case !r.tailed:
		r.rescued = true
	case r.hold == holdNone:
		r.hold = holdAsked
		e.snd.asked++
		e.stats.Holds++
		e.writeHold(r)
	}
}

func (e *Engine) writeHold(r *sendRange) {
	slot := r.seq & e.gmask
	if q := e.slotPath(&e.snd.holdPath[slot]); q >= 0 {
		e.rd.Holds = append(e.rd.Holds, HoldWrite{Path: q, Slot: int(slot), Hold: Hold{Seq: r.seq, Path: q}})
	}
}

// mayRepost reports whether cell c, queued for re-posting, may go now: not
// while its range waits for the answer to a hold.
func (e *Engine) mayRepost(c *cell) bool {
	r := e.snd.at(c.rseq)
	return !r.tailed || r.hold == holdHeld
}

// Holding reports whether a hold is waiting for its answer: a driver that
// polls its rings looks at the hold-ack ring only then.
func (e *Engine) Holding() bool { return e.snd.asked > 0 }

// HoldAck feeds a hold ack polled from the hold-ack ring. Duplicates and
// stale records are ignored.
func (e *Engine) HoldAck(now int64, a HoldAck) {
	e.begin(now)
	s := &e.snd
	if e.err != nil {
		return
	}
	r := s.at(a.Seq)
	if !r.active || r.seq != a.Seq || r.hold != holdAsked {
		return
	}
	s.asked--
	if !a.Done {
		r.hold = holdHeld
		e.pump()
		return
	}
	// Every cell landed: those without a token yet are acknowledged by
	// the receiver's word, and none is written again. Their copies still
	// outstanding resolve as their tokens come or their path is reset.
	r.hold = holdDone
	e.stats.HoldsDone++
	end := r.first + r.cells
	for id := r.first; id != end; id++ {
		if !s.tq.has(id) {
			continue
		}
		if c := s.tq.at(id); c.rseq == r.seq && !c.acked {
			c.acked = true
			e.resolve(c)
		}
	}
	s.advance()
	e.pump()
}

// nextCut returns the range to cut the next cell from, matching ranges to
// their grants in order, or nil if none can go yet.
func (e *Engine) nextCut() *sendRange {
	s := &e.snd
	for s.cutSeq != s.seq {
		r := s.at(s.cutSeq)
		if !r.matched {
			g := &s.grants[s.cutSeq&s.mask]
			if !g.valid || g.g.Seq != s.cutSeq {
				return nil
			}
			r.matched, r.grant = true, g.g
			if r.Len > g.g.Len {
				e.finishSend(r, FinalTooLong, fmt.Errorf("%w: %d bytes into a grant of %d", ErrTooLong, r.Len, g.g.Len))
				s.cutSeq++
				continue
			}
			e.maybeFinish(r) // an empty range is done at once
		}
		if r.active && r.cut < r.Len {
			return r
		}
		s.cutSeq++
	}
	return nil
}

// Placement keeps no cell off a path for ever on old evidence: a path up
// and empty whose last token is older than staleRTTs of the connection's
// best smoothed RTT, and than ownStaleRTTs of its own, while other paths
// have had tokens since, forgets what placement measured on it. It is
// then probed with one cell as a fresh path is (see Adaptive). Without
// this, a path measured slow once (a stall, a queue that has since
// drained, a route that has since been repaired) would never be given a
// cell that could show otherwise. A probe on a path still slow costs one
// late cell, at most once per ownStaleRTTs of that path's RTT. A
// connection idle as a whole keeps its measurements: staleness is
// measured against its latest token, not the clock.
const (
	staleRTTs    = 32
	ownStaleRTTs = 8
)

// forgetStale applies the rule above before a placement.
func (e *Engine) forgetStale() {
	var latest int64
	best := int64(-1)
	for i := range e.paths {
		p := &e.paths[i]
		if p.state != PathUp || p.est.samples == 0 {
			continue
		}
		latest = max(latest, p.progress)
		if best < 0 || p.est.srtt < best {
			best = p.est.srtt
		}
	}
	if best < 0 {
		return
	}
	for i := range e.paths {
		p := &e.paths[i]
		if p.state == PathUp && p.n == 0 && p.est.samples > 0 &&
			latest-p.progress > max(staleRTTs*best, ownStaleRTTs*p.est.srtt) {
			p.est.forget()
			p.reprobes++
			e.stats.Reprobes++
		}
	}
}

// cellSize is the size of the next new cell: fixed, or 1.5 × the mean
// bandwidth-delay product of the measured up paths, within bounds and
// rounded up to whole MTUs.
func (e *Engine) cellSize() int64 {
	if e.cfg.CellSize > 0 {
		return e.cfg.CellSize
	}
	var sum, k int64
	for i := range e.paths {
		p := &e.paths[i]
		if b := p.est.bdp(); p.state == PathUp && b > 0 {
			sum += b
			k++
		}
	}
	size := e.cfg.InitialCellSize
	if k > 0 {
		mtu := int64(e.cfg.MTU)
		size = (3*(sum/k)/2 + mtu - 1) / mtu * mtu
	}
	return min(max(size, e.cfg.MinCellSize), e.cfg.MaxCellSize)
}

// pump places cells while the policy finds room: re-posts first, then new
// cells while the window has room.
func (e *Engine) pump() {
	s := &e.snd
	for e.err == nil {
		c := s.tq.peekRepost()
		s.advance() // past cells peekRepost dropped
		if c != nil && !e.mayRepost(c) {
			c = nil // new cells may go meanwhile
		}
		var r *sendRange
		var n int64
		if c != nil {
			n = c.n
		} else {
			if s.tq.full() {
				return
			}
			if r = e.nextCut(); r == nil {
				return
			}
			n = min(e.cellSize(), r.Len-r.cut)
		}
		e.forgetStale()
		for i := range e.paths {
			e.infos[i] = e.paths[i].info()
		}
		q := e.policy.Pick(e.infos, n)
		if q < 0 || q >= len(e.paths) || e.paths[q].state != PathUp || e.paths[q].credits <= 0 {
			return
		}
		if c != nil {
			s.tq.popRepost()
			c.queued = false
			e.stats.CellsReposted++
		} else {
			c = s.tq.open(r.seq, r.cut, n)
			if r.cells == 0 {
				r.first = c.id
			}
			r.cells++
			r.cut += n
			r.unresolved++
			if r.cut == r.Len {
				if !r.rescued {
					c.tail, r.tailed = true, true
					r.tail = Tail{Seq: r.seq, Len: r.Len, First: r.first, Cells: r.cells}
				}
				// Move on now, not at the next cut: the receiver may
				// hand this range back, and grant the next of its ring
				// slot, before the window lets another cell go.
				s.cutSeq++
			}
		}
		e.post(&e.paths[q], c)
	}
}

// post hands out a copy of cell c on path p.
func (e *Engine) post(p *path, c *cell) {
	r := e.snd.at(c.rseq)
	wr := c.build(p.idx, e.cfg.MTU, r.Addr, r.LKey, r.grant.Addr, r.grant.RKey)
	p.push(copyRec{id: c.id, sentAt: e.now, n: c.n, ahead: p.bytes, batch: e.batch, backoff: c.timeouts})
	p.credits--
	p.cellsPosted++
	p.bytesPosted += uint64(c.n)
	c.copies++
	c.attempts++
	e.stats.CellsPosted++
	post := Post{Path: p.idx, WR: wr, Cell: c.id, Len: c.n, Again: c.attempts > 1}
	if c.tail && c.attempts == 1 {
		post.Tail = &r.tail
	}
	e.rd.Posts = append(e.rd.Posts, post)
}

// fail ends every open send range with the connection's failure.
func (s *sender) fail(e *Engine) {
	for q := s.oldest; q != s.seq; q++ {
		if r := s.at(q); r.active {
			e.finishSend(r, 0, e.err)
		}
	}
	s.tq.rn = 0
}
