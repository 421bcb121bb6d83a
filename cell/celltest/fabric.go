package celltest

import (
	"container/heap"
	"fmt"
	"slices"

	"github.com/rdmacell/rdmacell/cell"
	"github.com/rdmacell/rdmacell/cell/bind"
	"github.com/rdmacell/rdmacell/verbs"
)

// Units of virtual time, in nanoseconds.
const (
	Microsecond = int64(1000)
	Millisecond = 1000 * Microsecond
)

type event struct {
	at  int64
	seq uint64
	fn  func()
}

type eventQueue []*event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(*event)) }
func (q *eventQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}

// MsgKind is what a message on a link carries.
type MsgKind uint8

// The kinds of messages.
const (
	MsgCell MsgKind = iota
	MsgToken
	MsgGrant
	MsgFinal
	MsgHold
	MsgHoldAck
)

func (k MsgKind) String() string {
	return [...]string{"cell", "token", "grant", "final", "hold", "hold-ack"}[k]
}

// wrCopy is a posted send request as the RNIC keeps it: the engine may
// reuse its storage once posted.
type wrCopy struct {
	id   uint64
	op   verbs.Opcode
	src  uint64
	n    uint32
	dst  uint64
	imm  uint32
	sgls int
}

// Msg is one posted chain or record on its way over a link.
type Msg struct {
	Kind MsgKind
	From *End
	Path int
	// Cell is a cell's id, Tail its range's tail if the cell carries it;
	// Token, Grant, Final, Hold and Ack the records.
	Cell    uint32
	Tail    cell.Tail
	HasTail bool
	Token   cell.Token
	Grant   cell.Grant
	Final   cell.Final
	Hold    cell.Hold
	Ack     cell.HoldAck
	// Size is the bytes it puts on the link.
	Size   int64
	epoch  int
	wrs    []wrCopy
	sentAt int64
}

// Verdict is a hook's decision about one message, taken when it is
// posted.
type Verdict struct {
	Drop    bool  // vanishes (tokens only: RC loses nothing else without the path failing)
	Delay   int64 // extra delay; later messages on the link wait behind it (RC order)
	Dup     bool  // control records arrive twice
	NACK    bool  // a token arrives as a NACK
	Fail    bool  // a cell's request fails: error completion at the sender
	Partial bool  // a cell's first request lands, then the path dies silently
}

// Link is one direction of a path.
type Link struct {
	Latency   int64 // ns
	PsPerByte int64 // transmission, picoseconds a byte
	busy      int64
	last      int64
	dead      bool
	// holding says messages posted wait in held, in order, until
	// Deliver lets them go (RC order: nothing overtakes them).
	holding bool
	held    []heldMsg
}

// heldMsg is a message a held link keeps, and its verdict.
type heldMsg struct {
	m *Msg
	v Verdict
}

// PathCtl is the state of a path's QP pair, both ends.
type PathCtl struct {
	epoch     int
	resetting bool
	// Permanent says resets fail: the path gets closed.
	Permanent bool
	// FailResets says that many more resets fail part way (both QPs
	// through ERR, connecting failed): the ends start over (ResetAgain).
	FailResets int
}

// End is one end of the connection: an engine and what its driver and
// its application know.
type End struct {
	f      *Fabric
	idx    int
	Name   string
	Engine *cell.Engine
	// paths is the end's binding state of each path: reset under way,
	// closed, token ring (Options.Ring).
	paths     []bind.Path
	recvIDs   [][]uint64 // ids of the receives posted per path, oldest first
	qpErr     []bool     // this end's QP is in ERR
	refill    []int      // length of the refill chain of each path's last Reset
	refillIDs [][]uint64 // and its ids
	// incarn[q] lists, per incarnation of path q, the receive ids posted
	// into it, in order (for scripts that feed arrivals by hand).
	incarn [][][]uint64
	lagged [][]func() // arrivals not yet read, per path (Options.CQLag)
	// back is, per path, the news of a reset done that this end has not
	// heard yet (Options.RecvResetLag).
	back  []*backNews
	held  [][]*Msg // tokens waiting for the next incarnation
	ticks map[int64]bool
	// the application: ranges it sends and receives, in order, and those
	// waiting for a slot (ErrBusy)
	sends, recvs       []*Xfer
	waitSend, waitRecv []*Xfer
	// TokensFor counts the tokens this end emitted, per cell id.
	TokensFor map[uint32]int
	// RecordsOn counts the grants, finals, holds and hold acks this end
	// wrote on each path.
	RecordsOn []int
	// Posts lists the cells this end posted, re-posts included.
	Posts []PostRec
	// ResetCauses lists the causes of the Resets this end asked for.
	ResetCauses []error
	// TokenArrivals lists the ids of the tokens delivered to this end.
	TokenArrivals []uint32
	closed        bool
}

