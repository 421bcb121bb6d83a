package tcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rdmacell/rdmacell/verbs"
	"github.com/rdmacell/rdmacell/verbs/internal/soft"
)

// Limits on QP attributes; larger values are ErrInvalidArgument.
const (
	maxQueueDepth = 1 << 16
	maxSGE        = 64
)

// qpConfig is a verbs.QPConfig with defaults applied and values checked.
type qpConfig struct {
	maxSendWR, maxRecvWR int
	maxSGE               int
	timeout              time.Duration
	retryCount           int
	rnrRetry             int
	minRNR               time.Duration
	localAddr            *net.TCPAddr
}

// ackBudget is how long outstanding requests may go without any sign of
// life from the peer before they fail: Timeout × (RetryCount+1).
func (c *qpConfig) ackBudget() time.Duration {
	return c.timeout * time.Duration(c.retryCount+1)
}

func checkConfig(cfg *verbs.QPConfig) (qpConfig, error) {
	c := qpConfig{
		maxSendWR:  cfg.MaxSendWR,
		maxRecvWR:  cfg.MaxRecvWR,
		maxSGE:     cfg.MaxSGE,
		timeout:    cfg.Timeout,
		retryCount: cfg.RetryCount,
		rnrRetry:   cfg.RNRRetry,
		minRNR:     cfg.MinRNRTimer,
	}
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.maxSendWR, 1024)
	def(&c.maxRecvWR, 1024)
	def(&c.maxSGE, 4)
	if c.timeout == 0 {
		c.timeout = time.Second
	}
	if c.minRNR == 0 {
		c.minRNR = time.Millisecond
	}
	switch {
	case c.maxSendWR < 0 || c.maxSendWR > maxQueueDepth:
		return c, fmt.Errorf("%w: MaxSendWR %d, want 1..%d", verbs.ErrInvalidArgument, c.maxSendWR, maxQueueDepth)
	case c.maxRecvWR < 0 || c.maxRecvWR > maxQueueDepth:
		return c, fmt.Errorf("%w: MaxRecvWR %d, want 1..%d", verbs.ErrInvalidArgument, c.maxRecvWR, maxQueueDepth)
	case c.maxSGE < 0 || c.maxSGE > maxSGE:
		return c, fmt.Errorf("%w: MaxSGE %d, want 1..%d", verbs.ErrInvalidArgument, c.maxSGE, maxSGE)
	case c.timeout < 0:
		return c, fmt.Errorf("%w: Timeout %v, want > 0", verbs.ErrInvalidArgument, c.timeout)
	case c.retryCount < 0:
		return c, fmt.Errorf("%w: RetryCount %d, want >= 0", verbs.ErrInvalidArgument, c.retryCount)
	case c.rnrRetry < 0 || c.rnrRetry > 7:
		return c, fmt.Errorf("%w: RNRRetry %d, want 0..7", verbs.ErrInvalidArgument, c.rnrRetry)
	case c.minRNR < 0:
		return c, fmt.Errorf("%w: MinRNRTimer %v, want > 0", verbs.ErrInvalidArgument, c.minRNR)
	}
	if cfg.LocalAddr != "" {
		a, err := net.ResolveTCPAddr("tcp", cfg.LocalAddr)
		if err != nil {
			return c, fmt.Errorf("%w: LocalAddr %q: %v", verbs.ErrInvalidArgument, cfg.LocalAddr, err)
		}
		c.localAddr = a
	}
	return c, nil
}

// QP is an RC queue pair of the tcp provider. It implements verbs.QP.
//
// Three goroutines serve a connected QP: a receiver that reads frames
// (placing payload as responder, taking acknowledgements as requester), a
// sender that writes the frames nobody wrote inline (see send.go), and,
// while requests are outstanding, a timer that fails them when the peer
// goes silent. All of them block on I/O, channels or the timer, so an
// idle QP costs no CPU.
type QP struct {
	d              *Device
	pd             *PD
	qpn            uint32
	cfg            qpConfig
	sendCQ, recvCQ *soft.CQ
	recvHolds      *holds // the acknowledgements held for answers to requests completing into recvCQ
	rq             *soft.RecvQueue
	checkRecvFn    func(*verbs.RecvWR) error
	recvPosted     chan struct{} // wakes a responder waiting for a receive (RNR)
	log            *slog.Logger
	ackTimer       *time.Timer
	dialWG         sync.WaitGroup

	// progress is the monotonic time (see monoNow) of the last sign of
	// life from the peer: a frame or payload chunk read, a write accepted.
	progress atomic.Int64

	mu         sync.Mutex
	state      verbs.QPState
	changed    chan struct{} // closed and replaced at every state change
	closed     bool
	gen        uint64 // incarnation, bumped at each RTR
	psn        uint32 // our initial PSN, from Init on
	remote     verbs.Endpoint
	dialer     bool
	link       *link
	connCancel context.CancelFunc
	connTimer  *time.Timer
	err        error
	// lost is set when the connection went away while the QP owed the
	// peer nothing (see connLost); lostLink is that connection, whose
	// goroutines teardown still waits for.
	lost     error
	lostLink *link
	sq       sendQueue
	armed    bool // ackTimer is pending
	corked   bool // posts wait for Uncork (see Cork)
	// rnrWait is set while the peer says the oldest requests wait for a
	// receive: a live responder that is not ready, not a silent one.
	rnrWait bool
	held    soft.RecvSlot
	holding bool // the responder took held from rq and has not completed it
}

