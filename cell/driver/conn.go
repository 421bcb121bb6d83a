package driver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/rdmacell/rdmacell/cell"
	"github.com/rdmacell/rdmacell/verbs"
)

// Conn is one cell connection to one peer: an engine, its data QPs
// (paths) and control QP, the rings the peer writes, and the goroutine
// that makes progress. Its methods are safe for concurrent use.
type Conn struct {
	cfg      resolved
	log      *slog.Logger
	provider string
	lay      layout

	cq        verbs.CQ
	mem       *verbs.Memory
	ringMR    verbs.MR
	stageMR   verbs.MR
	ring      []byte // the rings the peer writes
	stage     []byte // records and control messages before they leave
	stageAddr uint64
	peerRing  ringInfo
	paths     []*path
	qpns      []uint32 // the data QPs' numbers, by path

	// life ends when the connection ends; it stops reset workers and the
	// progress goroutine's waits.
	life    context.Context
	endLife context.CancelFunc
	exited  chan struct{} // closed when the progress goroutine returns
	workers sync.WaitGroup
	byeDone chan struct{} // closed when the goodbye has left, or cannot
	closed  chan struct{} // closed when Close has released everything

	mu  sync.Mutex
	eng *cell.Engine
	// fed says the engine took inputs since its outputs were last acted
	// on; Ready must be called exactly once per batch.
	fed bool
	ops opTable
	// err is the connection's terminal failure; once set, nothing is
	// posted any more.
	err      error
	closing  bool
	deadline int64 // the engine's next Tick, 0 for none
	// nextKeepalive is when paths are next checked for silence.
	nextKeepalive int64
	ctl           control
	// resetDone holds the reset workers' results for the progress
	// goroutine, which applies them after a last poll of the old
	// incarnation.
	resetDone []resetResult
	// failed collects the paths whose posts failed while acting on a
	// batch; they are reported after it.
	failed  uint64
	postErr []error
	// Waking the progress goroutine: while waiting says it waits in the
	// CQ, a kick ends the waiter's wait; kicked records a wake-up that
	// came while it was not waiting.
	waiter   *waiter
	waiting  bool
	kicked   bool
	parked   bool
	counters counters

	wcs, waitWCs []verbs.WC
	// early holds completions the probe saw that were not its own.
	early []verbs.WC
	wr    verbs.SendWR // scratch for ring writes
	sge   [1]verbs.SGE
}

// path is one data QP and the driver's state of it, guarded by Conn.mu
// except where noted.
type path struct {
	idx int
	qp  verbs.QP
	qpn uint32
	// qmu serialises Modify and Close, which must not race; it is never
	// held while taking Conn.mu.
	qmu sync.Mutex

	gen       uint32 // incarnation agreed with the peer
	resetting bool
	target    uint32 // the incarnation a reset under way brings up
	inbox     chan ctlMsg
	early     *ctlMsg // the peer's next reset, come before ours finished
	probing   bool    // reset with the peer; its probe is on the way
	closed    bool    // closed or being closed: post nothing
	dead      bool
	refill    []verbs.RecvWR // the receives of the reset under way
	fifo      idRing         // cells posted and not yet acknowledged
	writes    uint64         // ring writes posted, to signal every signalEvery
	lastSeen  int64          // when the path last completed anything
}

func (p *path) notify(m ctlMsg) {
	select {
	case p.inbox <- m:
	default: // a peer repeating itself; the worker has what it needs
	}
}

// Dial sets up a connection to cfg.Peer: it creates the QPs and rings,
// swaps setup information with the peer through ex, checks the peer's,
// and connects. Both ends call Dial with matching wire parameters.
func Dial(ctx context.Context, cfg Config, ex Exchanger) (*Conn, error) {
	r, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	c := &Conn{
		cfg:      r,
		log:      r.Logger,
		provider: r.Device.Provider(),
		lay:      newLayout(r.Paths, r.eng.Window, r.eng.MaxRanges),
		exited:   make(chan struct{}),
		byeDone:  make(chan struct{}),
		closed:   make(chan struct{}),
		postErr:  make([]error, r.Paths),
		wcs:      make([]verbs.WC, 64),
		waiter:   newWaiter(),
		waitWCs:  make([]verbs.WC, 64),
	}
	c.life, c.endLife = context.WithCancel(context.Background())
	c.ops.init(2 * r.eng.MaxRanges)
	ok := false
	defer func() {
		if !ok {
			c.endLife()
			c.release()
		}
	}()
	local, err := c.build()
	if err != nil {
		return nil, err
	}
	blob, err := local.encode()
	if err != nil {
		return nil, fmt.Errorf("driver: peer %s: encode setup: %w", r.Peer, err)
	}
	rb, err := ex.Exchange(ctx, blob)
	if err != nil {
		return nil, fmt.Errorf("driver: peer %s: exchange setup: %w", r.Peer, err)
	}
	remote, err := parseSetup(r.Peer, rb, local)
	if err != nil {
		return nil, err
	}
	c.peerRing = remote.Rings
	for i, p := range c.paths {
		if err := connectQP(p.qp, &remote.Paths[i]); err != nil {
			return nil, &PathError{Peer: r.Peer, Path: i, QPN: p.qpn, Op: "connect", Err: err}
		}
	}
	if err := connectQP(c.ctl.qp, &remote.Control); err != nil {
		return nil, fmt.Errorf("driver: peer %s: connect control qp %d: %w", r.Peer, c.ctl.qpn, err)
	}
	if err := c.probe(ctx); err != nil {
		return nil, err
	}
	ok = true
	c.touchPathsLocked(c.now())
	go c.run()
	return c, nil
}