// PostRec is one cell posted.
type PostRec struct {
	At   int64
	Path int
	ID   uint32
	N    int64
}

// Xfer is one range moved from end From to end To.
type Xfer struct {
	Tag      uint64
	From, To *End
	N        int64 // bytes sent
	RN       int64 // bytes of the receive range
	src, dst uint64
	// engine ownership: the memory is the engine's until its Event
	sendOwned, recvOwned bool
	// Sent and Recv are the events each end handed back; SentAt and
	// RecvAt when.
	Sent, Recv     []cell.Event
	SentAt, RecvAt int64
	// Corrupt says the bytes received were not those sent.
	Corrupt bool
}

// Options configure a Fabric.
type Options struct {
	Paths   int
	Config  cell.Config
	PolicyA func() cell.Policy
	PolicyB func() cell.Policy
	Latency int64
	// PsPerByte is per path; default 1000 (1 byte/ns).
	PsPerByte  []int64
	ErrDelay   int64 // from a reset's start to the peer's QP in ERR
	ResetDelay int64 // from a reset's start to both ends back
	RCTimeout  int64 // a dead link's requests fail after this
	// RecvResetLag delays B's PathReset after A's.
	RecvResetLag int64
	// Quiet: both ends get PathQuiet as soon as both QPs are in ERR.
	Quiet bool
	// CQLag: a cell's arrival reaches its engine this long after the cell
	// landed (the driver reads its CQ late), possibly after the path's
	// reset began; always before the path's PathReset, as drivers do.
	CQLag int64
	// LateRecords: a token posted while the QP is being reset goes out on
	// its next incarnation, as on a provider whose reinitialised QP takes
	// requests before it is connected.
	LateRecords bool
	// Ring: tokens land in the sender's token ring and are read as a
	// driver reads them (bind.TokenRing), only for the cells it posted on
	// that path (until the path's quiet or reset clears both); a token
	// for another cell lies in its slot until that cell is posted there,
	// or is overwritten.
	Ring bool
	// ManualResets: a reset ends only when ResetDone says so, not
	// ResetDelay after it began.
	ManualResets bool
	// Reuse: engines to Reset for A and B instead of building new ones.
	Reuse [2]*cell.Engine
}

// Fabric is two engines joined by paths on a virtual clock (see the
// package doc).
type Fabric struct {
	Opts Options
	// Now is the virtual time, in nanoseconds.
	Now  int64
	seq  uint64
	q    eventQueue
	Ends [2]*End
	// Links[from][path] are the links.
	Links [2][]*Link
	// Ctl[path] is each path's QP pair.
	Ctl      []*PathCtl
	mem      map[uint64][]byte
	nextBase uint64
	nextTag  uint64
	// Hook, if set, judges every message as it is posted.
	Hook func(m *Msg) Verdict
	// Violations lists what the engines did wrong.
	Violations []string
	// Xfers lists the ranges, in the order they were started.
	Xfers []*Xfer
	// Trace is the history of both ends.
	Trace bind.Trace
}

// DefaultOptions returns the options of the scenarios: P paths of
// 2 µs and 1 byte/ns, 16 KiB cells, a 20 µs error and 200 µs reset.
func DefaultOptions(paths int) Options {
	return Options{
		Paths: paths,
		Config: cell.Config{
			Paths:          paths,
			MTU:            4096,
			CellSize:       16 << 10,
			Window:         64,
			MaxRanges:      8,
			RecvDepth:      8,
			InitialRTT:     200_000,
			MinSoftTimeout: 100_000,
		},
		Latency:    2 * Microsecond,
		ErrDelay:   20 * Microsecond,
		ResetDelay: 200 * Microsecond,
		RCTimeout:  2 * Millisecond,
	}
}

