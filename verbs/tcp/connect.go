package tcp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/rdmacell/rdmacell/verbs"
)

// dials reports whether the QP at local dials the one at remote: the side
// whose (address, QPN) sorts first dials, the other accepts. Both sides
// compute the same answer from the same two endpoints.
func dials(local, remote *verbs.Endpoint) bool {
	if c := strings.Compare(local.Addr, remote.Addr); c != 0 {
		return c < 0
	}
	return local.QPN < remote.QPN
}

// startConnectLocked begins a new incarnation's connection: the dialing
// side starts a dial loop; both sides arm the connect timeout.
func (q *QP) startConnectLocked() {
	q.gen++
	gen := q.gen
	local := q.endpointLocked()
	q.dialer = dials(&local, &q.remote)
	q.connTimer = time.AfterFunc(q.d.opts.ConnectTimeout, func() { q.connectTimedOut(gen) })
	if !q.dialer {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	q.connCancel = cancel
	h := hello{srcQPN: q.qpn, srcPSN: q.psn, dstQPN: q.remote.QPN, dstPSN: q.remote.PSN, srcAddr: q.d.addr}
	q.dialWG.Add(1)
	go q.dialLoop(ctx, gen, h, q.remote.Addr)
}

func (q *QP) stopConnectLocked() {
	if q.connCancel != nil {
		q.connCancel()
		q.connCancel = nil
	}
	if q.connTimer != nil {
		q.connTimer.Stop()
		q.connTimer = nil
	}
}

func (q *QP) connectTimedOut(gen uint64) {
	q.mu.Lock()
	if q.gen != gen || q.link != nil || q.lost != nil {
		q.mu.Unlock()
		return
	}
	addr, qpn := q.remote.Addr, q.remote.QPN
	q.mu.Unlock()
	q.connFailed(nil, fmt.Errorf("%w: qp %d: no connection with %s (qp %d) within %v",
		ErrConnLost, q.qpn, addr, qpn, q.d.opts.ConnectTimeout))
}

// Dial retry backoff: the acceptor may not be in RTR yet.
const (
	minDialBackoff = 2 * time.Millisecond
	maxDialBackoff = 100 * time.Millisecond
)

// dialLoop connects to the peer until it succeeds, the peer proves it does
// not know the secret, or the incarnation ends (ctx).
func (q *QP) dialLoop(ctx context.Context, gen uint64, h hello, addr string) {
	defer q.dialWG.Done()
	backoff := minDialBackoff
	for {
		conn, err := q.dialOnce(ctx, &h, addr)
		if err == nil {
			q.attach(conn, gen)
			return
		}
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, ErrAuth) || errors.Is(err, ErrProtocol) {
			q.d.warn.warn(addr, "tcp: refusing peer", "qpn", q.qpn, "peer", addr, "peer_qpn", h.dstQPN, "err", err)
			q.mu.Lock()
			stale := q.gen != gen
			q.mu.Unlock()
			if !stale {
				q.connFailed(nil, fmt.Errorf("qp %d: connect to %s: %w", q.qpn, addr, err))
			}
			return
		}
		q.log.Debug("tcp: connect attempt failed, retrying", "peer", addr, "err", err)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, maxDialBackoff)
	}
}

func (q *QP) dialOnce(ctx context.Context, h *hello, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: q.d.opts.DialTimeout}
	if q.cfg.localAddr != nil {
		d.LocalAddr = q.cfg.localAddr
		d.Control = reuseAddr
	}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	_ = conn.SetDeadline(time.Now().Add(q.d.opts.HandshakeTimeout))
	// Cancelling the incarnation interrupts a handshake in progress.
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	err = dialHandshake(conn, q.d.secret, h)
	stop()
	if err != nil {
		conn.Close()
		return nil, err
	}
	_ = conn.SetDeadline(time.Time{})
	return conn, nil
}

// attach makes conn, authenticated by the dial loop of incarnation gen,
// the QP's connection.
func (q *QP) attach(conn net.Conn, gen uint64) {
	q.mu.Lock()
	if q.gen != gen || q.link != nil || q.lost != nil || (q.state != verbs.StateRTR && q.state != verbs.StateRTS) {
		q.mu.Unlock()
		conn.Close()
		return
	}
	q.stopConnectLocked()
	tuneConn(conn, &q.cfg)
	l := newLinkLocked(q, conn)
	q.mu.Unlock()
	l.start()
}

// testHookAccepted, if set, runs when accept has made a connection q's
// link and not yet written its verdict.
var testHookAccepted func(q *QP)

// accept offers conn, authenticated by the listener with hello h, to q. It
// takes the connection only if it comes from the peer of q's current
// incarnation, and answers the dialer. If q is in Init with the PSN the
// dialer names, its owner is about to move it to RTR: accept then answers
// nothing and returns a channel that is closed at q's next state change,
// for the caller to offer the connection again.
func (q *QP) accept(conn net.Conn, h *hello) (wait <-chan struct{}) {
	q.mu.Lock()
	if q.state == verbs.StateInit && h.dstPSN == q.psn && !q.closed {
		wait = q.changed
		q.mu.Unlock()
		return wait
	}
	ok := (q.state == verbs.StateRTR || q.state == verbs.StateRTS) && !q.dialer && q.link == nil && q.lost == nil &&
		h.dstPSN == q.psn && h.srcQPN == q.remote.QPN && h.srcPSN == q.remote.PSN && h.srcAddr == q.remote.Addr
	if !ok {
		q.mu.Unlock()
		q.log.Debug("tcp: connection not for this QP's current peer", "peer", conn.RemoteAddr(), "src_qpn", h.srcQPN)
		_ = writeVerdict(conn, verdictNotReady)
		conn.Close()
		return nil
	}
	q.stopConnectLocked()
	tuneConn(conn, &q.cfg)
	l := newLinkLocked(q, conn)
	// The verdict must precede every frame on the stream, and from here
	// on a PostSend finds the link and would write a request inline: the
	// writer role is held until the verdict is out.
	l.writing.Store(true)
	q.mu.Unlock()
	if testHookAccepted != nil {
		testHookAccepted(q)
	}
	err := writeVerdict(conn, verdictAccept)
	if err == nil {
		err = conn.SetDeadline(time.Time{})
	}
	l.release()
	l.start()
	if err != nil {
		q.connLost(l, fmt.Errorf("%w: qp %d: accept from %s: %w", ErrConnLost, q.qpn, l.peer, err))
	}
	return nil
}
