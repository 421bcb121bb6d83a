package cell_test

import (
	"container/heap"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/rdmacell/rdmacell/cell"
	"github.com/rdmacell/rdmacell/verbs"
)

// The fabric is the tests' wire: two engines, A (end 0) and B (end 1),
// joined by P paths, on a virtual clock. It plays both drivers: it posts
// what the engines emit, moves it over per-path links with a latency and
// a bandwidth (in order, as RC does), performs the writes on a simulated
// address space, feeds completions, tokens, grants and finals back, and
// resets paths the way the drivers will. Faults are injected per message
// through hooks. It also polices the engines: a write into memory that is
// not granted, or that was already handed back; a copy read from send
// memory already handed back; a WRITE_WITH_IMM finding no posted receive.
// Each is recorded as a violation.

const (
	us = int64(1000)
	ms = 1000 * us
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

type msgKind uint8

const (
	mCell msgKind = iota
	mToken
	mGrant
	mFinal
)

func (k msgKind) String() string { return [...]string{"cell", "token", "grant", "final"}[k] }

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

type msg struct {
	kind   msgKind
	from   *end
	path   int
	epoch  int
	wrs    []wrCopy
	cellID uint32
	token  cell.Token
	grant  cell.Grant
	final  cell.Final
	size   int64
	sentAt int64
}

// verdict is a hook's decision about one message, taken when it is
// posted.
type verdict struct {
	drop    bool  // vanishes (tokens only: RC loses nothing else without the path failing)
	delay   int64 // extra delay; later messages on the link wait behind it (RC order)
	dup     bool  // control records arrive twice
	nack    bool  // a token arrives as a NACK
	fail    bool  // a cell's request fails: error completion at the sender
	partial bool  // a cell's first request lands, then the path dies silently
}

type link struct {
	latency   int64
	psPerByte int64
	busy      int64
	last      int64
	dead      bool
}

type pathCtl struct {
	epoch     int
	resetting bool
	permanent bool // resets fail: the path gets closed
}

type logEntry struct {
	at   int64
	what string
}

type end struct {
	f         *fabric
	idx       int
	name      string
	e         *cell.Engine
	recvIDs   [][]uint64 // ids of the receives posted per path, oldest first
	qpErr     []bool     // this end's QP is in ERR
	refill    []int      // length of the refill chain of each path's last Reset
	refillIDs [][]uint64 // and its ids
	// the driver's side of the token ring (fabricOpts.ring): per path
	// the ids posted and not yet settled, and the ring's slots
	fifo   [][]uint32
	ring   []map[uint32]cell.Token
	lagged [][]func() // arrivals not yet read, per path (fabricOpts.cqLag)
	held   [][]*msg   // tokens waiting for the next incarnation
	ticks  map[int64]bool
	// the application: ranges it sends and receives, in order, and those
	// waiting for a slot (ErrBusy)
	sends, recvs       []*xfer
	waitSend, waitRecv []*xfer
	tokensFor          map[uint32]int // tokens this end emitted, per id
	posts              []postRec
	resetCauses        []error
	tokenArrivals      []uint32 // ids of tokens delivered to this end, in order
	log                []logEntry
	closed             bool
}

type postRec struct {
	at   int64
	path int
	id   uint32
	n    int64
}

// xfer is one range moved from end from to end to.
type xfer struct {
	tag      uint64
	from, to *end
	n        int64 // bytes sent
	rn       int64 // bytes of the receive range
	src, dst uint64
	// engine ownership: the memory is the engine's until its Event
	sendOwned, recvOwned bool
	sent, recv           []cell.Event
	sentAt, recvAt       int64
	corrupt              bool
}

type fabricOpts struct {
	paths      int
	cfg        cell.Config
	policyA    func() cell.Policy
	policyB    func() cell.Policy
	latency    int64
	psPerByte  []int64 // per path; default 1000 (1 byte/ns)
	errDelay   int64   // from a reset's start to the peer's QP in ERR
	resetDelay int64   // from a reset's start to both ends back
	rcTimeout  int64   // a dead link's requests fail after this
	// recvResetLag delays B's PathReset after A's.
	recvResetLag int64
	// quiet: both ends get PathQuiet as soon as both QPs are in ERR.
	quiet bool
	// cqLag: a cell's arrival reaches its engine this long after the cell
	// landed (the driver reads its CQ late), possibly after the path's
	// reset began; always before the path's PathReset, as drivers do.
	cqLag int64
	// lateRecords: a token posted while the QP is being reset goes out on
	// its next incarnation, as on a provider whose reinitialised QP takes
	// requests before it is connected.
	lateRecords bool
	// ring: tokens land in the sender's ring and are read as a driver
	// reads them, only for the cells it posted on that path (until the
	// path's quiet or reset clears both); a token for another cell lies
	// in its slot until that cell is posted there, or is overwritten.
	ring bool
	// reuse: engines to Reset for A and B instead of building new ones.
	reuse [2]*cell.Engine
}

type fabric struct {
	opts       fabricOpts
	now        int64
	seq        uint64
	q          eventQueue
	ends       [2]*end
	links      [2][]*link // links[from][path]
	ctl        []*pathCtl
	mem        map[uint64][]byte
	nextBase   uint64
	nextTag    uint64
	hook       func(m *msg) verdict
	violations []string
	xfers      []*xfer
	events     int
}

func defaultOpts(paths int) fabricOpts {
	return fabricOpts{
		paths: paths,
		cfg: cell.Config{
			Paths:          paths,
			MTU:            4096,
			CellSize:       16 << 10,
			Window:         64,
			MaxRanges:      8,
			RecvDepth:      8,
			InitialRTT:     200_000,
			MinSoftTimeout: 100_000,
		},
		latency:    2 * us,
		errDelay:   20 * us,
		resetDelay: 200 * us,
		rcTimeout:  2 * ms,
	}
}

func newFabric(o fabricOpts) (*fabric, error) {
	f := &fabric{opts: o, mem: map[uint64][]byte{}, nextBase: 1 << 32}
	for i := range f.ends {
		cfg := o.cfg
		cfg.Paths = o.paths
		cfg.Peer = [...]string{"B", "A"}[i]
		pol := o.policyA
		if i == 1 {
			pol = o.policyB
		}
		if pol != nil {
			cfg.Policy = pol()
		}
		e := o.reuse[i]
		var err error
		if e != nil {
			err = e.Reset(cfg)
		} else {
			e, err = cell.New(cfg)
		}
		if err != nil {
			return nil, err
		}
		en := &end{f: f, idx: i, name: [...]string{"A", "B"}[i], e: e,
			recvIDs: make([][]uint64, o.paths), qpErr: make([]bool, o.paths), refill: make([]int, o.paths),
			refillIDs: make([][]uint64, o.paths), fifo: make([][]uint32, o.paths), ring: make([]map[uint32]cell.Token, o.paths),
			lagged: make([][]func(), o.paths), held: make([][]*msg, o.paths),
			ticks: map[int64]bool{}, tokensFor: map[uint32]int{}}
		for q := range en.ring {
			en.ring[q] = map[uint32]cell.Token{}
		}
		for q := range en.refill {
			en.refill[q] = -1
		}
		f.ends[i] = en
		f.links[i] = make([]*link, o.paths)
		for q := range f.links[i] {
			ps := int64(1000)
			if q < len(o.psPerByte) && o.psPerByte[q] > 0 {
				ps = o.psPerByte[q]
			}
			f.links[i][q] = &link{latency: o.latency, psPerByte: ps}
		}
	}
	for range o.paths {
		f.ctl = append(f.ctl, &pathCtl{})
	}
	for _, en := range f.ends {
		f.drain(en)
	}
	return f, nil
}

func (f *fabric) at(t int64, fn func()) {
	f.seq++
	heap.Push(&f.q, &event{at: max(t, f.now), seq: f.seq, fn: fn})
}

func (f *fabric) violate(format string, args ...any) {
	f.violations = append(f.violations, fmt.Sprintf("t=%dns: ", f.now)+fmt.Sprintf(format, args...))
}

func (en *end) logf(format string, args ...any) {
	en.log = append(en.log, logEntry{en.f.now, fmt.Sprintf(format, args...)})
}

func (en *end) peer() *end { return en.f.ends[1-en.idx] }

// input runs one engine input and acts on the engine's outputs.
func (f *fabric) input(en *end, fn func(e *cell.Engine)) {
	fn(en.e)
	f.drain(en)
}

// drain acts on a Ready as a driver does, in its documented order.
// Anything that feeds an engine again is scheduled, never done inline.
func (f *fabric) drain(en *end) {
	rd := en.e.Ready()
	for _, r := range rd.Recvs {
		ids := recvIDs(r.WR)
		if len(ids) != r.Count {
			f.violate("%s: receive chain on path %d has %d requests, Count says %d", en.name, r.Path, len(ids), r.Count)
		}
		if !en.qpErr[r.Path] {
			en.recvIDs[r.Path] = append(en.recvIDs[r.Path], ids...)
		}
	}
	for _, r := range rd.Resets {
		en.refillIDs[r.Path] = recvIDs(r.Refill)
		en.refill[r.Path] = len(en.refillIDs[r.Path])
		en.resetCauses = append(en.resetCauses, r.Cause)
		en.logf("reset path %d: %v", r.Path, r.Cause)
		f.startReset(en, r.Path)
	}
	for _, p := range rd.Posts {
		m := &msg{kind: mCell, from: en, path: p.Path, cellID: p.Cell}
		for wr := p.WR; wr != nil; wr = wr.Next {
			w := wrCopy{id: wr.ID, op: wr.Opcode, dst: wr.RemoteAddr, imm: wr.Imm, sgls: len(wr.SGL)}
			if len(wr.SGL) > 0 {
				w.src, w.n = wr.SGL[0].Addr, wr.SGL[0].Length
			}
			m.wrs = append(m.wrs, w)
			m.size += int64(w.n)
		}
		en.posts = append(en.posts, postRec{f.now, p.Path, p.Cell, m.size})
		f.send(m)
		if f.opts.ring {
			en.fifo[p.Path] = append(en.fifo[p.Path], p.Cell)
			if _, ok := en.ring[p.Path][f.slot(p.Cell)]; ok {
				f.at(f.now, func() { f.pollRing(en, p.Path) })
			}
		}
	}
	for _, t := range rd.Tokens {
		en.tokensFor[t.Token.ID]++
		f.send(&msg{kind: mToken, from: en, path: t.Path, token: t.Token, size: cell.TokenSize})
	}
	for _, g := range rd.Grants {
		f.send(&msg{kind: mGrant, from: en, path: g.Path, grant: g.Grant, size: cell.GrantSize})
	}
	for _, fi := range rd.Finals {
		f.send(&msg{kind: mFinal, from: en, path: fi.Path, final: fi.Final, size: cell.FinalSize})
	}
	for _, ev := range rd.Events {
		f.appEvent(en, ev)
	}
	if en.e.Err() != nil && !en.closed {
		// The connection failed: the driver closes every QP, which the
		// peer's driver sees as each path lost for good.
		en.closed = true
		f.at(f.now, func() {
			for q := range f.ctl {
				f.kill(q, true)
				peer := en.peer()
				f.input(peer, func(e *cell.Engine) { must(e.PathDead(f.now, q, fmt.Errorf("peer %s closed the connection", en.name))) })
			}
		})
	}
	if d := rd.Deadline; d != 0 && !en.ticks[d] {
		en.ticks[d] = true
		f.at(d, func() {
			delete(en.ticks, d)
			f.input(en, func(e *cell.Engine) { e.Tick(f.now) })
		})
	}
}

// recvIDs lists the ids of a receive chain.
func recvIDs(wr *verbs.RecvWR) []uint64 {
	var ids []uint64
	for ; wr != nil; wr = wr.Next {
		ids = append(ids, wr.ID)
	}
	return ids
}

// slot is the token ring slot of cell id.
func (f *fabric) slot(id uint32) uint32 {
	w := f.opts.cfg.Window
	if w == 0 {
		w = 1024
	}
	return id & uint32(w-1)
}

// pollRing feeds the tokens in en's ring for the cells it posted on path
// q, as a driver polls, and settles them and every cell before them.
func (f *fabric) pollRing(en *end, q int) {
	last := -1
	var found []cell.Token
	for i, id := range en.fifo[q] {
		if t, ok := en.ring[q][f.slot(id)]; ok && t.ID == id && t.Path == q {
			delete(en.ring[q], f.slot(id))
			found = append(found, t)
			last = i
		}
	}
	en.fifo[q] = en.fifo[q][last+1:]
	for _, t := range found {
		f.input(en, func(e *cell.Engine) { e.Token(f.now, t) })
	}
}

// clearRing drops path q's ring and posted ids after a last poll, as a
// driver does when the path's old incarnation is gone.
func (f *fabric) clearRing(en *end, q int) {
	if !f.opts.ring {
		return
	}
	f.pollRing(en, q)
	en.fifo[q] = nil
	clear(en.ring[q])
}

// readArrivals hands en's engine every arrival on path q not read yet.
func (f *fabric) readArrivals(en *end, q int) {
	for len(en.lagged[q]) > 0 {
		fn := en.lagged[q][0]
		en.lagged[q] = en.lagged[q][1:]
		fn()
	}
}

// send puts a message on its link.
func (f *fabric) send(m *msg) {
	en, q := m.from, m.path
	m.epoch = f.ctl[q].epoch
	m.sentAt = f.now
	if en.qpErr[q] && f.opts.lateRecords && m.kind == mToken {
		en.held[q] = append(en.held[q], m)
		return
	}
	if en.qpErr[q] {
		// Posting on a QP in ERR flushes the request.
		f.at(f.now+us, func() { f.completeErr(en, q, m.epoch, verbs.StatusWRFlush) })
		return
	}
	var v verdict
	if f.hook != nil {
		v = f.hook(m)
	}
	l := f.links[en.idx][q]
	if l.dead {
		f.at(f.now+f.opts.rcTimeout, func() { f.completeErr(en, q, m.epoch, verbs.StatusRetryExceeded) })
		return
	}
	if v.drop && m.kind == mToken {
		return
	}
	if v.nack && m.kind == mToken {
		m.token.Status = cell.TokenNACK
	}
	if v.fail && m.kind == mCell {
		f.at(f.now+2*l.latency, func() { f.completeErr(en, q, m.epoch, verbs.StatusRemoteAccess) })
		return
	}
	l.busy = max(l.busy, f.now) + m.size*l.psPerByte/1000
	arrive := max(l.busy+l.latency+v.delay, l.last)
	l.last = arrive
	if v.partial && m.kind == mCell {
		m.wrs = m.wrs[:1]
		l.dead = true
		if m.wrs[0].op == verbs.OpWriteImm {
			m.wrs = nil // nothing but the tail: it is lost
		}
	}
	f.at(arrive, func() { f.deliver(m) })
	if v.dup && m.kind != mCell {
		f.at(arrive+l.latency, func() { f.deliver(m) })
	}
}

func (f *fabric) completeErr(en *end, q, epoch int, st verbs.Status) {
	if f.ctl[q].epoch != epoch {
		return
	}
	f.input(en, func(e *cell.Engine) {
		must(e.Completion(f.now, q, verbs.WC{ID: 1, Status: st, Opcode: verbs.OpWrite}))
	})
}

// deliver lands a message at the far end of its link.
func (f *fabric) deliver(m *msg) {
	to, q := m.from.peer(), m.path
	if m.epoch != f.ctl[q].epoch || to.qpErr[q] {
		return
	}
	switch m.kind {
	case mCell:
		for _, w := range m.wrs {
			f.write(m.from, to, q, w)
		}
	case mToken:
		to.tokenArrivals = append(to.tokenArrivals, m.token.ID)
		if f.opts.ring {
			to.ring[q][f.slot(m.token.ID)] = m.token
			f.pollRing(to, q)
			return
		}
		f.input(to, func(e *cell.Engine) { e.Token(f.now, m.token) })
	case mGrant:
		f.input(to, func(e *cell.Engine) { e.Grant(f.now, m.grant) })
	case mFinal:
		f.input(to, func(e *cell.Engine) { e.Final(f.now, m.final) })
	}
}

// write performs one RDMA write of a cell, policing both memories.
func (f *fabric) write(from, to *end, q int, w wrCopy) {
	n := int64(w.n)
	if n > 0 {
		if !f.owned(from, w.src, n, true) {
			f.violate("%s path %d: copy reads %d bytes at %#x, memory no longer the engine's", from.name, q, n, w.src)
		}
		if !f.owned(to, w.dst, n, false) {
			f.violate("%s path %d: write of %d bytes at %#x into memory not granted or already handed back", to.name, q, n, w.dst)
		}
		copy(f.slice(w.dst, n), f.slice(w.src, n))
	}
	if w.op != verbs.OpWriteImm {
		return
	}
	if len(to.recvIDs[q]) == 0 {
		f.violate("%s path %d: WRITE_WITH_IMM of cell %d found no receive posted (flow control exceeded)", to.name, q, w.imm)
		return
	}
	recv := to.recvIDs[q][0]
	to.recvIDs[q] = to.recvIDs[q][1:]
	read := func() {
		f.input(to, func(e *cell.Engine) {
			must(e.Completion(f.now, q, verbs.WC{ID: recv, Status: verbs.StatusSuccess, Opcode: verbs.OpRecvWriteImm,
				Flags: verbs.WCWithImm, ByteLen: w.n, Imm: w.imm}))
		})
	}
	if f.opts.cqLag == 0 {
		read()
		return
	}
	to.lagged[q] = append(to.lagged[q], read)
	f.at(f.now+f.opts.cqLag, func() {
		if len(to.lagged[q]) > 0 {
			to.lagged[q] = to.lagged[q][1:]
			read()
		}
	})
}

func (f *fabric) owned(en *end, addr uint64, n int64, send bool) bool {
	for _, x := range f.xfers {
		if send && x.from == en && x.sendOwned && addr >= x.src && addr+uint64(n) <= x.src+uint64(x.n) {
			return true
		}
		if !send && x.to == en && x.recvOwned && addr >= x.dst && addr+uint64(n) <= x.dst+uint64(x.rn) {
			return true
		}
	}
	return false
}

// startReset begins (or joins) the reset of path q: this end's QP goes to
// ERR now, the peer's after errDelay (when it is told, and its engine
// gives the path up too), and both come back after resetDelay.
func (f *fabric) startReset(en *end, q int) {
	c := f.ctl[q]
	en.qpErr[q] = true
	en.recvIDs[q] = nil
	if c.resetting {
		return
	}
	c.resetting = true
	peer := en.peer()
	f.at(f.now+f.opts.errDelay, func() {
		peer.qpErr[q] = true
		peer.recvIDs[q] = nil
		f.input(peer, func(e *cell.Engine) { must(e.PathFailed(f.now, q, fmt.Errorf("peer %s resets path %d", en.name, q))) })
		if f.opts.quiet {
			for _, x := range f.ends {
				x.logf("path %d quiet", q)
				f.readArrivals(x, q)
				f.clearRing(x, q)
				f.input(x, func(e *cell.Engine) { must(e.PathQuiet(f.now, q)) })
			}
		}
	})
	f.at(f.now+f.opts.resetDelay, func() { f.finishReset(q) })
}

func (f *fabric) finishReset(q int) {
	c := f.ctl[q]
	c.resetting = false
	c.epoch++
	for i := range f.links {
		*f.links[i][q] = link{latency: f.links[i][q].latency, psPerByte: f.links[i][q].psPerByte, dead: c.permanent}
	}
	if c.permanent {
		for _, en := range f.ends {
			f.input(en, func(e *cell.Engine) { must(e.PathDead(f.now, q, fmt.Errorf("path %d unreachable", q))) })
		}
		return
	}
	for _, en := range f.ends {
		if en.e.Err() == nil && en.refill[q] < 0 {
			f.violate("%s: path %d reset without a Reset (no refill chain)", en.name, q)
		}
		en.qpErr[q] = false
		en.recvIDs[q] = slices.Clone(en.refillIDs[q])
		for _, m := range en.held[q] {
			f.send(m)
		}
		en.held[q] = nil
		lag := int64(0)
		if en.idx == 1 {
			lag = f.opts.recvResetLag
		}
		f.at(f.now+lag, func() {
			en.logf("path %d reset confirmed", q)
			f.readArrivals(en, q)
			f.clearRing(en, q)
			f.input(en, func(e *cell.Engine) { must(e.PathReset(f.now, q)) })
		})
	}
}

// kill makes path q silently drop everything, both ways, from now on; it
// heals when reset unless permanent.
func (f *fabric) kill(q int, permanent bool) {
	f.links[0][q].dead = true
	f.links[1][q].dead = true
	f.ctl[q].permanent = permanent
}

func (f *fabric) alloc(n int64) uint64 {
	base := f.nextBase
	f.nextBase += 1 << 32
	f.mem[base] = make([]byte, max(n, 1))
	return base
}

func (f *fabric) slice(addr uint64, n int64) []byte {
	base := addr &^ (1<<32 - 1)
	b, ok := f.mem[base]
	if !ok {
		panic(fmt.Sprintf("address %#x not allocated", addr))
	}
	off := addr - base
	return b[off : off+uint64(n)]
}

func pattern(tag uint64, i int64) byte { return byte(uint64(i)*131 + tag*29 + uint64(i)>>9) }

// transfer moves n bytes from end `from` to the other end: the receiver
// posts its range and the sender its own, recvFirst saying in which
// order.
func (f *fabric) transfer(from int, n int64, recvFirst bool) *xfer {
	return f.transferInto(from, n, n, recvFirst)
}

// transferInto is transfer into a receive range of rn bytes.
func (f *fabric) transferInto(from int, n, rn int64, recvFirst bool) *xfer {
	f.nextTag++
	x := &xfer{tag: f.nextTag, from: f.ends[from], to: f.ends[1-from], n: n, rn: rn, src: f.alloc(n), dst: f.alloc(rn)}
	src := f.slice(x.src, n)
	for i := range src {
		src[i] = pattern(x.tag, int64(i))
	}
	f.xfers = append(f.xfers, x)
	x.from.sends = append(x.from.sends, x)
	x.to.recvs = append(x.to.recvs, x)
	if recvFirst {
		x.to.waitRecv = append(x.to.waitRecv, x)
		x.from.waitSend = append(x.from.waitSend, x)
	} else {
		x.from.waitSend = append(x.from.waitSend, x)
		x.to.waitRecv = append(x.to.waitRecv, x)
	}
	f.at(f.now, func() { f.submit(x.to); f.submit(x.from) })
	return x
}

// submit hands waiting ranges to the engine until it is busy.
func (f *fabric) submit(en *end) {
	for len(en.waitRecv) > 0 {
		x := en.waitRecv[0]
		err := en.e.Recv(f.now, cell.RecvRange{Tag: x.tag, Addr: x.dst, RKey: 0x1000 + uint32(x.tag), Len: x.rn})
		if err != nil {
			f.drain(en)
			if en.e.Err() != nil {
				x.recv = append(x.recv, cell.Event{Kind: cell.Received, Tag: x.tag, Err: err})
				en.waitRecv = en.waitRecv[1:]
				continue
			}
			break
		}
		x.recvOwned = true
		en.waitRecv = en.waitRecv[1:]
		f.drain(en)
	}
	for len(en.waitSend) > 0 {
		x := en.waitSend[0]
		err := en.e.Send(f.now, cell.SendRange{Tag: x.tag, Addr: x.src, LKey: 0x2000 + uint32(x.tag), Len: x.n})
		if err != nil {
			f.drain(en)
			if en.e.Err() != nil {
				x.sent = append(x.sent, cell.Event{Kind: cell.Sent, Tag: x.tag, Err: err})
				en.waitSend = en.waitSend[1:]
				continue
			}
			break
		}
		x.sendOwned = true
		en.waitSend = en.waitSend[1:]
		f.drain(en)
	}
}

// appEvent is the application taking a range back: it checks a received
// range's bytes, then reuses the memory at once (scribbles over it), so
// that a late write or read would show.
func (f *fabric) appEvent(en *end, ev cell.Event) {
	f.events++
	var x *xfer
	for _, y := range f.xfers {
		if y.tag == ev.Tag {
			x = y
		}
	}
	if x == nil {
		f.violate("%s: event for unknown tag %d", en.name, ev.Tag)
		return
	}
	en.logf("%v tag %d len %d err %v", ev.Kind, ev.Tag, ev.Len, ev.Err)
	switch ev.Kind {
	case cell.Sent:
		x.sent = append(x.sent, ev)
		x.sentAt = f.now
		if ev.Err == nil {
			// A failed range's memory may still be read by copies on paths
			// being reset; the application waits for the driver's teardown,
			// which these tests never declare done.
			x.sendOwned = false
			clear(f.slice(x.src, x.n))
		}
	case cell.Received:
		x.recv = append(x.recv, ev)
		x.recvAt = f.now
		if ev.Err != nil {
			break
		}
		x.recvOwned = false
		{
			if ev.Len != x.n {
				f.violate("%s: tag %d received %d bytes, sent %d", en.name, ev.Tag, ev.Len, x.n)
			}
			b := f.slice(x.dst, min(x.n, x.rn))
			for i := range b {
				if b[i] != pattern(x.tag, int64(i)) {
					x.corrupt = true
					f.violate("%s: tag %d byte %d is %#x, want %#x", en.name, ev.Tag, i, b[i], pattern(x.tag, int64(i)))
					break
				}
			}
		}
		b := f.slice(x.dst, x.rn)
		for i := range b {
			b[i] = 0xEE
		}
	}
	if len(en.waitSend) > 0 || len(en.waitRecv) > 0 {
		f.at(f.now, func() { f.submit(en) })
	}
}

// done reports whether every range has its events at both ends.
func (f *fabric) done() bool {
	for _, x := range f.xfers {
		if len(x.sent) == 0 || len(x.recv) == 0 {
			return false
		}
	}
	return true
}

// run processes events until every range is done (and the queue holds
// nothing due before `settle` more), or until the virtual time limit.
func (f *fabric) run(limit int64) {
	for f.q.Len() > 0 && !f.done() {
		ev := heap.Pop(&f.q).(*event)
		if ev.at > limit {
			heap.Push(&f.q, ev)
			return
		}
		f.now = ev.at
		ev.fn()
	}
}

// runFor processes every event up to time t.
func (f *fabric) runFor(t int64) {
	for f.q.Len() > 0 && f.q[0].at <= t {
		ev := heap.Pop(&f.q).(*event)
		f.now = ev.at
		ev.fn()
	}
	f.now = max(f.now, t)
}

// bytesOn sums the bytes end en posted on each path.
func (en *end) bytesOn() []int64 {
	out := make([]int64, len(en.qpErr))
	for _, p := range en.posts {
		out[p.path] += p.n
	}
	return out
}

func (en *end) cellsOn() []int {
	out := make([]int, len(en.qpErr))
	for _, p := range en.posts {
		out[p.path]++
	}
	return out
}

// postedIDs lists the distinct cell ids end en posted, in first-post order.
func (en *end) postedIDs() []uint32 {
	var ids []uint32
	for _, p := range en.posts {
		if !slices.Contains(ids, p.id) {
			ids = append(ids, p.id)
		}
	}
	return ids
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

func durNS(ns int64) time.Duration { return time.Duration(ns) }

func verbsWC() verbs.WC { return verbs.WC{Status: verbs.StatusSuccess} }

// dumpLogs writes both ends' logs, for a failing scenario.
func (f *fabric) dumpLogs(t *testing.T) {
	for _, en := range f.ends {
		for _, l := range en.log {
			t.Logf("%s t=%dns %s", en.name, l.at, l.what)
		}
	}
}