// New returns a fabric with both engines built (or Reset, Options.Reuse)
// and their first batches acted on.
func New(o Options) (*Fabric, error) {
	f := &Fabric{Opts: o, mem: map[uint64][]byte{}, nextBase: 1 << 32}
	for i := range f.Ends {
		cfg := o.Config
		cfg.Paths = o.Paths
		cfg.Peer = [...]string{"B", "A"}[i]
		pol := o.PolicyA
		if i == 1 {
			pol = o.PolicyB
		}
		if pol != nil {
			cfg.Policy = pol()
		}
		e := o.Reuse[i]
		var err error
		if e != nil {
			err = e.Reset(cfg)
		} else {
			e, err = cell.New(cfg)
		}
		if err != nil {
			return nil, err
		}
		en := &End{f: f, idx: i, Name: [...]string{"A", "B"}[i], Engine: e,
			paths:   make([]bind.Path, o.Paths),
			recvIDs: make([][]uint64, o.Paths), qpErr: make([]bool, o.Paths), refill: make([]int, o.Paths), RecordsOn: make([]int, o.Paths),
			refillIDs: make([][]uint64, o.Paths), incarn: make([][][]uint64, o.Paths),
			lagged: make([][]func(), o.Paths), held: make([][]*Msg, o.Paths), back: make([]*backNews, o.Paths),
			ticks: map[int64]bool{}, TokensFor: map[uint32]int{}}
		window := e.Config().Window
		for q := range en.paths {
			en.paths[q].Tokens.Watch(func(t cell.Token) { f.Trace.Input(f.Now, en.Name, "token path=%d %s (ring)", t.Path, bind.Token(t)) })
			en.paths[q].Tokens.Init(make([]byte, window*cell.TokenSize), window, e.Config().RecvDepth)
			en.incarn[q] = [][]uint64{nil}
		}
		for q := range en.refill {
			en.refill[q] = -1
		}
		f.Ends[i] = en
		f.Links[i] = make([]*Link, o.Paths)
		for q := range f.Links[i] {
			ps := int64(1000)
			if q < len(o.PsPerByte) && o.PsPerByte[q] > 0 {
				ps = o.PsPerByte[q]
			}
			f.Links[i][q] = &Link{Latency: o.Latency, PsPerByte: ps}
		}
	}
	for range o.Paths {
		f.Ctl = append(f.Ctl, &PathCtl{})
	}
	for _, en := range f.Ends {
		f.drain(en)
	}
	return f, nil
}

func (f *Fabric) at(t int64, fn func()) {
	f.seq++
	heap.Push(&f.q, &event{at: max(t, f.Now), seq: f.seq, fn: fn})
}

func (f *Fabric) violate(format string, args ...any) {
	v := fmt.Sprintf(format, args...)
	f.Violations = append(f.Violations, fmt.Sprintf("t=%dns: ", f.Now)+v)
	f.note(nil, "VIOLATION %s", v)
}

func (en *End) peer() *End { return en.f.Ends[1-en.idx] }

// input runs one engine input and acts on the engine's outputs.
func (f *Fabric) input(en *End, fn func(e *cell.Engine)) {
	fn(en.Engine)
	f.drain(en)
}

// inputf is input, noted in the trace.
func (f *Fabric) inputf(en *End, fn func(e *cell.Engine), format string, args ...any) {
	f.Trace.Input(f.Now, en.Name, format, args...)
	f.input(en, fn)
}

// note notes in the trace what the fabric saw or did.
func (f *Fabric) note(en *End, format string, args ...any) {
	name := "-"
	if en != nil {
		name = en.Name
	}
	f.Trace.Note(f.Now, name, format, args...)
}

// drain acts on a Ready as a driver does (bind.Act). Anything that feeds
// an engine again is scheduled, never done inline.
func (f *Fabric) drain(en *End) {
	rd := bind.Act(en.Engine, (*actor)(en))
	f.Trace.Ready(f.Now, en.Name, rd)
	if d := rd.Deadline; d != 0 && !en.ticks[d] {
		en.ticks[d] = true
		f.at(d, func() {
			delete(en.ticks, d)
			f.inputf(en, func(e *cell.Engine) { e.Tick(f.Now) }, "tick")
		})
	}
}

// actor is an end acting on its engine's batch.
type actor End

func (a *actor) PostRecv(r *cell.RecvPost) {
	en := (*End)(a)
	ids := recvIDs(r.WR)
	if len(ids) != r.Count {
		en.f.violate("%s: receive chain on path %d has %d requests, Count says %d", en.Name, r.Path, len(ids), r.Count)
	}
	if !en.qpErr[r.Path] {
		en.recvIDs[r.Path] = append(en.recvIDs[r.Path], ids...)
		inc := en.incarn[r.Path]
		inc[len(inc)-1] = append(inc[len(inc)-1], ids...)
	}
}

func (a *actor) StartReset(r *cell.Reset) {
	en := (*End)(a)
	en.refillIDs[r.Path] = recvIDs(r.Refill)
	en.refill[r.Path] = len(en.refillIDs[r.Path])
	en.incarn[r.Path] = append(en.incarn[r.Path], slices.Clone(en.refillIDs[r.Path]))
	en.ResetCauses = append(en.ResetCauses, r.Cause)
	en.f.startReset(en, r.Path)
}

func (a *actor) PostCell(p *cell.Post) {
	en := (*End)(a)
	f := en.f
	m := &Msg{Kind: MsgCell, From: en, Path: p.Path, Cell: p.Cell}
	for wr := p.WR; wr != nil; wr = wr.Next {
		w := wrCopy{id: wr.ID, op: wr.Opcode, dst: wr.RemoteAddr, imm: wr.Imm, sgls: len(wr.SGL)}
		if len(wr.SGL) > 0 {
			w.src, w.n = wr.SGL[0].Addr, wr.SGL[0].Length
		}
		m.wrs = append(m.wrs, w)
		m.Size += int64(w.n)
	}
	en.Posts = append(en.Posts, PostRec{f.Now, p.Path, p.Cell, m.Size})
	if p.Tail != nil {
		m.Tail, m.HasTail = *p.Tail, true
		m.Size += cell.TailSize
	}
	f.send(m)
	if f.Opts.Ring {
		r := &en.paths[p.Path].Tokens
		r.Posted(p.Cell)
		if r.Waiting(p.Cell) {
			q := p.Path
			f.at(f.Now, func() { f.pollRing(en, q) })
		}
	}
}

