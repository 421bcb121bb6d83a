package tcp

import (
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

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
	writeErr  atomic.Pointer[error] // the first write error, left to the receiver (see writeFailed)
	kick      chan struct{}         // wakes the sender
	closing   chan struct{}         // closed by shutdown
	closeOnce sync.Once
	wg        sync.WaitGroup // the sender and the receiver

	ctl control

	// Writer role (see send.go): the fields below it belong to whoever
	// holds writing.
	writing  atomic.Bool
	missed   atomic.Bool // someone found the role taken
	raw      syscall.RawConn
	vec      [][]byte
	nbBack   [][]byte    // backing of nb: writing consumes nb itself
	nb       net.Buffers // a field, so that passing &nb to WriteTo does not allocate
	ctlBuf   [3 * headerLen]byte
	rest     [][]byte // the unwritten end of an inline write
	iov      []unix.Iovec
	niov, wn int
	werr     error
	wfn      func(fd uintptr) bool

	// Receiver state, owned by the receiver goroutine.
	rd       reader
	expect   uint32 // PSN of the next request from the peer
	ackDue   bool   // an urgent acknowledgement waits for the receiver's next system call
	rbufs    [][]byte
	rnrTimer *time.Timer
}

// control holds the frames the receiver asks the sender to write: the
// sender is the only writer, so the receiver never blocks on a full
// socket while the peer waits for it to read (both sides writing and
// neither reading would deadlock). See ack.go for how acknowledgements
// wait for a frame to ride with.
type control struct {
	mu         sync.Mutex
	ack        uint32
	ackPending bool
	ackUrgent  bool
	rnr        uint32
	rnrPending bool
	nak        header
	nakPending bool
	// lazy makes a lazy or held acknowledgement urgent when it is due,
	// unless a frame took it along before; lazyArmed says it is pending,
	// armedFor when it fires (monoNow).
	lazy      *time.Timer
	lazyArmed bool
	armedFor  int64
	// due is when the pending acknowledgement must go (monoNow): the
	// earliest deadline of the requests it covers.
	due int64
	// held says the pending acknowledgement waits for an answer, ready
	// that the receive of its request has completed; candidate that it
	// is for a request that may be answered (held or not); listed that
	// the link is in its receive CQ's holds.
	held, ready, candidate, listed bool
	// alone says an acknowledgement of a candidate went out by itself
	// and no frame followed yet; answered scores how often a frame did
	// follow (see takeControlLocked).
	alone    bool
	answered int8
	// Counts, for tests: acknowledgements written by themselves, held
	// ones written without an answer, and held ones a park released.
	nAlone, nMissed, nParked uint64
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
		rest:     make([][]byte, 0, inlineIov),
		iov:      make([]unix.Iovec, inlineIov),
		rbufs:    make([][]byte, 0, q.cfg.maxSGE),
		rnrTimer: time.NewTimer(time.Hour),
	}
	l.rnrTimer.Stop()
	l.ctl.lazy = time.AfterFunc(time.Hour, l.lazyDue)
	l.ctl.lazy.Stop()
	l.wfn = l.writevFD
	if sc, ok := conn.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			l.raw = raw
		}
	}
	l.rd.init(conn)
	l.rd.before = l.flushDue
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
		l.ctl.lazy.Stop()
	})
}

// goodbyeGrace bounds how long the receiver gets, after a write failed, to
// find the peer's goodbye in the socket before the write's error stands.
const goodbyeGrace = 200 * time.Millisecond

// goodbyeSpins bounds the wait for the writer role in goodbye: an inline
// writer lets go within a system call; a sender blocked on a full socket
// does not, and then the peer goes without a goodbye.
const goodbyeSpins = 64

// byeLinger bounds how long a connection that said goodbye stays open,
// in the background, for the peer to read the BYE and close its end.
const byeLinger = 250 * time.Millisecond

// leave ends the link in order, for a QP that is reset or destroyed: it
// writes a BYE (see goodbye), half-closes, makes the link's goroutines
// exit at once and, in the background (counted in the device's lingering
// group, which Close waits for), reads and discards what the peer still
// sends until the peer, having read the BYE, closes its end, or
// byeLinger passes. Closing a socket with unread data in it would reset
// the connection and could destroy the BYE before the peer reads it.
// Without a BYE written it is shutdown.
func (l *link) leave(d *Device) {
	if !l.goodbye() {
		l.shutdown()
		return
	}
	l.closeOnce.Do(func() {
		close(l.closing)
		l.rnrTimer.Stop()
		l.ctl.lazy.Stop()
		if cw, ok := l.conn.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		_ = l.conn.SetReadDeadline(time.Unix(1, 0)) // the receiver leaves now
		d.lingering.Add(1)
		go func() {
			defer d.lingering.Done()
			l.wg.Wait()
			_ = l.conn.SetReadDeadline(time.Now().Add(byeLinger))
			_, _ = io.Copy(io.Discard, l.conn)
			_ = l.conn.Close()
		}()
	})
}

// goodbye writes a BYE frame if the socket takes it at once, so that the
// peer takes the end of the connection for the orderly end it is (see
// onBye), not for a failure, and reports whether it did. The QP has
// already left the link (dead is set), so no new frame starts meanwhile; a
// frame half written would make the BYE unreadable, so none is sent then.
func (l *link) goodbye() bool {
	if l.raw == nil {
		return false
	}
	taken := false
	for range goodbyeSpins {
		if taken = l.writing.CompareAndSwap(false, true); taken {
			break
		}
		runtime.Gosched()
	}
	if !taken {
		return false
	}
	defer l.writing.Store(false)
	if len(l.rest) > 0 || l.writeErr.Load() != nil {
		return false
	}
	encodeHeader(l.ctlBuf[:headerLen], &header{typ: frameBye})
	l.vec = append(l.vec[:0], l.ctlBuf[:headerLen])
	n, err := l.writeNow(l.vec)
	return err == nil && n == headerLen
}

// writeFailed handles a failed write. A reset or closed connection is
// often the peer's orderly leaving, whose goodbye then waits, unread, in
// our socket: the receiver is given goodbyeGrace to read it, and reports
// the write's error only if it finds no goodbye (see readFailed). The
// timer ends the link even if the receiver is not reading but waiting
// (for a receive to be posted, say).
func (l *link) writeFailed(err error) {
	if l.dead.Load() {
		return
	}
	werr := fmt.Errorf("%w: qp %d: write to %s: %w", ErrConnLost, l.qp.qpn, l.peer, err)
	if l.writeErr.CompareAndSwap(nil, &werr) {
		_ = l.conn.SetReadDeadline(time.Now().Add(goodbyeGrace))
		time.AfterFunc(2*goodbyeGrace, func() {
			if !l.dead.Load() {
				l.qp.connLost(l, werr)
			}
		})
	}
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