var _ verbs.QP = (*QP)(nil)

func newQP(pd *PD, c verbs.QPConfig) (*QP, error) {
	cfg, err := checkConfig(&c)
	if err != nil {
		return nil, err
	}
	d := pd.d
	if c.SendCQ == nil || c.RecvCQ == nil {
		return nil, fmt.Errorf("%w: SendCQ and RecvCQ are required", verbs.ErrInvalidArgument)
	}
	scq, _, err := d.ownCQ(c.SendCQ, "SendCQ")
	if err != nil {
		return nil, err
	}
	rcq, rholds, err := d.ownCQ(c.RecvCQ, "RecvCQ")
	if err != nil {
		return nil, err
	}
	q := &QP{
		d:          d,
		pd:         pd,
		cfg:        cfg,
		sendCQ:     scq,
		recvCQ:     rcq,
		recvHolds:  rholds,
		rq:         soft.NewRecvQueue(cfg.maxRecvWR, cfg.maxSGE),
		recvPosted: make(chan struct{}, 1),
		sq:         newSendQueue(cfg.maxSendWR, cfg.maxSGE),
		held:       soft.RecvSlot{SGL: make([]verbs.SGE, 0, cfg.maxSGE)},
		changed:    make(chan struct{}),
	}
	q.checkRecvFn = q.checkRecv
	q.ackTimer = time.AfterFunc(time.Hour, q.onAckTimer)
	q.ackTimer.Stop()
	if q.qpn, err = d.addQP(q); err != nil {
		return nil, err
	}
	q.log = d.log.With("qpn", q.qpn)
	return q, nil
}

// Num implements verbs.QP.
func (q *QP) Num() uint32 { return q.qpn }

// State implements verbs.QP.
func (q *QP) State() verbs.QPState {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.state
}

// Err reports why the QP entered StateErr, or why its connection is gone
// while it waits in RTS for its next request to fail. It is nil while the
// QP is healthy, and after Modify moved it to StateErr of its own accord.
// The error wraps one of ErrConnLost, ErrAckTimeout, ErrAuth, ErrProtocol,
// ErrRemote or ErrResponder.
func (q *QP) Err() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.err != nil {
		return q.err
	}
	return q.lost
}

// Endpoint implements verbs.QP.
func (q *QP) Endpoint() verbs.Endpoint {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.endpointLocked()
}

func (q *QP) endpointLocked() verbs.Endpoint {
	return verbs.Endpoint{
		Provider: "tcp",
		Addr:     q.d.addr,
		QPN:      q.qpn,
		PSN:      q.psn,
		Host:     q.d.opts.Host,
		RNRRetry: uint8(q.cfg.rnrRetry),
	}
}

// Modify implements verbs.QP. Moving to StateRTR starts connecting to the
// peer in remote; see the package documentation for who dials.
func (q *QP) Modify(state verbs.QPState, remote *verbs.Endpoint) error {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return fmt.Errorf("tcp: modify qp %d: %w", q.qpn, verbs.ErrClosed)
	}
	from := q.state
	if !verbs.CanTransition(from, state) {
		q.mu.Unlock()
		return fmt.Errorf("%w: qp %d cannot move from %s to %s", verbs.ErrInvalidState, q.qpn, from, state)
	}
	switch state {
	case verbs.StateInit:
		q.psn = randUint32()
		q.setStateLocked(state)
	case verbs.StateRTR:
		if err := q.checkRemote(remote); err != nil {
			q.mu.Unlock()
			return err
		}
		q.remote = *remote
		q.setStateLocked(state)
		q.startConnectLocked()
	case verbs.StateRTS:
		q.setStateLocked(state)
	case verbs.StateErr, verbs.StateReset:
		q.mu.Unlock()
		q.teardown(state)
		return nil
	}
	q.mu.Unlock()
	return nil
}