func (a *actor) WriteToken(t *cell.TokenWrite) {
	en := (*End)(a)
	en.TokensFor[t.Token.ID]++
	en.f.send(&Msg{Kind: MsgToken, From: en, Path: t.Path, Token: t.Token, Size: cell.TokenSize})
}

func (a *actor) WriteGrant(g *cell.GrantWrite) {
	en := (*End)(a)
	en.RecordsOn[g.Path]++
	en.f.send(&Msg{Kind: MsgGrant, From: en, Path: g.Path, Grant: g.Grant, Size: cell.GrantSize})
}

func (a *actor) WriteFinal(fw *cell.FinalWrite) {
	en := (*End)(a)
	en.RecordsOn[fw.Path]++
	en.f.send(&Msg{Kind: MsgFinal, From: en, Path: fw.Path, Final: fw.Final, Size: cell.FinalSize})
}

func (a *actor) WriteHold(h *cell.HoldWrite) {
	en := (*End)(a)
	en.RecordsOn[h.Path]++
	en.f.send(&Msg{Kind: MsgHold, From: en, Path: h.Path, Hold: h.Hold, Size: cell.HoldSize})
}

func (a *actor) WriteHoldAck(h *cell.HoldAckWrite) {
	en := (*End)(a)
	en.RecordsOn[h.Path]++
	en.f.send(&Msg{Kind: MsgHoldAck, From: en, Path: h.Path, Ack: h.Ack, Size: cell.HoldSize})
}

// Failed: the connection failed, and the driver closes every QP, which
// the peer's driver sees as each path lost for good.
func (a *actor) Failed(error) {
	en := (*End)(a)
	f := en.f
	if en.closed {
		return
	}
	en.closed = true
	f.at(f.Now, func() {
		for q := range f.Ctl {
			f.Kill(q, true)
			peer := en.peer()
			cause := fmt.Errorf("peer %s closed the connection", en.Name)
			f.Trace.Input(f.Now, peer.Name, "dead path=%d: %v", q, cause)
			f.input(peer, func(e *cell.Engine) { peer.paths[q].Kill(f.Now, e, q, cause) })
		}
	})
}

func (a *actor) Event(ev *cell.Event) { (*End)(a).f.appEvent((*End)(a), *ev) }

// recvIDs lists the ids of a receive chain.
func recvIDs(wr *verbs.RecvWR) []uint64 {
	var ids []uint64
	for ; wr != nil; wr = wr.Next {
		ids = append(ids, wr.ID)
	}
	return ids
}

// pollRing feeds the tokens in en's ring for the cells it posted on path
// q, as a driver polls (bind.TokenRing).
func (f *Fabric) pollRing(en *End, q int) {
	if en.paths[q].Tokens.Poll(f.Now, en.Engine, q) {
		f.drain(en)
	}
}

// readArrivals hands en's engine every arrival on path q not read yet.
func (f *Fabric) readArrivals(en *End, q int) {
	for len(en.lagged[q]) > 0 {
		fn := en.lagged[q][0]
		en.lagged[q] = en.lagged[q][1:]
		fn()
	}
}

// send puts a message on its link.
func (f *Fabric) send(m *Msg) {
	en, q := m.From, m.Path
	m.epoch = f.Ctl[q].epoch
	m.sentAt = f.Now
	if en.qpErr[q] && f.Opts.LateRecords && m.Kind == MsgToken {
		en.held[q] = append(en.held[q], m)
		return
	}
	if en.qpErr[q] {
		// Posting on a QP in ERR flushes the request.
		f.at(f.Now+Microsecond, func() { f.completeErr(en, q, m.epoch, verbs.StatusWRFlush) })
		return
	}
	var v Verdict
	if f.Hook != nil {
		v = f.Hook(m)
	}
	l := f.Links[en.idx][q]
	if l.dead {
		f.at(f.Now+f.Opts.RCTimeout, func() { f.completeErr(en, q, m.epoch, verbs.StatusRetryExceeded) })
		return
	}
	if v.Drop && m.Kind == MsgToken {
		f.note(en, "lost token path=%d %s", q, bind.Token(m.Token))
		return
	}
	if v.NACK && m.Kind == MsgToken {
		m.Token.Status = cell.TokenNACK
		f.note(en, "token path=%d cell=%d turned into a NACK", q, m.Token.ID)
	}
	if v.Fail && m.Kind == MsgCell {
		f.note(en, "cell=%d fails on path=%d", m.Cell, q)
		f.at(f.Now+2*l.Latency, func() { f.completeErr(en, q, m.epoch, verbs.StatusRemoteAccess) })
		return
	}
	if v.Delay > 0 {
		f.note(en, "%v path=%d delayed %v", m.Kind, q, bind.Time(v.Delay))
	}
	if l.holding {
		l.held = append(l.held, heldMsg{m, v})
		return
	}
	f.transmit(l, m, v)
}

