package sim

// The switch model: store-and-forward, a strict-priority control queue
// and a FIFO data queue per egress port, one shared buffer per switch
// with a dynamic threshold (α = 1: a queue may take what is still free),
// RED-style ECN marking at dequeue, and per-switch-seeded ECMP. With PFC
// the buffer is charged per ingress port instead and nothing is dropped
// (pfc.go).

// enqueue puts a packet on an egress port, dropping data that the shared
// buffer cannot take.
func (s *Sim) enqueue(pi int32, pk int32) {
	pt := &s.f.ports[pi]
	p := &s.pl.p[pk]
	if p.kind != pkData || p.flags&flPrio != 0 {
		pt.ctrl.push(qent{pk: pk, size: int32(p.size), in: -1})
	} else {
		nd := &s.f.nodes[pt.node]
		if nd.tier != 0 && s.pfcHdrm > 0 {
			if !s.pfcAdmit(nd, p.in, int64(p.size)) {
				s.st.Drops++
				s.st.DropBytes += uint64(p.pay)
				s.pl.put(pk)
				return
			}
		} else if nd.tier != 0 {
			total := s.cfg.BufferPerPort * int64(len(nd.ports))
			sz := int64(p.size)
			if nd.used+sz > total || pt.qbytes+sz > total-nd.used {
				s.st.Drops++
				s.st.DropBytes += uint64(p.pay)
				s.pl.put(pk)
				return
			}
			nd.used += sz
		}
		pt.qbytes += int64(p.size)
		pt.maxQ = max(pt.maxQ, pt.qbytes)
		pt.data.push(qent{pk: pk, size: int32(p.size), in: p.in})
	}
	s.kick(pi)
}

// txStart puts the next packet of port pi on the wire, if any: control
// first, then data; a host port with no data queued asks its NIC.
func (s *Sim) txStart(pi int32) {
	pt := &s.f.ports[pi]
	var e qent
	switch {
	case pt.pfcOut != pfcNone:
		e = qent{pk: s.pfcFrameOut(pt), size: pfcFrameSize, in: -1}
	case pt.ctrl.size > 0:
		e = pt.ctrl.pop()
	case pt.paused:
		// PFC holds the data class; control went first above.
		e.pk = -1
	case pt.data.size > 0:
		e = pt.data.pop()
		sz := int64(e.size)
		pt.qbytes -= sz
		nd := &s.f.nodes[pt.node]
		if nd.tier != 0 {
			if s.pfcHdrm > 0 {
				s.pfcRelease(nd, e.in, sz)
			} else {
				nd.used -= sz
			}
			s.markECN(pt, e.pk)
		}
	case s.f.nodes[pt.node].tier == 0:
		e.pk = s.nicPull(pt.node)
		if e.pk >= 0 {
			e.size = int32(s.pl.p[e.pk].size)
		}
	default:
		e.pk = -1
	}
	pk := e.pk
	if pk < 0 {
		return // idle until kicked
	}
	ps := int64(e.size)*pt.psPerByte + pt.rem
	ns := ps / 1000
	pt.rem = ps % 1000
	pt.txBytes += int64(e.size)
	if s.lb != nil {
		s.lb.onTx(pt, e.size)
	}
	pt.busyUntil = s.now + ns
	pt.txSeq = s.ev.reserve(1)
	s.ev.push(s.now+ns+pt.delay, evArrive, pk, pt.peerPort)
	if pt.pfcOut != pfcNone || pt.ctrl.size > 0 || (!pt.paused && pt.data.size > 0) || (s.f.nodes[pt.node].tier == 0 && len(s.hosts[pt.node].active) > 0) {
		s.txDone(pi)
	}
}

// kick makes port pi send what it has: at once if it is idle, else as
// soon as the packet on the wire is out.
func (s *Sim) kick(pi int32) {
	pt := &s.f.ports[pi]
	switch {
	case pt.txPending:
	case s.now > pt.busyUntil || s.now == pt.busyUntil && pt.txSeq < s.seq:
		// Its evTxDone would have come and gone: the port is idle.
		s.txStart(pi)
	default:
		s.txDone(pi)
	}
}

// txDone queues the end of port pi's transmission, when the port will
// have more to send then. A port that would have nothing queues no
// event: a quarter of all events were such no-ops. The event carries
// the sequence number reserved when the packet started, so events of the
// same instant keep the order they would have had.
func (s *Sim) txDone(pi int32) {
	pt := &s.f.ports[pi]
	pt.txPending = true
	s.ev.pushSeq(event{at: pt.busyUntil, seq: pt.txSeq, kind: evTxDone, a: pi})
}

// markECN marks a departing data packet by its queue's length.
func (s *Sim) markECN(pt *port, pk int32) {
	q := pt.qbytes
	if q <= s.cfg.Kmin {
		return
	}
	if q >= s.cfg.Kmax || s.rng.float() < float64(q-s.cfg.Kmin)/float64(s.cfg.Kmax-s.cfg.Kmin)*s.cfg.Pmax {
		s.pl.p[pk].flags |= flECN
	}
}

// arrive lands packet pk at the node owning port in.
func (s *Sim) arrive(pk, in int32) {
	if s.pl.p[pk].kind == pkPause {
		s.pfcFrame(in, pk)
		return
	}
	n := s.f.ports[in].node
	if s.f.nodes[n].tier == 0 {
		s.hostRecv(n, pk)
		return
	}
	s.forward(n, pk, in)
}

// forward routes a packet through switch sw.
func (s *Sim) forward(sw, pk, in int32) {
	p := &s.pl.p[pk]
	p.in = in
	if p.kind == pkProbe {
		s.hula.recv(sw, pk, in)
		return
	}
	var out int32
	if int32(p.dstTor) == sw {
		if p.dst < 0 {
			s.lb.(*conweave).control(sw, pk)
			return
		}
		if p.kind == pkData && !s.lb.atDstTor(sw, pk) {
			return // held for reordering
		}
		p = &s.pl.p[pk]
		out = s.f.hostPort[p.dst]
	} else {
		if p.kind == pkData && int32(p.srcTor) == sw && s.f.ports[in].peer == p.src {
			s.lb.atSrcTor(sw, pk)
			p = &s.pl.p[pk] // the hook may have grown the pool
		}
		hops := s.f.next(sw, s.f.torIx[p.dstTor])
		switch {
		case len(hops) == 1:
			out = hops[0]
		case p.kind == pkData && p.path >= 0:
			n := int32(len(hops))
			out = hops[int32(p.rem)%n]
			p.rem /= int16(n)
		case p.kind == pkData && s.hula != nil:
			out = s.hula.choose(sw, p, hops)
		default:
			out = hops[s.ecmp(sw, p)%uint32(len(hops))]
		}
	}
	s.lb.onForward(sw, out, p)
	s.enqueue(out, pk)
}

// ecmp hashes a packet's 5-tuple with the switch's seed.
func (s *Sim) ecmp(sw int32, p *packet) uint32 {
	src, dst := p.src, p.dst
	if src < 0 {
		src, dst = int32(p.srcTor), int32(p.dstTor)
	}
	return hash32(s.f.nodes[sw].seed, src, dst, p.sport, p.dport)
}