// setStateLocked changes the state and wakes whoever waits for a change.
func (q *QP) setStateLocked(s verbs.QPState) {
	q.state = s
	close(q.changed)
	q.changed = make(chan struct{})
}

func (q *QP) checkRemote(r *verbs.Endpoint) error {
	switch {
	case r == nil:
		return fmt.Errorf("%w: qp %d: moving to RTR needs the peer's endpoint", verbs.ErrInvalidArgument, q.qpn)
	case r.Provider != "tcp":
		return fmt.Errorf("%w: qp %d: peer endpoint of provider %q, want \"tcp\"", verbs.ErrInvalidArgument, q.qpn, r.Provider)
	case r.Addr == "" || len(r.Addr) > maxAddrLen:
		return fmt.Errorf("%w: qp %d: peer endpoint address %q", verbs.ErrInvalidArgument, q.qpn, r.Addr)
	case r.RNRRetry > 7:
		return fmt.Errorf("%w: qp %d: peer RNR retry %d, want 0..7", verbs.ErrInvalidArgument, q.qpn, r.RNRRetry)
	case r.Addr == q.d.addr && r.QPN == q.qpn:
		return fmt.Errorf("%w: qp %d cannot connect to itself", verbs.ErrInvalidArgument, q.qpn)
	}
	if _, _, err := net.SplitHostPort(r.Addr); err != nil {
		return fmt.Errorf("%w: qp %d: peer endpoint address %q: %v", verbs.ErrInvalidArgument, q.qpn, r.Addr, err)
	}
	return nil
}

// teardown moves the QP to StateErr (flushing) or StateReset (discarding).
// It stops the connection first and waits for its goroutines, so that no
// byte moves into or out of memory the caller gets back through a flush
// completion.
func (q *QP) teardown(state verbs.QPState) {
	q.mu.Lock()
	from := q.state
	live := q.link
	if live != nil && live.dead.Load() {
		live = nil
	}
	links := [2]*link{q.link, q.lostLink}
	q.link, q.lostLink = nil, nil
	q.stopConnectLocked()
	q.setStateLocked(state)
	for _, l := range links {
		if l != nil {
			l.dead.Store(true)
		}
	}
	q.mu.Unlock()
	if live != nil {
		live.leave(q.d)
	}
	for _, l := range links {
		if l != nil {
			l.shutdown() // a no-op for a link that left
			l.wg.Wait()
		}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if state == verbs.StateErr {
		if from != verbs.StateErr {
			q.err = nil
		}
		q.failSendsLocked(q.sq.head, verbs.StatusWRFlush)
		q.flushRecvsLocked()
		return
	}
	q.sq.reset()
	q.rnrWait = false
	q.rq.Reset()
	q.holding = false
	q.err, q.lost = nil, nil
	q.psn = 0
	q.remote = verbs.Endpoint{}
}

// Close implements verbs.QP.
func (q *QP) Close() error {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return fmt.Errorf("tcp: close qp %d: %w", q.qpn, verbs.ErrClosed)
	}
	q.mu.Unlock()
	q.teardown(verbs.StateErr)
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.dialWG.Wait()
	q.ackTimer.Stop()
	q.d.removeQP(q)
	q.pd.qpClosed()
	return nil
}

// enterErrLocked moves the QP to StateErr because of a failure seen on
// link l (nil when the QP has no connection). It reports false, and does
// nothing, when l is no longer the QP's live connection: a failure of a
// connection the QP has already left is no news. The caller completes the
// requests and then shuts l down.
func (q *QP) enterErrLocked(l *link, err error) bool {
	if q.link != l || (l != nil && l.dead.Load()) {
		return false
	}
	if q.state != verbs.StateRTR && q.state != verbs.StateRTS {
		return false
	}
	q.setStateLocked(verbs.StateErr)
	q.err = err
	q.stopConnectLocked()
	if l != nil {
		l.dead.Store(true)
	}
	return true
}

// connLost handles the end of connection l by a closing or failing
// socket. If the QP owes the peer nothing (no request outstanding, no
// receive half filled) it stays in its state, as an RNIC whose peer went
// away notices nothing until it next sends: its next request fails with
// StatusRetryExceeded. Otherwise the QP fails as in connFailed.
func (q *QP) connLost(l *link, err error) {
	q.mu.Lock()
	if q.link == l && !l.dead.Load() && q.sq.idle() && !q.holding {
		q.loseLinkLocked(l, err)
		q.mu.Unlock()
		l.shutdown()
		q.log.Debug("tcp: connection ended; the QP fails at its next request", "peer", l.peer, "err", err)
		return
	}
	q.mu.Unlock()
	q.connFailed(l, err)
}

