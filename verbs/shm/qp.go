package shm

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdmacell/rdmacell/verbs"
	"github.com/rdmacell/rdmacell/verbs/internal/soft"
)

// Defaults and bounds of QPConfig.
const (
	defaultQueueDepth  = 1024
	defaultMaxSGE      = 4
	defaultTimeout     = time.Second
	defaultMinRNRTimer = time.Millisecond
	maxQueueDepth      = 1 << 20
	maxSGE             = 256
	maxMinRNR          = time.Minute
	// maxMessage bounds the length of one request, as an RNIC's maximum
	// message size does.
	maxMessage = 1 << 31
)

// QP is a reliable connected queue pair of a Device. It implements
// verbs.QP.
type QP struct {
	dev            *Device
	pd             *PD
	num            uint32
	cfg            verbs.QPConfig
	sendCQ, recvCQ *soft.CQ

	// mu serialises Modify, Close and the adoption of accepted links.
	mu     sync.Mutex
	closed bool
	psn    uint32
	remote verbs.Endpoint
	eng    *engine

	state atomic.Uint32
	gone  atomic.Bool // closed, for posters

	// sqMu and rqMu are held by posters while they check the state and
	// append; state changes to ERR and RESET take both, so no request is
	// posted behind a flush.
	sqMu sync.Mutex
	sq   sendQueue
	rqMu sync.Mutex
	rq   *soft.RecvQueue
	// recvsPosted counts the receives posted since the last reset; the
	// link publishes it to the peer. Guarded by rqMu.
	recvsPosted uint32

	link   atomic.Pointer[link]
	parked atomic.Pointer[link]
	wake   chan struct{}
	// running is eng for goroutines that poll or post; polls counts
	// their visits, so the engine knows it is being driven.
	running atomic.Pointer[engine]
	polls   atomic.Uint32
}

var _ verbs.QP = (*QP)(nil)

func newQP(pd *PD, cfg verbs.QPConfig) (*QP, error) {
	d := pd.dev
	cfg, err := normalize(cfg)
	if err != nil {
		return nil, err
	}
	scq, err := d.ownCQ(cfg.SendCQ, "SendCQ")
	if err != nil {
		return nil, err
	}
	rcq, err := d.ownCQ(cfg.RecvCQ, "RecvCQ")
	if err != nil {
		return nil, err
	}
	q := &QP{
		dev: d, pd: pd, cfg: cfg, sendCQ: scq, recvCQ: rcq,
		rq:   soft.NewRecvQueue(cfg.MaxRecvWR, cfg.MaxSGE),
		wake: make(chan struct{}, 1),
	}
	q.sq.init(cfg.MaxSendWR, cfg.MaxSGE)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed || pd.closed {
		return nil, fmt.Errorf("shm: create qp: %w", verbs.ErrClosed)
	}
	d.nextQPN++
	q.num = d.nextQPN
	d.qps[q.num] = q
	pd.nqp++
	d.cqs[scq].add(q)
	d.cqs[rcq].add(q)
	return q, nil
}

func normalize(cfg verbs.QPConfig) (verbs.QPConfig, error) {
	bad := func(format string, args ...any) (verbs.QPConfig, error) {
		return cfg, fmt.Errorf("%w: qp config: "+format, append([]any{verbs.ErrInvalidArgument}, args...)...)
	}
	if cfg.SendCQ == nil || cfg.RecvCQ == nil {
		return bad("SendCQ and RecvCQ are required")
	}
	for _, v := range []struct {
		name string
		p    *int
		def  int
		max  int
	}{
		{"MaxSendWR", &cfg.MaxSendWR, defaultQueueDepth, maxQueueDepth},
		{"MaxRecvWR", &cfg.MaxRecvWR, defaultQueueDepth, maxQueueDepth},
		{"MaxSGE", &cfg.MaxSGE, defaultMaxSGE, maxSGE},
	} {
		if *v.p == 0 {
			*v.p = v.def
		}
		if *v.p < 0 || *v.p > v.max {
			return bad("%s %d, want 0 to %d", v.name, *v.p, v.max)
		}
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = defaultTimeout
	}
	if cfg.MinRNRTimer == 0 {
		cfg.MinRNRTimer = defaultMinRNRTimer
	}
	switch {
	case cfg.Timeout < 0:
		return bad("Timeout %v", cfg.Timeout)
	case cfg.RetryCount < 0:
		return bad("RetryCount %d", cfg.RetryCount)
	case cfg.RNRRetry < 0 || cfg.RNRRetry > 7:
		return bad("RNRRetry %d, want 0 to 7", cfg.RNRRetry)
	case cfg.MinRNRTimer < 0 || cfg.MinRNRTimer > maxMinRNR:
		return bad("MinRNRTimer %v, want up to %v", cfg.MinRNRTimer, maxMinRNR)
	}
	return cfg, nil
}

