package tcp

import (
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rdmacell/rdmacell/verbs"
	"golang.org/x/sys/unix"
)

// link is one authenticated connection of a QP and the two goroutines that
// serve it. A QP has at most one; a new incarnation of the QP (after
// RESET) gets a new one.
type link struct {
	qp       *QP
	conn     net.Conn
	peer     string // remote address, for errors and logs
	rnrRetry int    // the peer's RNR retry count (7: forever)

	// dead is set, under qp.mu, when the QP leaves this link: from then on
	// its goroutines change nothing in the QP and exit.
	dead      atomic.Bool
	kick      chan struct{} // wakes the sender
	closing   chan struct{} // closed by shutdown
	closeOnce sync.Once
	wg        sync.WaitGroup // the sender and the receiver

	ctl control

	// Sender state, owned by the sender goroutine.
	vec      [][]byte
	nbBack   [][]byte    // backing of nb: writing consumes nb itself
	nb       net.Buffers // a field, so that passing &nb to WriteTo does not allocate
	ctlBuf   [3 * headerLen]byte
	ackTimer *time.Timer // bounds the delay of a lazy acknowledgement
	ackArmed bool

	// Receiver state, owned by the receiver goroutine.
	rd       reader
	expect   uint32 // PSN of the next request from the peer
	rbufs    [][]byte
	rnrTimer *time.Timer
}

// control holds the frames the receiver asks the sender to write: the
// sender is the only writer, so the receiver never blocks on a full
// socket while the peer waits for it to read (both sides writing and
// neither reading would deadlock).
type control struct {
	mu         sync.Mutex
	ack        uint32
	ackPending bool
	ackUrgent  bool
	rnr        uint32
	rnrPending bool
	nak        header
	nakPending bool
}

// newLinkLocked creates the link of q over conn, counted in its wait group
// before any goroutine starts, so that teardown can wait for it.
func newLinkLocked(q *QP, conn net.Conn) *link {
	l := &link{
		qp:       q,
		conn:     conn,
		peer:     conn.RemoteAddr().String(),
		rnrRetry: int(q.remote.RNRRetry),
		kick:     make(chan struct{}, 1),
		closing:  make(chan struct{}),
		expect:   q.remote.PSN,
		vec:      make([][]byte, 0, 1+maxBatch*(1+q.cfg.maxSGE)),
		nbBack:   make([][]byte, 0, 1+maxBatch*(1+q.cfg.maxSGE)),
		rbufs:    make([][]byte, 0, q.cfg.maxSGE),
		rnrTimer: time.NewTimer(time.Hour),
		ackTimer: time.NewTimer(time.Hour),
	}
	l.rnrTimer.Stop()
	l.ackTimer.Stop()
	l.rd.init(conn)
	l.wg.Add(2)
	q.link = l
	q.touch()
	return l
}

func (l *link) start() {
	go l.receive()
	go l.send()
}

// wake tells the sender there is work.
func (l *link) wake() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// shutdown closes the connection, which unblocks both goroutines. It does
// not wait for them; teardown does.
func (l *link) shutdown() {
	l.closeOnce.Do(func() {
		close(l.closing)
		l.conn.Close()
		l.rnrTimer.Stop()
		l.ackTimer.Stop()
	})
}

// queueAck asks the sender to acknowledge every request up to psn, now if
// urgent, else with its next write or after ackDelay.
func (l *link) queueAck(psn uint32, urgent bool) {
	l.ctl.mu.Lock()
	l.ctl.ack, l.ctl.ackPending = psn, true
	l.ctl.ackUrgent = l.ctl.ackUrgent || urgent
	l.ctl.mu.Unlock()
	l.wake()
}

// Control states, as the sender sees them.
const (
	ctlNone   = iota // nothing to write
	ctlLazy          // a lazy acknowledgement, which may wait
	ctlUrgent        // something to write now
)

func (l *link) controlState() int {
	l.ctl.mu.Lock()
	defer l.ctl.mu.Unlock()
	switch {
	case l.ctl.rnrPending || l.ctl.nakPending || (l.ctl.ackPending && l.ctl.ackUrgent):
		return ctlUrgent
	case l.ctl.ackPending:
		return ctlLazy
	}
	return ctlNone
}

func (l *link) queueRNR(psn uint32) {
	l.ctl.mu.Lock()
	l.ctl.rnr, l.ctl.rnrPending = psn, true
	l.ctl.mu.Unlock()
	l.wake()
}

func (l *link) queueNak(psn uint32, st verbs.Status) {
	l.ctl.mu.Lock()
	l.ctl.nak = header{typ: frameNak, psn: psn, status: st}
	l.ctl.nakPending = true
	l.ctl.mu.Unlock()
	l.wake()
}

// takeControl encodes the pending control frames into buf, which holds
// three headers, and returns their length and whether a NAK is among them:
// acknowledgement first, then an RNR notice, then a NAK.
func (l *link) takeControl(buf []byte) (n int, nak bool) {
	l.ctl.mu.Lock()
	if l.ctl.ackPending {
		encodeHeader(buf[n:], &header{typ: frameAck, psn: l.ctl.ack})
		l.ctl.ackPending, l.ctl.ackUrgent = false, false
		n += headerLen
	}
	if l.ctl.rnrPending {
		encodeHeader(buf[n:], &header{typ: frameRNR, psn: l.ctl.rnr})
		l.ctl.rnrPending = false
		n += headerLen
	}
	if l.ctl.nakPending {
		encodeHeader(buf[n:], &l.ctl.nak)
		l.ctl.nakPending = false
		n += headerLen
		nak = true
	}
	l.ctl.mu.Unlock()
	return n, nak
}

// tuneConn sets the socket options of a QP's connection. TCP_USER_TIMEOUT
// and keepalive make the kernel give up on a peer that stopped answering,
// within about the QP's ack budget, even when the socket is idle or its
// send buffer is full.
func tuneConn(c net.Conn, cfg *qpConfig) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return
	}
	_ = tc.SetNoDelay(true)
	budget := cfg.ackBudget()
	// Keepalive counts in whole seconds.
	idle := max(cfg.timeout, time.Second)
	_ = tc.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true, Idle: idle, Interval: idle, Count: cfg.retryCount + 1})
	if rc, err := tc.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) {
			_ = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(budget/time.Millisecond))
		})
	}
}

// reuseAddr lets a QP bound to a fixed local port reconnect while the
// previous connection from that port sits in TIME_WAIT.
func reuseAddr(_, _ string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
	})
	if err != nil {
		return err
	}
	return serr
}
