package sim

import (
	"errors"
	"fmt"
	"math/bits"
	"time"

	"github.com/rdmacell/rdmacell/cell"
	"github.com/rdmacell/rdmacell/cell/bind"
	"github.com/rdmacell/rdmacell/verbs"
)

// cellDriver binds cell.Engines to simulated QPs: it is the driver of
// package cell, with virtual time. A connection is an engine at each end
// over Paths QPs. Each path is an RC QP pair with its own UDP ports (its
// own ECMP route); cell chains go on the sender's QP, tokens, grants and
// finals are RDMA writes on the reverse direction of the same QP pair.
//
// By default (Config.Conn "pair") a host pair has one connection, as two
// ranks of a communicator have: the pair's flows are its ranges, sent in
// arrival order, and its paths keep their RTT estimates, rates and DCQCN
// state from one flow to the next, so that placement has measurements to
// go on. The receiver keeps the pair's next ranges posted (up to
// pairRanges), as the communicator's staging keeps receives posted ahead
// of the application: a flow's grant is normally at its sender before
// the flow starts. The connection opens RecvLead before the pair's first
// flow, standing for the one its ranks set up at start (nothing would
// cross it before), and stays open to the end of the run.
//
// The comparison model (Config.Conn "flow") gives every flow a
// connection of its own, opened RecvLead before it starts (its receiver
// posts the range then, as an application with its buffers ready does;
// the grant still crosses the fabric) and closed when it is done, as the
// baselines give every flow a QP of its own: a small flow then never
// queues behind a large one, but each starts on paths that have
// measured nothing.
type cellDriver struct {
	s     *Sim
	conns []conn
	free  []int32
	// connOf[flow] is the flow's connection, -1 before and after.
	connOf []int32
	// pair[src·hosts+dst] is a host pair's connection, in a collective
	// and in the pair model. pairFlows[src·hosts+dst] is a pair's flows
	// in arrival order (pair model of a workload): its connection's
	// queue.
	pair      map[int32]int32
	pairFlows map[int32][]int32
	// landed, if set, hears of every cell that lands at its receiver:
	// the remote address of its first byte and its length.
	landed   func(raddr uint64, n int64)
	errDelay int64
	cellSize int64
	// names[h] names host h in engine errors, built once.
	names []string
	// window and depth are the engines' Window and RecvDepth.
	window, depth int
	// maxWaiting is the most sends a pair connection held back at once.
	maxWaiting int
	// spare holds the engines of closed connections, to Reset for new
	// ones: building two per flow was about 15 % of a run.
	spare []*cell.Engine
	// act is the actor of the batch being drained.
	act cellActor
}

type conn struct {
	flow   int32
	gen    int32 // incarnation of the slot: stale events are ignored
	eng    [2]*cell.Engine
	qp     []int32 // [path·2 + end]: the QP end writes on
	tickAt [2]int64
	// paths[p] says whether path p's QP pair is being reset; both ends
	// are reset as one. Tokens travel as messages: no token rings.
	paths []bind.Path
	sent  bool // the flow was handed to the sender
	// active says an end is in its host's round robin, rr which of its
	// QPs it serves next. pend[end] has bit p set when path p's QP at
	// that end may have packets to send (set when one is activated,
	// cleared when pick finds it has none): pick reads only those QPs,
	// as a QP's first read is a cache miss and half of those it read
	// had nothing to send. notBefore[end] is when the first of them is
	// past its pacing gap, set when pick found every one paced: until
	// then pick reads none. Whatever may make one of them ready sooner
	// or idle (activate, a reset, an ACK past sndNxt) clears it.
	active    [2]bool
	rr        [2]int
	pend      [2]uint64
	notBefore [2]int64
	done      [2]bool
	// queue is a pair connection's messages in the order they are sent,
	// recvs how many of them the receiver has posted; waiting holds the
	// sends beyond the engine's MaxRanges, in order, as the runtime's
	// driver keeps them.
	queue   []int32
	recvs   int
	waiting []int32
	// grants holds what reached a per-flow connection's sender end
	// before its flow started: that end's engine is only built then
	// (halving the engines alive while receivers post ahead), and is fed
	// them first. An engine has no input before its first Send but these,
	// and none of its outputs depends on when they came.
	grants []cell.Grant
}

