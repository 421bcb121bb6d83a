package tcp

import (
	"errors"
	"net"
	"time"
)

// acceptLoop hands each incoming connection to a handshake goroutine,
// at most maxHandshakes at a time.
func (d *Device) acceptLoop() {
	defer d.wg.Done()
	for {
		c, err := d.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of descriptors and the like: back off rather than spin.
			d.warn.warn("accept", "tcp: accept", "err", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		select {
		case d.hsSem <- struct{}{}:
		default:
			peer := c.RemoteAddr().String()
			d.warn.warn(hostOf(peer), "tcp: too many handshakes in progress, dropping connection", "peer", peer)
			c.Close()
			continue
		}
		d.wg.Add(1)
		go d.serveHandshake(c)
	}
}

// serveHandshake authenticates an incoming connection and offers it to the
// QP it names. Nothing but the fixed-size handshake messages is read
// before the peer has proved it knows the secret.
func (d *Device) serveHandshake(c net.Conn) {
	defer d.wg.Done()
	defer func() { <-d.hsSem }()
	untrack, ok := d.trackHandshake(c)
	if !ok {
		c.Close()
		return
	}
	defer untrack()
	peer := c.RemoteAddr().String()
	_ = c.SetDeadline(time.Now().Add(d.opts.HandshakeTimeout))
	h, err := acceptHandshake(c, d.secret)
	if err != nil {
		c.Close()
		if errors.Is(err, errNoHello) {
			d.log.Debug("tcp: connection closed before its handshake", "peer", peer)
			return
		}
		d.warn.warn(hostOf(peer), "tcp: refused connection", "peer", peer, "qpn", h.dstQPN, "err", err)
		return
	}
	q := d.lookupQP(h.dstQPN)
	if q == nil {
		d.log.Debug("tcp: connection for unknown QP", "peer", peer, "qpn", h.dstQPN)
		_ = writeVerdict(c, verdictNotReady)
		c.Close()
		return
	}
	// A dialer usually reaches its peer just before the peer's owner moves
	// it to RTR: hold the connection for a while rather than send the
	// dialer into backoff. Half the handshake timeout leaves the dialer
	// time to read the verdict.
	park := time.NewTimer(d.opts.HandshakeTimeout / 2)
	defer park.Stop()
	for {
		wait := q.accept(c, &h)
		if wait == nil {
			return
		}
		select {
		case <-wait:
		case <-park.C:
			_ = writeVerdict(c, verdictNotReady)
			c.Close()
			return
		}
	}
}