// transmit puts m on link l now, behind what the link carries.
func (f *Fabric) transmit(l *Link, m *Msg, v Verdict) {
	en, q := m.From, m.Path
	l.busy = max(l.busy, f.Now) + m.Size*l.PsPerByte/1000
	arrive := max(l.busy+l.Latency+v.Delay, l.last)
	l.last = arrive
	if v.Partial && m.Kind == MsgCell {
		f.note(en, "path=%d dies silently in cell=%d", q, m.Cell)
		m.wrs = m.wrs[:1]
		l.dead = true
		if m.wrs[0].op == verbs.OpWriteImm {
			m.wrs = nil // nothing but the tail: it is lost
		}
	}
	f.at(arrive, func() { f.deliver(m) })
	if v.Dup && m.Kind != MsgCell {
		f.at(arrive+l.Latency, func() { f.deliver(m) })
	}
}

// Hold makes the link from end from over path q keep what is posted on
// it, in order, until Deliver lets it go: a QP whose messages are stuck
// in the fabric, neither lost nor failed. A reset of the path flushes
// them, as it flushes an RC QP.
func (f *Fabric) Hold(from, q int) { f.Links[from][q].holding = true }

// Deliver lets the first n messages (all, if n < 0) held on the link from
// end from over path q go, in order, and ends the hold once none is
// left held. It returns how many it let go.
func (f *Fabric) Deliver(from, q, n int) int {
	l := f.Links[from][q]
	if n < 0 || n > len(l.held) {
		n = len(l.held)
	}
	for _, h := range l.held[:n] {
		f.transmit(l, h.m, h.v)
	}
	l.held = l.held[n:]
	if len(l.held) == 0 {
		l.holding = false
	}
	return n
}

func (f *Fabric) completeErr(en *End, q, epoch int, st verbs.Status) {
	if f.Ctl[q].epoch != epoch {
		return
	}
	f.inputf(en, func(e *cell.Engine) {
		must(e.Completion(f.Now, q, verbs.WC{ID: 1, Status: st, Opcode: verbs.OpWrite}))
	}, "completion path=%d %v", q, st)
}

// deliver lands a message at the far end of its link.
func (f *Fabric) deliver(m *Msg) {
	to, q := m.From.peer(), m.Path
	if m.epoch != f.Ctl[q].epoch || to.qpErr[q] {
		return
	}
	switch m.Kind {
	case MsgCell:
		for _, w := range m.wrs {
			if w.op == verbs.OpWriteImm && m.HasTail {
				// The tail is written within the chain, before the
				// WRITE_WITH_IMM that signals the cell.
				f.inputf(to, func(e *cell.Engine) { e.Tail(f.Now, m.Tail) }, "tail path=%d %s", q, bind.Tail(m.Tail))
			}
			f.write(m.From, to, q, w)
		}
	case MsgToken:
		to.TokenArrivals = append(to.TokenArrivals, m.Token.ID)
		if f.Opts.Ring {
			cell.PutToken(to.paths[q].Tokens.Slot(m.Token.ID), m.Token)
			f.pollRing(to, q)
			return
		}
		f.inputf(to, func(e *cell.Engine) { e.Token(f.Now, m.Token) }, "token path=%d %s", q, bind.Token(m.Token))
	case MsgGrant:
		f.inputf(to, func(e *cell.Engine) { e.Grant(f.Now, m.Grant) }, "grant path=%d %s", q, bind.Grant(m.Grant))
	case MsgFinal:
		f.inputf(to, func(e *cell.Engine) { e.Final(f.Now, m.Final) }, "final path=%d %s", q, bind.Final(m.Final))
	case MsgHold:
		f.inputf(to, func(e *cell.Engine) { e.Hold(f.Now, m.Hold) }, "hold path=%d seq=%d", q, m.Hold.Seq)
	case MsgHoldAck:
		f.inputf(to, func(e *cell.Engine) { e.HoldAck(f.Now, m.Ack) }, "hold-ack path=%d %s", q, bind.HoldAck(m.Ack))
	}
}