// pairRanges is how many receive ranges a pair connection keeps posted
// ahead: the engine's MaxRanges, as a communicator's staging.
const pairRanges = 64

// errPeerReset is the cause the peer's engine hears when a path it uses
// is reset by the other end.
var errPeerReset = errors.New("peer reset the QP")

func newCellDriver(s *Sim) (*cellDriver, error) {
	d := &cellDriver{s: s, connOf: make([]int32, len(s.flows)), errDelay: min(5_000, s.cfg.QPReset/2), cellSize: s.cfg.cellBytes()}
	for i := range d.connOf {
		d.connOf[i] = -1
	}
	if s.sched != nil || s.cfg.Conn == "pair" {
		d.pair = map[int32]int32{}
	}
	// A connection per flow never has more cells than its flow: a window
	// and a receive depth that hold them all bind exactly as 32 and 16
	// would, and each engine clears far less when reset for a new flow.
	d.window, d.depth = 32, 16
	if d.pair == nil && d.cellSize > 0 {
		var most int64
		for i := range s.flows {
			most = max(most, s.flows[i].Size)
		}
		if cells := int((most + d.cellSize - 1) / d.cellSize); cells <= d.depth {
			d.depth = max(cells, 1)
			d.window = max(2, 1<<bits.Len(uint(cells-1)))
		}
	}
	d.names = make([]string, s.f.hosts)
	for h := range d.names {
		d.names[h] = fmt.Sprintf("host %d", h)
	}
	// Fail on a bad engine configuration now rather than mid-run.
	if _, err := cell.New(d.engineConfig(0, 1, 0)); err != nil {
		return nil, err
	}
	return d, nil
}

func (d *cellDriver) engineConfig(src, dst int32, end int) cell.Config {
	s := d.s
	cfg := cell.Config{
		Peer:           d.names[[2]int32{dst, src}[end]],
		Paths:          s.cfg.Paths,
		MTU:            s.cfg.MTU,
		CellSize:       d.cellSize,
		Window:         d.window,
		MaxRanges:      1,
		RecvDepth:      d.depth,
		InitialRTT:     time.Duration(s.cfg.InitialRTT),
		MinSoftTimeout: time.Duration(s.cfg.MinSoftTimeout),
		MaxSoftBackoff: s.cfg.SoftBackoff,
	}
	if d.pair != nil {
		cfg.MaxRanges = pairRanges
	}
	switch s.cfg.Scheme {
	case "rdmacell-ecmp":
		cfg.Policy = &cell.ECMP{Key: uint64(src)<<32 | uint64(dst)}
	case "rdmacell-spray":
		cfg.Policy = &cell.Spray{}
	}
	return cfg
}

// open creates flow fi's connection: engines, QPs, and the receiver's
// range.
func (d *cellDriver) open(fi int32) {
	s := d.s
	fl := &s.flows[fi]
	ci := d.newConn(fl.Src, fl.Dst)
	c := &d.conns[ci]
	c.flow = fi
	d.connOf[fi] = ci
	_ = c.eng[1].Recv(s.now, cell.RecvRange{Tag: uint64(fi), Addr: uint64(fi+1) << 32, RKey: 2, Len: fl.Size})
	d.drain(ci, 1)
}

// openPairs opens a connection for every host pair of the collective,
// with the first pairRanges of its messages posted at the receiver.
// Flows are numbered in the order each pair sends them.
func (d *cellDriver) openPairs() {
	s := d.s
	for i := range s.flows {
		fl := &s.flows[i]
		key := fl.Src*int32(s.f.hosts) + fl.Dst
		ci, ok := d.pair[key]
		if !ok {
			ci = d.newConn(fl.Src, fl.Dst)
			d.conns[ci].flow = -1
			d.pair[key] = ci
		}
		d.conns[ci].queue = append(d.conns[ci].queue, int32(i))
	}
	for ci := range d.conns {
		d.postRecvs(int32(ci), pairRanges)
	}
}