func connectQP(q verbs.QP, remote *verbs.Endpoint) error {
	if err := q.Modify(verbs.StateRTR, remote); err != nil {
		return err
	}
	return q.Modify(verbs.StateRTS, nil)
}

// build creates the engine, the memory, the CQ and the QPs, posts the
// receives and returns this end's setup information.
func (c *Conn) build() (*setupInfo, error) {
	r := &c.cfg
	fail := func(what string, err error) error {
		return fmt.Errorf("driver: peer %s: %s: %w", r.Peer, what, err)
	}
	eng, err := cell.New(r.eng)
	if err != nil {
		return nil, err
	}
	c.eng = eng
	if c.mem, err = verbs.Alloc(c.lay.total); err != nil {
		return nil, fail("allocate rings", err)
	}
	b := c.mem.Bytes()
	if c.ringMR, err = r.PD.RegMR(b[:c.lay.ringLen], verbs.AccessLocalWrite|verbs.AccessRemoteWrite); err != nil {
		return nil, fail("register rings", err)
	}
	if c.stageMR, err = r.PD.RegMR(b[c.lay.stageOff:c.lay.total], verbs.AccessLocalWrite); err != nil {
		return nil, fail("register staging", err)
	}
	c.ring, c.stage = c.ringMR.Bytes(), c.stageMR.Bytes()
	c.stageAddr = c.stageMR.Addr()

	depth := r.Paths*(r.maxSendWR()+r.maxRecvWR()) + 2*c.lay.ctlSlots
	if c.cq, err = r.Device.CreateCQ(depth); err != nil {
		return nil, fail("create CQ", err)
	}
	info := &setupInfo{Version: setupVersion, Wire: r.wire(c.provider),
		Rings: ringInfo{Addr: c.ringMR.Addr(), RKey: c.ringMR.RKey(), Len: c.lay.ringLen}}
	for i := range r.Paths {
		qc := r.QP
		qc.SendCQ, qc.RecvCQ = c.cq, c.cq
		qc.MaxSendWR, qc.MaxRecvWR, qc.MaxSGE = r.maxSendWR(), r.maxRecvWR(), 1
		qc.LocalAddr = ""
		if len(r.LocalAddrs) > 0 {
			qc.LocalAddr = r.LocalAddrs[i]
		}
		q, err := r.PD.CreateQP(qc)
		if err != nil {
			return nil, fail(fmt.Sprintf("create qp of path %d", i), err)
		}
		p := &path{idx: i, qp: q, qpn: q.Num(), refill: make([]verbs.RecvWR, r.eng.RecvDepth)}
		p.fifo.init(r.eng.RecvDepth)
		c.paths = append(c.paths, p)
		c.qpns = append(c.qpns, p.qpn)
		if err := q.Modify(verbs.StateInit, nil); err != nil {
			return nil, fail(fmt.Sprintf("qp %d of path %d to INIT", p.qpn, i), err)
		}
	}
	// The engine's first batch is a full receive chain per path, posted
	// in INIT so that the peer finds them when it connects.
	for _, rp := range c.eng.Ready().Recvs {
		if _, err := c.paths[rp.Path].qp.PostRecv(rp.WR); err != nil {
			return nil, fail(fmt.Sprintf("post receives on path %d", rp.Path), err)
		}
	}
	if err := c.buildControl(); err != nil {
		return nil, err
	}
	for _, p := range c.paths {
		info.Paths = append(info.Paths, p.qp.Endpoint())
	}
	info.Control = c.ctl.qp.Endpoint()
	return info, nil
}