// Num implements verbs.QP.
func (q *QP) Num() uint32 { return q.num }

// State implements verbs.QP.
func (q *QP) State() verbs.QPState { return verbs.QPState(q.state.Load()) }

// Endpoint implements verbs.QP.
func (q *QP) Endpoint() verbs.Endpoint {
	q.mu.Lock()
	defer q.mu.Unlock()
	return verbs.Endpoint{
		Provider: ProviderName, Addr: q.dev.addr, QPN: q.num, PSN: q.psn,
		Host: q.dev.host, RNRRetry: uint8(q.cfg.RNRRetry),
	}
}

// kick wakes the engine after a local event, if it sleeps. It leaves a
// dozing engine alone: a goroutine polling the QP's CQ sees the doorbell
// move and does the work. Callers hold a lock that keeps the link mapped:
// sqMu or rqMu with the QP live, or q.mu, or they are the link's reader.
func (q *QP) kick() {
	if l := q.link.Load(); l != nil {
		l.pair.bell(l.pair.side).ring()
	}
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// kickHard is kick that also wakes an engine dozing while pollers drive
// the QP: a post left it work the pollers will not do.
func (q *QP) kickHard() {
	q.kick()
	if e := q.running.Load(); e != nil {
		e.wakeDoze()
	}
}

// publishRecvs tells the peer how many receives are posted, once the
// link is in place; PostRecv keeps it up to date from then on.
func (q *QP) publishRecvs() {
	q.rqMu.Lock()
	if l := q.link.Load(); l != nil {
		l.pair.setRecvsPosted(q.recvsPosted)
	}
	q.rqMu.Unlock()
}

// setState changes the state with posting blocked.
func (q *QP) setState(s verbs.QPState) {
	q.sqMu.Lock()
	q.rqMu.Lock()
	q.state.Store(uint32(s))
	q.rqMu.Unlock()
	q.sqMu.Unlock()
}

// Modify implements verbs.QP.
func (q *QP) Modify(to verbs.QPState, remote *verbs.Endpoint) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return fmt.Errorf("shm: qp %d: %w", q.num, verbs.ErrClosed)
	}
	from := q.State()
	if !verbs.CanTransition(from, to) {
		return fmt.Errorf("%w: qp %d cannot move from %v to %v", verbs.ErrInvalidState, q.num, from, to)
	}
	switch to {
	case verbs.StateInit:
		var b [4]byte
		_, _ = rand.Read(b[:])
		q.psn = binary.LittleEndian.Uint32(b[:]) & 0xffffff
		q.setState(verbs.StateInit)
	case verbs.StateRTR:
		return q.connect(remote)
	case verbs.StateRTS:
		// The engine may have failed the QP meanwhile.
		q.sqMu.Lock()
		ok := q.state.CompareAndSwap(uint32(verbs.StateRTR), uint32(verbs.StateRTS))
		q.sqMu.Unlock()
		if !ok {
			return fmt.Errorf("%w: qp %d moved to %v", verbs.ErrInvalidState, q.num, q.State())
		}
		q.kick()
	case verbs.StateErr:
		q.toErr()
	case verbs.StateReset:
		q.toReset()
	}
	return nil
}