// queueFlows lays out the pair model's connection queues: each host
// pair's flows in the order they start.
func (d *cellDriver) queueFlows(order []int32) {
	if d.pair == nil || d.s.sched != nil {
		return
	}
	d.pairFlows = map[int32][]int32{}
	for _, i := range order {
		k := d.key(i)
		d.pairFlows[k] = append(d.pairFlows[k], i)
	}
}

// key names flow i's host pair.
func (d *cellDriver) key(i int32) int32 {
	fl := &d.s.flows[i]
	return fl.Src*int32(d.s.f.hosts) + fl.Dst
}

// openPair opens the connection of flow i's host pair (pair model),
// with the pair's first ranges posted at the receiver.
func (d *cellDriver) openPair(i int32) int32 {
	fl := &d.s.flows[i]
	k := d.key(i)
	ci := d.newConn(fl.Src, fl.Dst)
	c := &d.conns[ci]
	c.flow = -1
	c.queue = d.pairFlows[k]
	d.pair[k] = ci
	d.postRecvs(ci, pairRanges)
	return ci
}

// postRecvs posts up to n more of a pair connection's receive ranges,
// as many as the engine takes.
func (d *cellDriver) postRecvs(ci int32, n int) {
	s := d.s
	c := &d.conns[ci]
	posted := false
	for ; n > 0 && c.recvs < len(c.queue); n-- {
		fi := c.queue[c.recvs]
		err := c.eng[1].Recv(s.now, cell.RecvRange{Tag: uint64(fi), Addr: uint64(fi+1) << 32, RKey: 2, Len: s.flows[fi].Size})
		if errors.Is(err, cell.ErrBusy) {
			// Ranges are handed back as their finals come, not in
			// order: a slot frees only when the oldest is back.
			break
		} else if err != nil {
			panic(fmt.Sprintf("sim: flow %d: %v", fi, err)) // the driver keeps the engine's preconditions
		}
		c.recvs++
		posted = true
	}
	if posted {
		d.drain(ci, 1)
	}
}

// newConn creates a connection from src to dst: engines and QPs.
func (d *cellDriver) newConn(src, dst int32) int32 {
	s := d.s
	var ci int32
	if n := len(d.free); n > 0 {
		ci = d.free[n-1]
		d.free = d.free[:n-1]
	} else {
		d.conns = append(d.conns, conn{qp: make([]int32, 2*s.cfg.Paths), paths: make([]bind.Path, s.cfg.Paths)})
		ci = int32(len(d.conns) - 1)
	}
	c := &d.conns[ci]
	c.gen = (c.gen + 1) & 0x7fff
	c.tickAt, c.sent, c.done = [2]int64{}, false, [2]bool{}
	c.active, c.rr, c.pend, c.notBefore = [2]bool{}, [2]int{}, [2]uint64{}, [2]int64{}
	clear(c.paths)
	c.grants = c.grants[:0]
	for e := range 2 {
		if e == 0 && d.pair == nil {
			continue // built by send
		}
		c.eng[e] = d.engine(src, dst, e)
	}
	for p := range s.cfg.Paths {
		q0 := s.newQP(src, dst)
		q1 := s.newQP(dst, src)
		s.qps[q1].sport, s.qps[q1].dport = s.qps[q0].dport, s.qps[q0].sport
		for e, qi := range [2]int32{q0, q1} {
			q := &s.qps[qi]
			q.conn, q.path, q.end = ci, int16(p), int8(e)
			c.qp[2*p+e] = qi
		}
	}
	// The first Ready holds receive chains only: nothing to carry.
	for e := range int32(2) {
		if c.eng[e] != nil {
			d.drain(ci, e)
		}
	}
	return ci
}

// engine builds the engine of end e of a connection from src to dst, or
// resets a spare one.
func (d *cellDriver) engine(src, dst int32, e int) *cell.Engine {
	cfg := d.engineConfig(src, dst, e)
	if n := len(d.spare); n > 0 {
		eng := d.spare[n-1]
		d.spare = d.spare[:n-1]
		if err := eng.Reset(cfg); err != nil {
			panic(err) // validated in newCellDriver
		}
		return eng
	}
	eng, err := cell.New(cfg)
	if err != nil {
		panic(err)
	}
	return eng
}