// loseLinkLocked detaches l from the QP without changing its state.
func (q *QP) loseLinkLocked(l *link, err error) {
	l.dead.Store(true)
	q.link = nil
	q.lostLink = l
	q.lost = err
}

// failLostLocked fails the requests just posted on a QP whose connection
// is gone.
func (q *QP) failLostLocked() {
	if q.lost == nil || !q.enterErrLocked(nil, q.lost) {
		return
	}
	q.failSendsLocked(q.sq.head, verbs.StatusRetryExceeded)
	q.flushRecvsLocked()
}

// connFailed fails the QP because its connection broke, never came up, or
// the peer stayed silent or broke the protocol: the oldest outstanding
// request completes with StatusRetryExceeded, the rest are flushed.
func (q *QP) connFailed(l *link, err error) {
	q.mu.Lock()
	if !q.enterErrLocked(l, err) {
		q.mu.Unlock()
		return
	}
	q.failSendsLocked(q.sq.head, verbs.StatusRetryExceeded)
	q.flushRecvsLocked()
	q.mu.Unlock()
	if l != nil {
		l.shutdown()
	}
	if errors.Is(err, ErrPeerLeft) {
		q.log.Debug("tcp: QP failed: its peer left", "peer", q.remoteName(l), "err", err)
		return
	}
	if closedByPeer(err) && q.peerAlive() {
		q.log.Debug("tcp: QP failed: its peer, still running, closed the connection", "peer", q.remoteName(l), "err", err)
		return
	}
	q.d.warn.warn(q.source(), "tcp: QP failed", "qpn", q.qpn, "peer", q.remoteName(l), "err", err)
}

// peerProbeTimeout bounds peerAlive's connection attempt.
const peerProbeTimeout = 250 * time.Millisecond

// closedByPeer reports whether err is the peer's kernel ending the
// connection (end of file, reset, broken pipe): its process closed the
// socket, or ended.
func closedByPeer(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// peerAlive reports whether the peer's device still accepts connections.
// A peer whose connection ended without a goodbye either died or reset its
// QP while a frame was half written (the cell engine recycling a slow
// path): the two look the same on the wire, but only a dead peer's
// listener is gone. The probe closes before its hello, which the peer's
// device takes for nothing (errNoHello). A peer that is alive and failed
// the connection itself says so in its own log.
func (q *QP) peerAlive() bool {
	addr := q.source()
	if addr == "" {
		return false
	}
	c, err := net.DialTimeout("tcp", addr, peerProbeTimeout)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

// source is what the QP's warnings are rate-limited by: the peer's device
// address, the same for every QP to that peer.
func (q *QP) source() string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.remote.Addr
}

func (q *QP) remoteName(l *link) string {
	if l != nil {
		return l.peer
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.remote.Addr
}

// touch records a sign of life from the peer.
func (q *QP) touch() { q.progress.Store(monoNow()) }

// onAckTimer fails the outstanding requests when the peer has shown no
// sign of life for the QP's ack budget. The timer is armed only while
// requests are outstanding.
func (q *QP) onAckTimer() {
	q.mu.Lock()
	q.armed = false
	if q.state != verbs.StateRTS || q.sq.idle() {
		q.mu.Unlock()
		return
	}
	budget := q.cfg.ackBudget()
	if q.rnrWait || (q.link != nil && q.link.rd.pending()) {
		// An RNR wait lasts as long as the peer's RNR retries say, as on
		// an RNIC, where receiver-not-ready answers keep the transport
		// timer from expiring; a dead peer still ends it through its
		// closed connection or TCP's own timeouts. Bytes waiting in our
		// socket are a sign of life we were too busy to read.
		q.touch()
	}
	quiet := time.Duration(monoNow() - q.progress.Load())
	if quiet < budget {
		q.armed = true
		q.ackTimer.Reset(budget - quiet)
		q.mu.Unlock()
		return
	}
	l := q.link
	var err error
	if l == nil {
		err = fmt.Errorf("%w: qp %d: no connection to %s after %v", ErrConnLost, q.qpn, q.remote.Addr, quiet.Round(time.Millisecond))
	} else {
		err = fmt.Errorf("%w: qp %d: %s silent for %v with requests outstanding", ErrAckTimeout, q.qpn, l.peer, quiet.Round(time.Millisecond))
	}
	q.mu.Unlock()
	q.connFailed(l, err)
}

// armLocked starts the ack timer if it is not running.
func (q *QP) armLocked() {
	if !q.armed {
		q.armed = true
		q.ackTimer.Reset(q.cfg.ackBudget())
	}
}

// epoch anchors monoNow; time.Since uses the monotonic clock.
var epoch = time.Now()

func monoNow() int64 { return int64(time.Since(epoch)) }