// connect moves q to RTR with the peer at remote.
func (q *QP) connect(remote *verbs.Endpoint) error {
	if remote == nil {
		return fmt.Errorf("%w: qp %d: moving to RTR needs the peer's endpoint", verbs.ErrInvalidArgument, q.num)
	}
	r := *remote
	switch {
	case r.Provider != ProviderName:
		return fmt.Errorf("%w: qp %d: endpoint of provider %q, want %q", verbs.ErrInvalidArgument, q.num, r.Provider, ProviderName)
	case r.Host != "" && r.Host != q.dev.host:
		return fmt.Errorf("%w: qp %d: endpoint on host %q, shared memory reaches only %q", verbs.ErrInvalidArgument, q.num, r.Host, q.dev.host)
	case r.Addr == "" || len(r.Addr) > maxAddrLen || r.QPN == 0:
		return fmt.Errorf("%w: qp %d: endpoint address %q qp %d", verbs.ErrInvalidArgument, q.num, r.Addr, r.QPN)
	case r.RNRRetry > 7:
		return fmt.Errorf("%w: qp %d: endpoint RNR retry %d, want 0 to 7", verbs.ErrInvalidArgument, q.num, r.RNRRetry)
	case r.Addr == q.dev.addr && r.QPN == q.num:
		return fmt.Errorf("%w: qp %d cannot connect to itself", verbs.ErrInvalidArgument, q.num)
	}
	if dials(q.dev.addr, q.num, r) {
		l, err := q.dial(r)
		if err != nil {
			return err
		}
		q.link.Store(l)
		q.publishRecvs()
	} else if l := q.parked.Swap(nil); l != nil {
		if l.peerAddr == r.Addr && l.peerQPN == r.QPN && l.state.CompareAndSwap(linkParked, linkAdopted) {
			q.remote = r
			q.adopt(l)
		} else {
			l.fail(fmt.Errorf("shm: qp %d: connection from %s qp %d is not the expected peer", q.num, l.peerAddr, l.peerQPN))
		}
	}
	q.remote = r
	q.setState(verbs.StateRTR)
	q.eng = newEngine(q)
	q.running.Store(q.eng)
	q.dev.wg.Add(1)
	go q.eng.run()
	return nil
}

// toErr stops the engine and flushes every outstanding request.
func (q *QP) toErr() {
	q.stopEngine(stopFlush)
	q.setState(verbs.StateErr)
	q.flushSends()
	q.rq.Flush(q.recvCQ, q.num)
	if l := q.link.Load(); l != nil {
		// The peer's requests now fail, as they would time out against
		// a QP in ERR on a fabric.
		l.fail(fmt.Errorf("shm: qp %d: moved to ERR", q.num))
	}
}

// toReset stops the engine, discards every request and the connection.
func (q *QP) toReset() {
	q.stopEngine(stopDiscard)
	q.sqMu.Lock()
	q.rqMu.Lock()
	q.state.Store(uint32(verbs.StateReset))
	q.sq.head.Store(0)
	q.sq.tail.Store(0)
	q.rq.Reset()
	q.recvsPosted = 0
	q.rqMu.Unlock()
	q.sqMu.Unlock()
	if l := q.link.Swap(nil); l != nil {
		l.shutdown()
	}
	q.remote = verbs.Endpoint{}
}

func (q *QP) stopEngine(mode int32) {
	if q.eng == nil {
		return
	}
	q.eng.stop(mode)
	q.running.Store(nil)
	q.eng = nil
}

// flushSends completes every request left in the send queue with
// StatusWRFlush. The engine must not be running.
func (q *QP) flushSends() {
	for h, t := q.sq.head.Load(), q.sq.tail.Load(); h != t; h++ {
		s := q.sq.slot(h)
		wc := verbs.WC{ID: s.id, Status: verbs.StatusWRFlush, Opcode: s.op, QPN: q.num}
		q.sq.head.Store(h + 1) // freed before it is seen, as in complete
		q.sendCQ.Push(wc)
	}
}

// Close implements verbs.QP: outstanding requests are flushed, the
// connection is closed and the QP number is released.
func (q *QP) Close() error {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return nil
	}
	if q.State() != verbs.StateReset {
		q.toErr()
	}
	q.stopEngine(stopDiscard)
	if l := q.link.Swap(nil); l != nil {
		l.shutdown()
	}
	if l := q.parked.Swap(nil); l != nil {
		l.fail(fmt.Errorf("shm: qp %d: closed", q.num))
	}
	q.closed = true
	q.sqMu.Lock()
	q.rqMu.Lock()
	q.gone.Store(true)
	q.rqMu.Unlock()
	q.sqMu.Unlock()
	q.mu.Unlock()
	d := q.dev
	d.mu.Lock()
	delete(d.qps, q.num)
	q.pd.nqp--
	d.cqs[q.sendCQ].remove(q)
	d.cqs[q.recvCQ].remove(q)
	d.mu.Unlock()
	return nil
}