// pick serves connection end u (conn·2 + end) at its host's NIC: the
// next of its QPs, round robin, with data and past its pacing gap. busy
// says some QP has data (else the end leaves the round robin).
func (d *cellDriver) pick(u int32, wake *int64) (qi int32, ready, busy bool) {
	s := d.s
	ci, end := u/2, int(u%2)
	c := &d.conns[ci]
	if nb := c.notBefore[end]; s.now < nb {
		if *wake < 0 || nb < *wake {
			*wake = nb
		}
		return -1, false, true
	}
	n := len(c.qp) / 2
	first := int64(-1)
	for k := range n {
		p := (c.rr[end] + k) % n
		if c.pend[end]&(1<<p) == 0 {
			continue
		}
		i := c.qp[2*p+end]
		q := &s.qps[i]
		if q.sndNxt >= q.total {
			c.pend[end] &^= 1 << p
			continue
		}
		busy = true
		if q.nextAvail > s.now {
			if first < 0 || q.nextAvail < first {
				first = q.nextAvail
			}
			continue
		}
		s.rateBeforeSend(q)
		c.rr[end] = (p + 1) % n
		c.notBefore[end] = 0
		return i, true, true
	}
	if !busy {
		c.active[end] = false
		return -1, false, false
	}
	c.notBefore[end] = first
	if *wake < 0 || first < *wake {
		*wake = first
	}
	return -1, false, true
}

// close releases a finished flow's connection.
func (d *cellDriver) close(ci int32) {
	s := d.s
	c := &d.conns[ci]
	d.connOf[c.flow] = -1
	for _, qi := range c.qp {
		s.qps[qi].conn = -1
		s.releaseQP(qi)
	}
	d.s.st.CellsReposted += c.eng[0].Stats().CellsReposted
	// Nothing refers to an engine's outputs once its connection is gone:
	// posts were copied into messages, and the QPs are released.
	for _, e := range c.eng {
		if e != nil {
			d.spare = append(d.spare, e)
		}
	}
	c.eng = [2]*cell.Engine{}
	c.gen = (c.gen + 1) & 0x7fff
	d.free = append(d.free, ci)
}

// send starts flow i: its range goes to the sender's engine.
func (d *cellDriver) send(i int32) {
	fl := &d.s.flows[i]
	var ci int32
	if d.pair != nil {
		var ok bool
		if ci, ok = d.pair[d.key(i)]; !ok {
			ci = d.openPair(i) // its receive post comes after it (RecvLead 0)
		}
	} else if ci = d.connOf[i]; ci < 0 {
		d.open(i)
		ci = d.connOf[i]
	}
	c := &d.conns[ci]
	c.sent = true
	if c.eng[0] == nil {
		c.eng[0] = d.engine(fl.Src, fl.Dst, 0)
		d.drain(ci, 0)
		for _, g := range c.grants {
			c.eng[0].Grant(d.s.now, g)
		}
		c.grants = c.grants[:0]
	}
	if len(c.waiting) > 0 || !d.trySend(ci, i) {
		c.waiting = append(c.waiting, i)
		d.maxWaiting = max(d.maxWaiting, len(c.waiting))
		return
	}
	d.drain(ci, 0)
}

// trySend hands flow i's range to its connection's sender engine; false
// means MaxRanges are outstanding and it must wait.
func (d *cellDriver) trySend(ci, i int32) bool {
	s := d.s
	err := d.conns[ci].eng[0].Send(s.now, cell.SendRange{Tag: uint64(i), Addr: uint64(i+1) << 32, LKey: 1, Len: s.flows[i].Size})
	switch {
	case errors.Is(err, cell.ErrBusy):
		return false
	case err != nil:
		// The driver keeps every engine precondition: this is a bug.
		panic(fmt.Sprintf("sim: flow %d: %v", i, err))
	}
	return true
}

