package sim

// host is a NIC: data QPs served round robin, each paced at its DCQCN
// rate, behind the strict-priority control queue of its port.
type host struct {
	active       []int32
	rr           int
	wakeAt       int64
	sport, dport uint16
}

// nicPull picks the next data packet of host h, or -1; if every QP with
// data is held back by pacing, it sets a wake-up.
func (s *Sim) nicPull(h int32) int32 {
	ho := &s.hosts[h]
	wake := int64(-1)
	for tries := len(ho.active); tries > 0 && len(ho.active) > 0; tries-- {
		if ho.rr >= len(ho.active) {
			ho.rr = 0
		}
		x := ho.active[ho.rr]
		i, ready, busy := x, false, false
		if x < 0 {
			i, ready, busy = s.cells.pick(-x-1, &wake)
		} else {
			q := &s.qps[i]
			busy = q.sndNxt < q.total
			if busy && q.nextAvail > s.now {
				if wake < 0 || q.nextAvail < wake {
					wake = q.nextAvail
				}
			} else {
				ready = busy
				if ready {
					s.rateBeforeSend(q)
				}
			}
			if !busy {
				q.active = false
				if q.dead && q.conn < 0 {
					q.dead = false
					s.freeQ = append(s.freeQ, i)
				}
			}
		}
		if !busy {
			last := len(ho.active) - 1
			ho.active[ho.rr] = ho.active[last]
			ho.active = ho.active[:last]
			continue
		}
		ho.rr++
		if ready {
			return s.dataPacket(i)
		}
	}
	if wake >= 0 && (ho.wakeAt == 0 || wake < ho.wakeAt) {
		ho.wakeAt = wake
		s.ev.push(wake, evNicWake, h, 0)
	}
	return -1
}

// dataPacket builds QP i's packet sndNxt.
func (s *Sim) dataPacket(i int32) int32 {
	q := &s.qps[i]
	for q.msgs.at(q.sndMsg).end <= q.sndNxt {
		q.sndMsg++
	}
	m := q.msgs.at(q.sndMsg)
	mtu := int32(s.cfg.MTU)
	pay := mtu
	flags := uint8(0)
	if q.sndNxt == m.end-1 {
		pay = int32(m.bytes - int64(m.end-m.start-1)*int64(mtu))
		flags = flLast
	}
	pk := s.pl.get()
	p := &s.pl.p[pk]
	p.kind, p.flags = pkData, flags
	p.qp, p.seq, p.msg, p.epoch = i, q.sndNxt, int32(q.sndMsg), q.epoch
	p.src, p.dst = q.src, q.dst
	p.srcTor, p.dstTor = int16(s.f.nodes[q.src].tor), int16(s.f.nodes[q.dst].tor)
	p.sport, p.dport = q.sport, q.dport
	p.pay, p.size = uint16(pay), uint16(pay+int32(s.cfg.Header))
	if q.conn >= 0 && q.end == 1 && s.cfg.TokenPrio {
		p.flags |= flPrio
	}
	q.sndNxt++
	s.st.DataPkts++
	s.st.BytesSent += int64(pay)
	rate := q.dc.rc
	if s.cfg.NoDCQCN {
		rate = s.cfg.Gbps
	}
	q.nextAvail = s.now + int64(float64(p.size)*8/rate)
	q.rtoAt = s.now + s.cfg.RTO
	if !q.rtoArmed {
		q.rtoArmed = true
		s.ev.push(q.rtoAt, evRTO, i, 0)
	}
	return pk
}

// rto fires QP i's lazily re-armed retransmission timer.
func (s *Sim) rto(i int32) {
	q := &s.qps[i]
	q.rtoArmed = false
	if q.sndUna >= q.sndNxt && q.sndUna >= q.total {
		return
	}
	if s.now < q.rtoAt {
		q.rtoArmed = true
		s.ev.push(q.rtoAt, evRTO, i, 0)
		return
	}
	s.st.Timeouts++
	q.rtoAt = s.now + s.cfg.RTO
	q.rtoArmed = true
	s.ev.push(q.rtoAt, evRTO, i, 0)
	s.rewind(i)
}