// write performs one RDMA write of a cell, policing both memories.
func (f *Fabric) write(from, to *End, q int, w wrCopy) {
	n := int64(w.n)
	if n > 0 {
		if !f.owned(from, w.src, n, true) {
			f.violate("%s path %d: copy reads %d bytes at %#x, memory no longer the engine's", from.Name, q, n, w.src)
		}
		if !f.owned(to, w.dst, n, false) {
			f.violate("%s path %d: write of %d bytes at %#x into memory not granted or already handed back", to.Name, q, n, w.dst)
		}
		copy(f.slice(w.dst, n), f.slice(w.src, n))
	}
	if w.op != verbs.OpWriteImm {
		return
	}
	if len(to.recvIDs[q]) == 0 {
		f.violate("%s path %d: WRITE_WITH_IMM of cell %d found no receive posted (flow control exceeded)", to.Name, q, w.imm)
		return
	}
	recv := to.recvIDs[q][0]
	to.recvIDs[q] = to.recvIDs[q][1:]
	read := func() {
		f.inputf(to, func(e *cell.Engine) {
			must(e.Completion(f.Now, q, verbs.WC{ID: recv, Status: verbs.StatusSuccess, Opcode: verbs.OpRecvWriteImm,
				Flags: verbs.WCWithImm, ByteLen: w.n, Imm: w.imm}))
		}, "arrive path=%d cell=%d", q, w.imm)
	}
	if f.Opts.CQLag == 0 {
		read()
		return
	}
	to.lagged[q] = append(to.lagged[q], read)
	f.at(f.Now+f.Opts.CQLag, func() {
		// The oldest arrival not read yet, which need not be this one: a
		// reset reads every arrival at once (readArrivals). A CQ hands
		// each completion out once, in order.
		if len(to.lagged[q]) > 0 {
			fn := to.lagged[q][0]
			to.lagged[q] = to.lagged[q][1:]
			fn()
		}
	})
}

func (f *Fabric) owned(en *End, addr uint64, n int64, send bool) bool {
	for _, x := range f.Xfers {
		if send && x.From == en && x.sendOwned && addr >= x.src && addr+uint64(n) <= x.src+uint64(x.N) {
			return true
		}
		if !send && x.To == en && x.recvOwned && addr >= x.dst && addr+uint64(n) <= x.dst+uint64(x.RN) {
			return true
		}
	}
	return false
}

// startReset begins (or joins) the reset of path q: this end's QP goes to
// ERR now, the peer's after ErrDelay (when it is told, and its engine
// gives the path up too), and both come back after ResetDelay (or when
// the script says so, Options.ManualResets).
func (f *Fabric) startReset(en *End, q int) {
	c := f.Ctl[q]
	en.hearBack(q)
	en.qpErr[q] = true
	en.recvIDs[q] = nil
	en.paths[q].StartReset()
	if c.resetting {
		return
	}
	c.resetting = true
	peer := en.peer()
	epoch := c.epoch
	f.at(f.Now+f.Opts.ErrDelay, func() {
		if c.epoch != epoch {
			return
		}
		peer.hearBack(q)
		peer.qpErr[q] = true
		peer.recvIDs[q] = nil
		peer.paths[q].StartReset()
		cause := fmt.Errorf("peer %s resets path %d", en.Name, q)
		f.inputf(peer, func(e *cell.Engine) { must(e.PathFailed(f.Now, q, cause)) }, "path-failed path=%d: %v", q, cause)
		if f.Opts.Quiet {
			for _, x := range f.Ends {
				f.readArrivals(x, q)
				f.inputf(x, func(e *cell.Engine) { x.paths[q].Quiet(f.Now, e, q) }, "quiet path=%d", q)
			}
		}
	})
	if !f.Opts.ManualResets {
		f.at(f.Now+f.Opts.ResetDelay, func() {
			if c.resetting && c.epoch == epoch { // not ended by ResetDone
				f.finishReset(q)
			}
		})
	}
}

// ResetDone ends the reset of path q under way now, as its scripted
// delay would (Options.ManualResets). It reports whether one was.
func (f *Fabric) ResetDone(q int) bool {
	if q < 0 || q >= len(f.Ctl) || !f.Ctl[q].resetting {
		return false
	}
	f.finishReset(q)
	return true
}