// drain acts on an engine's Ready in its documented order (bind.Act).
// Engine inputs it leads to (more sends, more receives) come after, as
// new inputs.
func (d *cellDriver) drain(ci, end int32) {
	s := d.s
	c := &d.conns[ci]
	// No output reenters drain; the actor is kept as it was all the
	// same, and lives in d so that handing it to Act allocates nothing.
	outer := d.act
	d.act = cellActor{d: d, c: c, ci: ci, end: end}
	rd := bind.Act(c.eng[end], &d.act)
	recvd, sent := d.act.recvd, d.act.sent
	d.act = outer
	if c.queue == nil && c.done[0] && c.done[1] {
		d.close(ci)
		return
	}
	if dl := rd.Deadline; dl != 0 && (c.tickAt[end] == 0 || dl < c.tickAt[end]) {
		dl = max(dl, s.now)
		c.tickAt[end] = dl
		s.ev.push(dl, evTick, ci*2+end, c.gen)
	}
	// A pair connection stays: ranges handed back make room for the
	// next receives and sends. Those are new inputs, after this Ready is
	// spent.
	if recvd > 0 && c.recvs < len(c.queue) {
		d.postRecvs(ci, pairRanges)
	}
	if sent > 0 && len(c.waiting) > 0 {
		k := 0
		for k < len(c.waiting) && d.trySend(ci, c.waiting[k]) {
			k++
		}
		c.waiting = c.waiting[:copy(c.waiting, c.waiting[k:])]
		if k > 0 {
			d.drain(ci, 0)
		}
	}
}

// cellActor acts on a batch of end end of connection ci (bind.Actor):
// receives are the simulated QPs' concern, not the driver's, and the
// engines never fail (no path is ever closed).
type cellActor struct {
	d           *cellDriver
	c           *conn
	ci, end     int32
	recvd, sent int
}

func (a *cellActor) PostRecv(*cell.RecvPost) {}

func (a *cellActor) StartReset(r *cell.Reset) { a.d.reset(a.ci, int32(r.Path), a.end) }

func (a *cellActor) PostCell(p *cell.Post) {
	var n int64
	for wr := p.WR; wr != nil; wr = wr.Next {
		for _, sg := range wr.SGL {
			n += int64(sg.Length)
		}
	}
	m := msg{kind: mCell, bytes: max(n, 1), imm: p.Cell, raddr: p.WR.RemoteAddr}
	if p.Tail != nil {
		m.tail, m.hasTail = *p.Tail, true
		m.bytes += cell.TailSize
	}
	a.d.s.post(a.c.qp[2*p.Path+int(a.end)], m)
}

func (a *cellActor) WriteToken(t *cell.TokenWrite) {
	a.d.s.post(a.c.qp[2*t.Path+int(a.end)], msg{kind: mToken, bytes: cell.TokenSize, tok: t.Token})
}

func (a *cellActor) WriteGrant(g *cell.GrantWrite) {
	a.d.s.post(a.c.qp[2*g.Path+int(a.end)], msg{kind: mGrant, bytes: cell.GrantSize, grant: g.Grant})
}

func (a *cellActor) WriteFinal(f *cell.FinalWrite) {
	a.d.s.post(a.c.qp[2*f.Path+int(a.end)], msg{kind: mFinal, bytes: cell.FinalSize, fin: f.Final})
}

func (a *cellActor) WriteHold(h *cell.HoldWrite) {
	a.d.s.post(a.c.qp[2*h.Path+int(a.end)], msg{kind: mHold, bytes: cell.HoldSize, hold: h.Hold})
}

func (a *cellActor) WriteHoldAck(h *cell.HoldAckWrite) {
	a.d.s.post(a.c.qp[2*h.Path+int(a.end)], msg{kind: mHoldAck, bytes: cell.HoldSize, ack: h.Ack})
}

func (a *cellActor) Failed(error) {}

func (a *cellActor) Event(ev *cell.Event) {
	switch {
	case ev.Err != nil:
	case ev.Kind == cell.Sent:
		a.d.s.flowDone(int32(ev.Tag))
		a.sent++
	case ev.Kind == cell.Received:
		a.d.s.flowArrived(int32(ev.Tag))
		a.recvd++
	}
	a.c.done[a.end] = true
}