// hostRecv handles a packet reaching host h.
func (s *Sim) hostRecv(h, pk int32) {
	p := &s.pl.p[pk]
	q := &s.qps[p.qp]
	switch {
	case p.epoch != q.epoch:
		// a late packet of a reset or finished QP
	case p.kind == pkData:
		s.respond(p, q)
	case p.kind == pkAck || p.kind == pkNack:
		if p.flags&flCNP != 0 && !s.cfg.NoDCQCN {
			q.dc.cnp(s.now)
		}
		if p.kind == pkNack {
			s.st.Nacks++
			if p.seq >= q.sndUna && p.seq <= q.sndNxt {
				s.acked(p.qp, p.seq)
				if q := &s.qps[p.qp]; q.flow >= 0 || q.conn >= 0 || q.keep {
					s.rewind(p.qp)
				}
			}
		} else {
			s.acked(p.qp, p.seq)
		}
	}
	s.pl.put(pk)
}

// respond is the RC responder: in order, deliver and ACK; a duplicate is
// ACKed again; a gap discards the packet and asks for Go-Back-N.
func (s *Sim) respond(p *packet, q *qp) {
	switch {
	case p.seq == q.rcvNxt:
		q.rcvNxt++
		if p.flags&flLast != 0 {
			s.deliver(p.qp, int64(p.msg))
		}
		s.ack(p, pkAck, q.rcvNxt, p.flags&flECN != 0)
	case p.seq < q.rcvNxt:
		s.ack(p, pkAck, q.rcvNxt, p.flags&flECN != 0)
	default:
		if q.nackSeq != q.rcvNxt || s.now-q.nackAt >= 4000 {
			q.nackSeq, q.nackAt = q.rcvNxt, s.now
			// Out-of-order arrival makes the RNIC send a CNP too.
			s.ack(p, pkNack, q.rcvNxt, true)
		}
	}
}

// ack sends an ACK or NACK for data packet p back to its sender.
func (s *Sim) ack(p *packet, kind pktKind, seq int32, cnp bool) {
	pk := s.pl.get()
	a := &s.pl.p[pk]
	a.kind, a.qp, a.seq, a.epoch = kind, p.qp, seq, p.epoch
	if cnp {
		a.flags = flCNP
	}
	a.src, a.dst = p.dst, p.src
	a.srcTor, a.dstTor = p.dstTor, p.srcTor
	a.sport, a.dport = p.dport, p.sport
	a.size = uint16(s.cfg.AckSize)
	s.st.CtrlPkts++
	pi := s.f.nodes[a.src].ports[0]
	s.enqueue(pi, pk)
}

// deliver hands a completed message to its owner at the responder.
func (s *Sim) deliver(i int32, mi int64) {
	q := &s.qps[i]
	m := q.msgs.at(mi)
	if m.kind == mFlow {
		// The receiver has it; the flow completes when its sender has
		// the last ACK.
		s.flowArrived(m.flow)
		return
	}
	s.cells.deliver(q, m)
}

// startFlow begins flow i.
func (s *Sim) startFlow(i int32) {
	fl := &s.flows[i]
	if s.cells != nil {
		s.cells.send(i)
		s.collEvent(depStart, i)
		return
	}
	var qi int32
	if s.pairQP != nil {
		key := fl.Src*int32(s.f.hosts) + fl.Dst
		var ok bool
		if qi, ok = s.pairQP[key]; !ok {
			qi = s.newQP(fl.Src, fl.Dst)
			s.qps[qi].keep = true
			s.pairQP[key] = qi
		}
	} else {
		qi = s.newQP(fl.Src, fl.Dst)
		s.qps[qi].flow = i
	}
	fl.qp = qi
	s.post(qi, msg{kind: mFlow, bytes: fl.Size, flow: i})
	s.collEvent(depStart, i)
}

// rateBeforeSend applies the DCQCN increase stages of QP q due by now,
// before it is picked to send. The stages are exact whenever applied
// (see dcqcn.cnp), so only a QP about to send needs its rate brought up
// to date.
func (s *Sim) rateBeforeSend(q *qp) {
	if !s.cfg.NoDCQCN {
		q.dc.increase(s.now)
	}
}
