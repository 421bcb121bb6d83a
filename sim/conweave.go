package sim

// conweave is ConWeave, simplified: per flow at the source ToR, epochs
// that start with an RTT request; a reply missing its deadline (base RTT
// + 4 µs) makes the next packet a TAIL on the old path and later ones go
// (phase 1) on a new path, the first not ECN-marked of two sampled. At
// the destination ToR, phase-1 packets that overtake the TAIL wait in a
// per-flow queue (not charged to the buffer) until the TAIL arrives or a
// flush deadline passes; then a CLEAR lets the source start a new epoch.
// A destination ToR seeing ECN on a path NOTIFYs the source, which avoids
// that path for 16 µs. Simplified: one reroute per epoch, and the flush
// deadline is phase0Rx + (tailTx − phase0Tx) + 64 µs from the last
// phase-0 packet (600 µs without one).
type conweave struct {
	ecmpLB
	s        *Sim
	maxPaths int32
	pause    []int64 // [src ToR][dst ToR][path] avoided until
}

// cwState is a flow's ConWeave state at its source and destination ToRs.
type cwState struct {
	// source ToR
	ep       int32
	phase1   bool
	await    bool
	deadline int64
	tailTx   int64
	// destination ToR
	dEp       int32
	dTail     bool
	phase0Rx  int64
	phase0Tx  int64
	notifyT   int64
	held      ring[int32]
	flushArmd bool
}

const (
	cwTxExpiry   = 1_000_000
	cwReplyExtra = 4_000
	cwPathPause  = 16_000
	cwFlushExtra = 64_000
	cwDefWait    = 600_000
	cwCtrlSize   = 64
)

func newConweave(s *Sim) *conweave {
	c := &conweave{s: s}
	T := int32(len(s.f.tors))
	for a := range T {
		for b := range T {
			if a != b {
				c.maxPaths = max(c.maxPaths, s.f.paths(a, b))
			}
		}
	}
	c.maxPaths = max(c.maxPaths, 1)
	c.pause = make([]int64, T*T*c.maxPaths)
	return c
}

func (c *conweave) ix(a, b, path int32) int32 {
	return (a*int32(len(c.s.f.tors))+b)*c.maxPaths + path
}

func (c *conweave) atSrcTor(sw, pk int32) {
	s := c.s
	p := &s.pl.p[pk]
	qi := p.qp
	st := &s.lbs[qi]
	cw := &st.cw
	a, b := s.f.torIx[sw], s.f.torIx[p.dstTor]
	n := s.f.paths(a, b)
	if st.path < 0 || s.now-st.last > cwTxExpiry {
		st.path = int32(s.rng.intn(int(n)))
		cw.ep++
		cw.phase1, cw.await = false, false
	}
	st.last = s.now
	path := st.path
	switch {
	case cw.phase1:
		p.flags |= flPhase1
		p.at = cw.tailTx
	case cw.await && s.now > cw.deadline:
		cw.await = false
		np := int32(-1)
		for range 2 {
			x := int32(s.rng.intn(int(n)))
			if x != st.path && c.pause[c.ix(a, b, x)] <= s.now {
				np = x
				break
			}
		}
		if np >= 0 {
			p.flags |= flTail
			cw.tailTx = s.now
			cw.phase1 = true
			st.path = np
		}
		p.at = s.now
	default:
		p.at = s.now
	}
	if !cw.phase1 && !cw.await {
		p.flags |= flInit
		cw.await = true
		cw.deadline = s.now + 2*int64(s.f.dist[b][sw])*s.cfg.LinkDelay + cwReplyExtra
	}
	p.b = cw.ep // the flow's epoch
	p.path, p.rem = int16(path), int16(path)
}