// deliver feeds a message that landed at the responder of QP q.
func (d *cellDriver) deliver(q *qp, m *msg) {
	s := d.s
	ci, end, path := q.conn, int32(1-q.end), int(q.path)
	if ci < 0 {
		return
	}
	e := d.conns[ci].eng[end]
	if e == nil {
		if m.kind == mGrant {
			d.conns[ci].grants = append(d.conns[ci].grants, m.grant)
		}
		return
	}
	switch m.kind {
	case mCell:
		if d.landed != nil {
			n := m.bytes
			if m.hasTail {
				n -= cell.TailSize
			}
			d.landed(m.raddr, n)
		}
		if m.hasTail {
			// Written within the chain, before its WRITE_WITH_IMM.
			e.Tail(s.now, m.tail)
		}
		_ = e.Completion(s.now, path, verbs.WC{Status: verbs.StatusSuccess, Opcode: verbs.OpRecvWriteImm,
			Flags: verbs.WCWithImm, ByteLen: uint32(min(m.bytes, int64(s.cfg.MTU))), Imm: m.imm})
	case mToken:
		e.Token(s.now, m.tok)
	case mGrant:
		e.Grant(s.now, m.grant)
	case mFinal:
		e.Final(s.now, m.fin)
	case mHold:
		e.Hold(s.now, m.hold)
	case mHoldAck:
		e.HoldAck(s.now, m.ack)
	}
	d.drain(ci, end)
}

// reset takes path p of connection ci through a QP reset, started by
// end: both directions flush now (their packets in flight are ignored on
// arrival), the peer's engine hears after errDelay, and both come back
// after QPReset.
func (d *cellDriver) reset(ci, p, end int32) {
	s := d.s
	c := &d.conns[ci]
	if !c.paths[p].StartReset() {
		return
	}
	c.notBefore = [2]int64{}
	s.st.PathResets++
	for k := range 2 {
		q := &s.qps[c.qp[2*int(p)+k]]
		q.dead = true
		q.epoch++
		q.msgs.head, q.msgs.tail, q.sndMsg = 0, 0, 0
		q.total, q.sndNxt, q.sndUna, q.rcvNxt = 0, 0, 0, 0
	}
	s.ev.push(s.now+d.errDelay, evPathDown, ci, c.gen<<16|(2*p+(1-end)))
	s.ev.push(s.now+s.cfg.QPReset, evPathUp, ci, c.gen<<16|p)
}

// event handles the driver's own events.
func (d *cellDriver) event(e *event) {
	s := d.s
	if e.kind == evRecvPost {
		if d.pair != nil {
			if _, ok := d.pair[d.key(e.a)]; !ok {
				d.openPair(e.a)
			}
			return
		}
		if d.connOf[e.a] < 0 && s.flows[e.a].Finish == 0 {
			d.open(e.a)
		}
		return
	}
	if e.kind == evTick {
		ci, end := e.a/2, e.a%2
		c := &d.conns[ci]
		if c.gen != e.b || c.tickAt[end] != e.at {
			return
		}
		c.tickAt[end] = 0
		c.eng[end].Tick(s.now)
		d.drain(ci, end)
		return
	}
	ci := e.a
	c := &d.conns[ci]
	if c.gen&0x7fff != e.b>>16 {
		return // the connection is gone
	}
	switch e.kind {
	case evPathDown:
		p, end := (e.b&0xffff)/2, (e.b&0xffff)%2
		_ = c.eng[end].PathFailed(s.now, int(p), errPeerReset)
		d.drain(ci, end)
	case evPathUp:
		p := e.b & 0xffff
		c.paths[p].EndReset(s.now, nil, int(p))
		for k := range 2 {
			q := &s.qps[c.qp[2*int(p)+k]]
			q.dead = false
			q.dc.init(s.cfg.Gbps, s.cfg.DCQCNKeepTarget)
		}
		for end := range int32(2) {
			if c.eng[end] == nil {
				return
			}
			_ = c.eng[end].PathReset(s.now, int(p))
			d.drain(ci, end)
		}
	}
}

func (d *cellDriver) stats(st *Stats) {
	for i := range d.conns {
		if e := d.conns[i].eng[0]; e != nil {
			st.CellsReposted += e.Stats().CellsReposted
		}
	}
}