func (f *Fabric) finishReset(q int) {
	c := f.Ctl[q]
	c.resetting = false
	c.epoch++
	for i := range f.Links {
		l := f.Links[i][q]
		*l = Link{Latency: l.Latency, PsPerByte: l.PsPerByte, dead: c.Permanent}
	}
	if c.Permanent {
		for _, en := range f.Ends {
			cause := fmt.Errorf("path %d unreachable", q)
			f.inputf(en, func(e *cell.Engine) { en.paths[q].Kill(f.Now, e, q, cause) }, "dead path=%d: %v", q, cause)
		}
		return
	}
	if c.FailResets > 0 {
		// Both QPs went through ERR, then connecting failed: each end
		// starts over with a new incarnation.
		c.FailResets--
		for _, en := range f.Ends {
			f.readArrivals(en, q)
			cause := fmt.Errorf("connecting path %d failed", q)
			f.inputf(en, func(e *cell.Engine) {
				en.paths[q].EndReset(f.Now, e, q)
				must(e.ResetAgain(f.Now, q, cause))
			}, "reset-again path=%d: %v", q, cause)
		}
		return
	}
	for _, en := range f.Ends {
		if en.Engine.Err() == nil && en.refill[q] < 0 {
			f.violate("%s: path %d reset without a Reset (no refill chain)", en.Name, q)
		}
		en.qpErr[q] = false
		en.recvIDs[q] = slices.Clone(en.refillIDs[q])
		for _, m := range en.held[q] {
			f.send(m)
		}
		en.held[q] = nil
		lag := int64(0)
		if en.idx == 1 {
			lag = f.Opts.RecvResetLag
		}
		b := &backNews{}
		b.hear = func() {
			if b.heard {
				return
			}
			b.heard = true
			if en.back[q] == b {
				en.back[q] = nil
			}
			f.readArrivals(en, q)
			f.inputf(en, func(e *cell.Engine) { en.paths[q].Back(f.Now, e, q) }, "reset-done path=%d", q)
		}
		en.back[q] = b
		f.at(f.Now+lag, b.hear)
	}
}

// backNews is an end's news that a reset of a path is done.
type backNews struct {
	hear  func()
	heard bool
}

// hearBack tells the end a reset of path q is done if it has not heard
// yet: a driver hears of one reset before it is asked for the next, since
// the resets of a path are one after the other at both ends.
func (en *End) hearBack(q int) {
	if b := en.back[q]; b != nil {
		b.hear()
	}
}

// Kill makes path q silently drop everything, both ways, from now on; it
// heals when reset unless permanent.
func (f *Fabric) Kill(q int, permanent bool) {
	f.note(nil, "path=%d killed (permanent %v)", q, permanent)
	f.Links[0][q].dead = true
	f.Links[1][q].dead = true
	f.Ctl[q].Permanent = permanent
}

func (f *Fabric) alloc(n int64) uint64 {
	base := f.nextBase
	f.nextBase += 1 << 32
	f.mem[base] = make([]byte, max(n, 1))
	return base
}

func (f *Fabric) slice(addr uint64, n int64) []byte {
	base := addr &^ (1<<32 - 1)
	b, ok := f.mem[base]
	if !ok {
		panic(fmt.Sprintf("address %#x not allocated", addr))
	}
	off := addr - base
	return b[off : off+uint64(n)]
}

func pattern(tag uint64, i int64) byte { return byte(uint64(i)*131 + tag*29 + uint64(i)>>9) }

// Transfer moves n bytes from end from (0 for A, 1 for B) to the other
// end: the receiver posts its range and the sender its own, recvFirst
// saying in which order.
func (f *Fabric) Transfer(from int, n int64, recvFirst bool) *Xfer {
	return f.TransferInto(from, n, n, recvFirst)
}

// TransferInto is Transfer into a receive range of rn bytes.
func (f *Fabric) TransferInto(from int, n, rn int64, recvFirst bool) *Xfer {
	f.nextTag++
	x := &Xfer{Tag: f.nextTag, From: f.Ends[from], To: f.Ends[1-from], N: n, RN: rn, src: f.alloc(n), dst: f.alloc(rn)}
	src := f.slice(x.src, n)
	for i := range src {
		src[i] = pattern(x.Tag, int64(i))
	}
	f.Xfers = append(f.Xfers, x)
	x.From.sends = append(x.From.sends, x)
	x.To.recvs = append(x.To.recvs, x)
	if recvFirst {
		x.To.waitRecv = append(x.To.waitRecv, x)
		x.From.waitSend = append(x.From.waitSend, x)
	} else {
		x.From.waitSend = append(x.From.waitSend, x)
		x.To.waitRecv = append(x.To.waitRecv, x)
	}
	f.at(f.Now, func() { f.submit(x.To); f.submit(x.From) })
	return x
}

// submit hands waiting ranges to the engine until it is busy.
func (f *Fabric) submit(en *End) {
	for len(en.waitRecv) > 0 && f.submitOne(en, &en.waitRecv, cell.Received, func(x *Xfer) error {
		return en.Engine.Recv(f.Now, cell.RecvRange{Tag: x.Tag, Addr: x.dst, RKey: 0x1000 + uint32(x.Tag), Len: x.RN})
	}) {
	}
	for len(en.waitSend) > 0 && f.submitOne(en, &en.waitSend, cell.Sent, func(x *Xfer) error {
		return en.Engine.Send(f.Now, cell.SendRange{Tag: x.Tag, Addr: x.src, LKey: 0x2000 + uint32(x.Tag), Len: x.N})
	}) {
	}
}