func (c *Conn) buildControl() error {
	r := &c.cfg
	n := c.lay.ctlSlots
	qc := r.QP
	qc.SendCQ, qc.RecvCQ = c.cq, c.cq
	qc.MaxSendWR, qc.MaxRecvWR, qc.MaxSGE = n, n, 1
	qc.RNRRetry = 7 // a message waits for a receive rather than be lost
	qc.LocalAddr = ""
	q, err := r.PD.CreateQP(qc)
	if err != nil {
		return fmt.Errorf("driver: peer %s: create control qp: %w", r.Peer, err)
	}
	k := &c.ctl
	k.qp, k.qpn, k.byeSlot = q, q.Num(), -1
	if err := q.Modify(verbs.StateInit, nil); err != nil {
		return fmt.Errorf("driver: peer %s: control qp %d to INIT: %w", r.Peer, k.qpn, err)
	}
	k.recvs = make([]verbs.RecvWR, n)
	k.rsge = make([]verbs.SGE, n)
	for i := range n {
		k.free = append(k.free, n-1-i)
		k.rsge[i] = verbs.SGE{Addr: c.stageAddr + uint64(c.lay.ctlRecvOff(i)), Length: ctlMsgSize, LKey: c.stageMR.LKey()}
		k.recvs[i] = verbs.RecvWR{ID: uint64(i), SGL: k.rsge[i : i+1]}
		if err := c.postCtlRecvLocked(i); err != nil {
			return fmt.Errorf("driver: peer %s: post control receive: %w", r.Peer, err)
		}
	}
	return nil
}

// Peer returns the peer's name.
func (c *Conn) Peer() string { return c.cfg.Peer }

// Err returns the connection's terminal failure, or nil while it works:
// the engine's *cell.NoPathError, or an error wrapping ErrClosed or
// ErrAborted.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Abort ends the connection at once: every QP is closed, so nothing lands
// any more, and every range in flight fails with an error wrapping
// ErrAborted and err. Close must still be called to release resources.
func (c *Conn) Abort(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return
	}
	if c.ctl.free != nil && !c.ctl.down {
		_ = c.sendCtlLocked(ctlMsg{kind: msgBye}) // best effort: the QPs close now
	}
	c.failLocked(fmt.Errorf("driver: peer %s: %w: %w", c.cfg.Peer, ErrAborted, err))
	c.ops.failAll(c.err)
}

// Close tells the peer goodbye, fails every range still in flight with an
// error wrapping ErrClosed, and releases the QPs, the CQ and the rings.
// It waits for the connection's goroutines, each of which is bounded. It
// is idempotent; later calls wait for the first.
func (c *Conn) Close() error {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		<-c.closed
		return nil
	}
	c.closing = true
	bye := false
	if c.err == nil && !c.ctl.down {
		bye = c.sendCtlLocked(ctlMsg{kind: msgBye}) == nil
		c.kickLocked()
	}
	c.mu.Unlock()
	if bye {
		// Let the goodbye leave, so that the peer fails fast instead of
		// learning from its QPs; its completion proves it was placed.
		t := newTimer(byeTimeout)
		select {
		case <-c.byeDone:
		case <-t.C:
		}
		t.Stop()
	}
	c.mu.Lock()
	c.failLocked(fmt.Errorf("driver: peer %s: %w", c.cfg.Peer, ErrClosed))
	c.ops.failAll(c.err)
	c.mu.Unlock()
	<-c.exited
	c.workers.Wait()
	err := c.release()
	close(c.closed)
	return err
}

// failLocked ends the connection with err: the QPs are closed, so that
// nothing can land any more in the memory of the ranges in flight, which
// the caller fails after.
func (c *Conn) failLocked(err error) {
	if c.err != nil {
		return
	}
	c.err = err
	c.endLife()
	for _, p := range c.paths {
		p.closed = true
		p.qmu.Lock()
		_ = p.qp.Close()
		p.qmu.Unlock()
	}
	_ = c.ctl.qp.Close()
	c.signalBye()
	c.kickLocked()
}

// release frees what build created; the QPs are closed already unless
// Dial failed.
func (c *Conn) release() error {
	var errs []error
	keep := func(err error) {
		if err != nil && !errors.Is(err, verbs.ErrClosed) {
			errs = append(errs, err)
		}
	}
	for _, p := range c.paths {
		keep(p.qp.Close())
	}
	if c.ctl.qp != nil {
		keep(c.ctl.qp.Close())
	}
	c.mu.Lock()
	c.ops.failAll(c.err)
	c.mu.Unlock()
	if c.cq != nil {
		keep(c.cq.Close())
	}
	if c.ringMR != nil {
		keep(c.ringMR.Close())
	}
	if c.stageMR != nil {
		keep(c.stageMR.Close())
	}
	if c.mem != nil {
		keep(c.mem.Free())
	}
	if len(errs) > 0 {
		return fmt.Errorf("driver: peer %s: close: %w", c.cfg.Peer, errors.Join(errs...))
	}
	return nil
}
