package driver

import (
	"context"
	"fmt"

	"github.com/rdmacell/rdmacell/cell"
	"github.com/rdmacell/rdmacell/verbs"
)

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
		trace:    r.Logger.Enabled(context.Background(), LevelTrace),
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
	for i, l := range c.ctl.lanes {
		if err := connectQP(l.qp, &remote.Lanes[i]); err != nil {
			return nil, fmt.Errorf("driver: peer %s: connect control lane %d (qp %d): %w", r.Peer, i, l.qpn, err)
		}
	}
	if cf, can := ex.(Confirmer); can {
		if err := cf.Confirm(ctx); err != nil {
			return nil, fmt.Errorf("driver: peer %s: confirm the connection: %w", r.Peer, err)
		}
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
	if w, ok := c.ringMR.(verbs.WriteWatcher); ok {
		w.OnRemoteWrite(c.onLanded)
	}
	c.stageAddr = c.stageMR.Addr()

	depth := r.Paths*(r.maxSendWR()+r.maxRecvWR()) + 2*c.lay.lanes*c.lay.ctlSlots
	if c.cq, err = r.Device.CreateCQ(depth); err != nil {
		return nil, fail("create CQ", err)
	}
	if p, ok := c.cq.(verbs.PassiveCQ); !ok || !p.Passive() {
		c.spin = true
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
		p := &path{idx: i, qp: q, qpn: q.Num(), refill: make([]verbs.RecvWR, r.eng.RecvDepth), recordSlack: 1}
		if k, ok := q.(verbs.Corker); ok {
			c.corkers = append(c.corkers, k)
		}
		p.Tokens.Init(c.ring[c.lay.tokenOff(i, 0):c.lay.tokenOff(i+1, 0)], c.lay.window, r.eng.RecvDepth)
		p.records.init(r.maxSendWR())
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
	for _, l := range c.ctl.lanes {
		info.Lanes = append(info.Lanes, l.qp.Endpoint())
	}
	return info, nil
}

// buildControl creates the lanes of the control channel and posts their
// receives.
func (c *Conn) buildControl() error {
	r := &c.cfg
	n := c.lay.ctlSlots
	for i := range c.lay.lanes {
		qc := r.QP
		qc.SendCQ, qc.RecvCQ = c.cq, c.cq
		qc.MaxSendWR, qc.MaxRecvWR, qc.MaxSGE = n, n, 1
		qc.RNRRetry = 7 // a message waits for a receive rather than be lost
		qc.LocalAddr = ""
		if len(r.LocalAddrs) > 0 {
			qc.LocalAddr = r.LocalAddrs[i]
		}
		q, err := r.PD.CreateQP(qc)
		if err != nil {
			return fmt.Errorf("driver: peer %s: create control lane %d: %w", r.Peer, i, err)
		}
		l := &lane{idx: i, qp: q, qpn: q.Num(), byeSlot: -1,
			recvs: make([]verbs.RecvWR, n), rsge: make([]verbs.SGE, n)}
		c.ctl.lanes = append(c.ctl.lanes, l)
		if err := q.Modify(verbs.StateInit, nil); err != nil {
			return fmt.Errorf("driver: peer %s: control lane %d (qp %d) to INIT: %w", r.Peer, i, l.qpn, err)
		}
		l.freeAll(n)
		for j := range n {
			l.rsge[j] = verbs.SGE{Addr: c.stageAddr + uint64(c.lay.ctlRecvOff(i, j)), Length: ctlMsgSize, LKey: c.stageMR.LKey()}
			l.recvs[j] = verbs.RecvWR{ID: laneWRID(0, j), SGL: l.rsge[j : j+1]}
			if err := c.postCtlRecvLocked(l, j); err != nil {
				return fmt.Errorf("driver: peer %s: post control receive on lane %d: %w", r.Peer, i, err)
			}
		}
	}
	return nil
}