// submitOne hands the first range waiting in *wait to the engine with
// post, and reports whether the next may go: this one was taken, or
// failed for good with the connection.
func (f *Fabric) submitOne(en *End, wait *[]*Xfer, kind cell.EventKind, post func(x *Xfer) error) bool {
	x := (*wait)[0]
	n := x.N
	if kind == cell.Received {
		n = x.RN
	}
	verb := map[cell.EventKind]string{cell.Sent: "send", cell.Received: "recv"}[kind]
	f.Trace.Input(f.Now, en.Name, "%s tag=%d len=%d", verb, x.Tag, n)
	err := post(x)
	if err != nil {
		f.note(en, "%s tag=%d refused: %v", verb, x.Tag, err)
		f.drain(en)
		if en.Engine.Err() == nil {
			return false // busy: the engine takes it once a range is back
		}
	}
	ev := cell.Event{Kind: kind, Tag: x.Tag, Err: err}
	switch {
	case err != nil && kind == cell.Sent:
		x.Sent = append(x.Sent, ev)
	case err != nil:
		x.Recv = append(x.Recv, ev)
	case kind == cell.Sent:
		x.sendOwned = true
	default:
		x.recvOwned = true
	}
	*wait = (*wait)[1:]
	if err == nil {
		f.drain(en)
	}
	return true
}

// appEvent is the application taking a range back: it checks a received
// range's bytes, then reuses the memory at once (scribbles over it), so
// that a late write or read would show.
func (f *Fabric) appEvent(en *End, ev cell.Event) {
	var x *Xfer
	for _, y := range f.Xfers {
		if y.Tag == ev.Tag {
			x = y
		}
	}
	if x == nil {
		f.violate("%s: event for unknown tag %d", en.Name, ev.Tag)
		return
	}
	switch ev.Kind {
	case cell.Sent:
		x.Sent = append(x.Sent, ev)
		x.SentAt = f.Now
		if ev.Err == nil {
			// A failed range's memory may still be read by copies on paths
			// being reset; the application waits for the driver's teardown,
			// which these tests never declare done.
			x.sendOwned = false
			clear(f.slice(x.src, x.N))
		}
	case cell.Received:
		x.Recv = append(x.Recv, ev)
		x.RecvAt = f.Now
		if ev.Err != nil {
			break
		}
		x.recvOwned = false
		if ev.Len != x.N {
			f.violate("%s: tag %d received %d bytes, sent %d", en.Name, ev.Tag, ev.Len, x.N)
		}
		b := f.slice(x.dst, min(x.N, x.RN))
		for i := range b {
			if b[i] != pattern(x.Tag, int64(i)) {
				x.Corrupt = true
				f.violate("%s: tag %d byte %d is %#x, want %#x", en.Name, ev.Tag, i, b[i], pattern(x.Tag, int64(i)))
				break
			}
		}
		b = f.slice(x.dst, x.RN)
		for i := range b {
			b[i] = 0xEE
		}
	}
	if len(en.waitSend) > 0 || len(en.waitRecv) > 0 {
		f.at(f.Now, func() { f.submit(en) })
	}
}

// At runs fn at virtual time t (now, if t has passed).
func (f *Fabric) At(t int64, fn func()) { f.at(t, fn) }

// Done reports whether every range has its events at both ends.
func (f *Fabric) Done() bool {
	for _, x := range f.Xfers {
		if len(x.Sent) == 0 || len(x.Recv) == 0 {
			return false
		}
	}
	return true
}

// Run processes events until every range is done, or until the virtual
// time limit.
func (f *Fabric) Run(limit int64) {
	for f.q.Len() > 0 && !f.Done() {
		ev := heap.Pop(&f.q).(*event)
		if ev.at > limit {
			heap.Push(&f.q, ev)
			return
		}
		f.Now = ev.at
		ev.fn()
	}
}

// RunFor processes every event up to time t.
func (f *Fabric) RunFor(t int64) {
	for f.q.Len() > 0 && f.q[0].at <= t {
		ev := heap.Pop(&f.q).(*event)
		f.Now = ev.at
		ev.fn()
	}
	f.Now = max(f.Now, t)
}

// BytesOn sums the bytes end en posted on each path.
func (en *End) BytesOn() []int64 {
	out := make([]int64, len(en.qpErr))
	for _, p := range en.Posts {
		out[p.Path] += p.N
	}
	return out
}

// CellsOn counts the cells end en posted on each path.
func (en *End) CellsOn() []int {
	out := make([]int, len(en.qpErr))
	for _, p := range en.Posts {
		out[p.Path]++
	}
	return out
}

// PostedIDs lists the distinct cell ids end en posted, in first-post
// order.
func (en *End) PostedIDs() []uint32 {
	var ids []uint32
	for _, p := range en.Posts {
		if !slices.Contains(ids, p.ID) {
			ids = append(ids, p.ID)
		}
	}
	return ids
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}
