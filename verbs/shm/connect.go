package shm

import (
	"errors"
	"fmt"
	"net"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rdmacell/rdmacell/verbs"
)

// Connecting two QPs. Of the two, the one with the smaller (address, QP
// number) dials at its move to RTR; the other accepts, whenever its own
// move to RTR comes (the dial is kept parked until then). So each pair has
// one socket and one segment whatever the order in which the two sides
// are brought up, and a requester whose peer is not yet in RTR waits for
// it within its timeout, as on a fabric.

// dials reports whether the QP at (addr, qpn) dials the one at remote.
func dials(addr string, qpn uint32, remote verbs.Endpoint) bool {
	if addr != remote.Addr {
		return addr < remote.Addr
	}
	return qpn < remote.QPN
}

// dial connects q to remote: it creates the pair segment and sends it
// with the device's region table. Called with q.mu held.
func (q *QP) dial(remote verbs.Endpoint) (*link, error) {
	segFd, seg, err := createSegment("rdmacell-shm-pair", pairSize)
	if err != nil {
		return nil, err
	}
	// The peer gets its own descriptor through the socket; the mapping
	// keeps the file alive on this side.
	defer unix.Close(segFd)
	initPair(seg)
	l, err := q.handshake(remote, segFd, seg)
	if err != nil {
		_ = unix.Munmap(seg)
		return nil, fmt.Errorf("shm: qp %d: connect to %s qp %d: %w", q.num, remote.Addr, remote.QPN, err)
	}
	l.state.Store(linkAdopted)
	l.pair.attach()
	// The peer may have adopted the link already and have requests
	// waiting for this end to attach: its engine sleeps until rung.
	l.ringPeer()
	l.start()
	return l, nil
}

func (q *QP) handshake(remote verbs.Endpoint, segFd int, seg []byte) (*link, error) {
	d := q.dev
	dialer := net.Dialer{Timeout: handshakeTimeout}
	nc, err := dialer.Dial("unixpacket", remote.Addr)
	if err != nil {
		return nil, err
	}
	c := nc.(*net.UnixConn)
	ok := false
	defer func() {
		if !ok {
			_ = c.Close()
		}
	}()
	if err := checkPeerUID(c, d.uid); err != nil {
		return nil, err
	}
	_ = c.SetDeadline(time.Now().Add(handshakeTimeout))
	h := hello{fromQPN: q.num, toQPN: remote.QPN, psn: q.psn, pd: q.pd.id, minRNR: q.cfg.MinRNRTimer, addr: d.addr}
	if err := send(c, h.encode(), segFd, d.tableFd); err != nil {
		return nil, err
	}
	msg, fds, err := receive(c, make([]byte, maxMsg), make([]byte, oobSpace))
	if err != nil {
		return nil, err
	}
	r, err := decodeReply(msg)
	if err != nil {
		closeFds(fds)
		return nil, err
	}
	if r.refused {
		return nil, fmt.Errorf("%w: peer refused: %s", verbs.ErrInvalidArgument, r.reason)
	}
	_ = c.SetDeadline(time.Time{})
	p, err := d.acquirePeer(remote.Addr, fds[0])
	if err != nil {
		return nil, err
	}
	l := newLink(d, q, c, seg, 0, p)
	l.peerQPN, l.peerPD, l.peerMinRNR = remote.QPN, r.pd, r.minRNR
	ok = true
	return l, nil
}

// acceptLoop takes connections until the listener closes.
func (d *Device) acceptLoop() {
	defer d.wg.Done()
	for {
		c, err := d.ln.AcceptUnix()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of descriptors and the like: let it pass.
			time.Sleep(10 * time.Millisecond)
			continue
		}
		d.wg.Add(1)
		go d.serve(c)
	}
}

// serve runs the listener's half of the handshake.
func (d *Device) serve(c *net.UnixConn) {
	defer d.wg.Done()
	if err := checkPeerUID(c, d.uid); err != nil {
		_ = c.Close()
		return
	}
	// Until the hello is in, Close must be able to cut the wait short.
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		_ = c.Close()
		return
	}
	d.handshakes[c] = struct{}{}
	d.mu.Unlock()
	_ = c.SetReadDeadline(time.Now().Add(handshakeTimeout))
	msg, fds, err := receive(c, make([]byte, maxMsg), make([]byte, oobSpace))
	d.mu.Lock()
	delete(d.handshakes, c)
	d.mu.Unlock()
	if err != nil {
		_ = c.Close()
		return
	}
	h, err := decodeHello(msg)
	if err != nil {
		closeFds(fds)
		refuse(c, err.Error())
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	segFd, tableFd := fds[0], fds[1]
	d.mu.Lock()
	q := d.qps[h.toQPN]
	d.mu.Unlock()
	if q == nil {
		closeFds(fds)
		refuse(c, fmt.Sprintf("no qp %d on %s", h.toQPN, d.addr))
		return
	}
	seg, err := mapSegment(segFd, pairSize, unix.PROT_READ|unix.PROT_WRITE)
	unix.Close(segFd)
	if err == nil && !pairValid(seg) {
		_ = unix.Munmap(seg)
		err = fmt.Errorf("shm: pair segment has a wrong header")
	}
	if err != nil {
		unix.Close(tableFd)
		refuse(c, err.Error())
		return
	}
	p, err := d.acquirePeer(h.addr, tableFd)
	if err != nil {
		_ = unix.Munmap(seg)
		refuse(c, err.Error())
		return
	}
	l := newLink(d, q, c, seg, 1, p)
	l.peerQPN, l.peerPD, l.peerMinRNR = h.fromQPN, h.pd, h.minRNR
	if reason := q.offer(l); reason != "" {
		l.release()
		refuse(c, reason)
		return
	}
}

func refuse(c *net.UnixConn, reason string) {
	_ = send(c, reply{refused: true, reason: reason}.encode())
	_ = c.Close()
}

// offer hands an accepted link to q: adopted at once if q is in RTR or RTS
// and expects this peer, parked otherwise. It answers the dialer and
// starts the reader, or returns why it refuses.
func (q *QP) offer(l *link) string {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return fmt.Sprintf("qp %d is closed", q.num)
	}
	st := q.State()
	live := st == verbs.StateRTR || st == verbs.StateRTS
	if live {
		if q.link.Load() != nil {
			return fmt.Sprintf("qp %d is already connected", q.num)
		}
		if q.remote.Addr != l.peerAddr || q.remote.QPN != l.peerQPN {
			return fmt.Sprintf("qp %d expects %s qp %d", q.num, q.remote.Addr, q.remote.QPN)
		}
	}
	ans := reply{pd: q.pd.id, minRNR: q.cfg.MinRNRTimer}
	if err := send(l.conn, ans.encode(), q.dev.tableFd); err != nil {
		return err.Error()
	}
	if live {
		l.state.Store(linkAdopted)
		q.adopt(l)
	} else if old := q.parked.Swap(l); old != nil {
		old.fail(fmt.Errorf("shm: qp %d: replaced by a newer connection", q.num))
	}
	l.start()
	return ""
}

// adopt makes l q's connection. Called with q.mu held, l adopted.
func (q *QP) adopt(l *link) {
	l.pair.attach()
	q.link.Store(l)
	q.publishRecvs()
	l.ringPeer()
	q.kick()
}