func (c *conweave) atDstTor(sw, pk int32) bool {
	s := c.s
	p := &s.pl.p[pk]
	if p.path < 0 {
		return true
	}
	qi, ep, flags, path, at := p.qp, p.b, p.flags, int32(p.path), p.at
	srcTor := int32(p.srcTor)
	cw := &s.lbs[qi].cw
	if flags&flECN != 0 && s.now-cw.notifyT >= cwPathPause {
		cw.notifyT = s.now
		c.ctrl(pkCWNotify, sw, srcTor, qi, ep, path)
	}
	if flags&flInit != 0 {
		c.ctrl(pkCWReply, sw, srcTor, qi, ep, 0)
	}
	if ep > cw.dEp {
		c.flush(qi)
		cw.dEp, cw.dTail = ep, false
	}
	if ep < cw.dEp {
		return true
	}
	switch {
	case flags&flTail != 0:
		cw.dTail = true
		s.enqueue(s.f.hostPort[s.pl.p[pk].dst], pk)
		c.flush(qi)
		c.ctrl(pkCWClear, sw, srcTor, qi, ep, 0)
		return false
	case flags&flPhase1 != 0 && !cw.dTail:
		cw.held.push(pk)
		s.st.Reordered++
		if !cw.flushArmd {
			cw.flushArmd = true
			dl := s.now + cwDefWait
			if cw.phase0Rx > 0 {
				dl = max(s.now, cw.phase0Rx+(at-cw.phase0Tx)+cwFlushExtra)
			}
			s.ev.push(dl, evFlush, qi, ep)
		}
		return false
	case flags&flPhase1 == 0:
		cw.phase0Rx, cw.phase0Tx = s.now, at
	}
	return true
}

// flush releases a flow's held packets to its host, in arrival order.
func (c *conweave) flush(qi int32) {
	s := c.s
	cw := &s.lbs[qi].cw
	for cw.held.size > 0 {
		pk := cw.held.pop()
		s.enqueue(s.f.hostPort[s.pl.p[pk].dst], pk)
	}
}

// flushTimer gives up waiting for a TAIL.
func (c *conweave) flushTimer(qi, ep int32) {
	s := c.s
	cw := &s.lbs[qi].cw
	cw.flushArmd = false
	if cw.dEp != ep || cw.dTail || cw.held.size == 0 {
		return
	}
	pk := cw.held.front()
	src, dst := int32(s.pl.p[pk].srcTor), int32(s.pl.p[pk].dstTor)
	cw.dTail = true
	c.flush(qi)
	c.ctrl(pkCWClear, dst, src, qi, ep, 0)
}

// ctrl sends a ConWeave control packet between ToRs, ECMP-routed at high
// priority.
func (c *conweave) ctrl(kind pktKind, from, to, qi, ep, a int32) {
	s := c.s
	pk := s.pl.get()
	p := &s.pl.p[pk]
	q := &s.qps[qi]
	p.kind, p.qp, p.b, p.a, p.size = kind, qi, ep, a, cwCtrlSize
	p.src, p.dst, p.srcTor, p.dstTor = -1, -1, int16(from), int16(to)
	p.sport, p.dport = q.dport, q.sport
	p.epoch = q.epoch
	s.st.CtrlPkts++
	s.forward(from, pk, -1)
}

// control handles a control packet that reached its ToR.
func (c *conweave) control(sw, pk int32) {
	s := c.s
	p := s.pl.p[pk]
	s.pl.put(pk)
	q := &s.qps[p.qp]
	if p.epoch != q.epoch {
		return
	}
	st := &s.lbs[p.qp]
	switch p.kind {
	case pkCWReply:
		if p.b == st.cw.ep && !st.cw.phase1 {
			st.cw.await = false
		}
	case pkCWClear:
		if p.b == st.cw.ep && st.cw.phase1 {
			st.cw.ep++
			st.cw.phase1, st.cw.await = false, false
		}
	case pkCWNotify:
		c.pause[c.ix(s.f.torIx[sw], s.f.torIx[p.srcTor], p.a)] = s.now + cwPathPause
	}
}
