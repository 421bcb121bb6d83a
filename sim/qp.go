package sim

import "github.com/rdmacell/rdmacell/cell"

// msgKind is what a QP message carries to the other end.
type msgKind uint8

const (
	mFlow    msgKind = iota // a whole flow of a baseline scheme
	mCell                   // an RDMACell cell chain (WRITE + WRITE_WITH_IMM)
	mToken                  // an RDMACell token write
	mGrant                  // an RDMACell grant write
	mFinal                  // an RDMACell final write
	mHold                   // an RDMACell hold write
	mHoldAck                // an RDMACell hold-ack write
)

// msg is one posted message: packets [start, end) of its QP.
type msg struct {
	start, end int32
	bytes      int64
	kind       msgKind
	imm        uint32
	flow       int32
	tok        cell.Token
	grant      cell.Grant
	fin        cell.Final
	// raddr is where a cell chain writes its first byte.
	raddr uint64
	// tail is the range's tail a cell chain carries, if hasTail.
	tail    cell.Tail
	hasTail bool
	hold    cell.Hold
	ack     cell.HoldAck
}

// msgQueue holds a QP's messages from the oldest unacknowledged to the
// newest, addressed by absolute index (so packets can name theirs).
type msgQueue struct {
	buf        []msg
	head, tail int64 // absolute indices
}

func (q *msgQueue) at(i int64) *msg { return &q.buf[i&int64(len(q.buf)-1)] }

func (q *msgQueue) push(m msg) {
	if q.tail-q.head == int64(len(q.buf)) {
		n := max(4, 2*len(q.buf))
		nb := make([]msg, n)
		for i := q.head; i < q.tail; i++ {
			nb[i&int64(n-1)] = *q.at(i)
		}
		q.buf = nb
	}
	*q.at(q.tail) = m
	q.tail++
}

// qp is one direction of an RC queue pair: the requester at src and the
// responder at dst. Its ACKs travel back with the ports swapped.
type qp struct {
	src, dst     int32
	sport, dport uint16
	epoch        int32
	// requester
	msgs           msgQueue
	sndMsg         int64 // message holding sndNxt
	sndNxt, sndUna int32
	total          int32
	nextAvail      int64
	rtoAt          int64
	rtoArmed       bool
	active         bool
	dc             dcqcn
	// responder
	rcvNxt  int32
	nackAt  int64
	nackSeq int32
	// owner: a baseline flow, or a path of an RDMACell connection
	flow int32
	conn int32
	path int16
	end  int8 // the engine end that sends on this direction
	dead bool // RDMACell: being reset, posts are flushed
	keep bool // shared by a host pair's messages: not released after one
}

// newQP takes a QP from the pool for src → dst.
func (s *Sim) newQP(src, dst int32) int32 {
	var i int32
	if n := len(s.freeQ); n > 0 {
		i = s.freeQ[n-1]
		s.freeQ = s.freeQ[:n-1]
	} else {
		s.qps = grow(s.qps)
		s.qps = append(s.qps, qp{})
		i = int32(len(s.qps) - 1)
	}
	q := &s.qps[i]
	ep := q.epoch + 1
	buf := q.msgs.buf
	*q = qp{src: src, dst: dst, epoch: ep, flow: -1, conn: -1}
	q.msgs.buf = buf
	q.dc.init(s.cfg.Gbps, s.cfg.DCQCNKeepTarget)
	h := &s.hosts[src]
	h.sport++
	s.hosts[dst].dport++
	q.sport = 10000 + h.sport
	q.dport = 100 + s.hosts[dst].dport
	if s.lbs != nil {
		for int(i) >= len(s.lbs) {
			s.lbs = append(grow(s.lbs), lbState{})
		}
		s.lbs[i].reset()
	}
	return i
}

// post appends a message to QP i and wakes its NIC.
func (s *Sim) post(i int32, m msg) {
	q := &s.qps[i]
	if q.dead {
		return
	}
	mtu := int64(s.cfg.MTU)
	m.start = q.total
	m.end = q.total + int32((m.bytes+mtu-1)/mtu)
	q.total = m.end
	q.msgs.push(m)
	s.activate(i)
}

// activate puts QP i in its host's round robin and kicks the port.
func (s *Sim) activate(i int32) {
	q := &s.qps[i]
	if q.conn >= 0 {
		// An RDMACell connection end competes at the NIC as one flow,
		// however many QPs it spreads over: it gains no share by opening
		// paths, as a baseline flow has one QP.
		c := &s.cells.conns[q.conn]
		c.pend[q.end] |= 1 << q.path
		c.notBefore[q.end] = 0
		if !c.active[q.end] {
			c.active[q.end] = true
			h := &s.hosts[q.src]
			h.active = append(h.active, -(2*q.conn + int32(q.end) + 1))
		}
	} else if !q.active {
		q.active = true
		h := &s.hosts[q.src]
		h.active = append(h.active, i)
	}
	pi := s.f.nodes[q.src].ports[0]
	s.kick(pi)
}

// rewind restarts sending from sndUna (Go-Back-N).
func (s *Sim) rewind(i int32) {
	q := &s.qps[i]
	s.st.Retransmits += uint64(q.sndNxt - q.sndUna)
	q.sndNxt = q.sndUna
	q.sndMsg = q.msgs.head
	for q.sndMsg < q.msgs.tail && q.msgs.at(q.sndMsg).end <= q.sndNxt {
		q.sndMsg++
	}
	s.activate(i)
}

// acked moves sndUna to seq and retires the messages it covers.
func (s *Sim) acked(i int32, seq int32) {
	q := &s.qps[i]
	if seq <= q.sndUna {
		return
	}
	q.sndUna = seq
	if q.sndNxt < seq {
		q.sndNxt = seq
		if q.conn >= 0 {
			// It may have nothing left to send: its end's round robin
			// must look again (cellDriver.pick).
			s.cells.conns[q.conn].notBefore[q.end] = 0
		}
	}
	q.rtoAt = s.now + s.cfg.RTO
	for q.msgs.head < q.msgs.tail {
		m := q.msgs.at(q.msgs.head)
		if m.end > q.sndUna {
			break
		}
		s.st.BytesAcked += m.bytes
		q.msgs.head++
		if q.sndMsg < q.msgs.head {
			q.sndMsg = q.msgs.head
		}
		if m.kind == mFlow {
			s.flowDone(m.flow)
			if !q.keep {
				s.releaseQP(i)
				return
			}
		}
	}
}

// releaseQP returns a finished flow's QP to the pool; its epoch changes
// when reused, so that its late packets are ignored.
func (s *Sim) releaseQP(i int32) {
	q := &s.qps[i]
	q.flow = -1
	q.total, q.sndNxt, q.sndUna = 0, 0, 0
	q.msgs.head, q.msgs.tail, q.sndMsg = 0, 0, 0
	q.epoch++
	if !q.active {
		s.freeQ = append(s.freeQ, i)
	} else {
		q.dead = true // freed when its host's round robin drops it
	}
}
