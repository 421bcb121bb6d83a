package shm

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// A link is the connection of one QP to its peer QP: the control socket,
// the pair segment mapped by both, and the peer device the memory files
// come from. The socket doubles as the liveness signal: when the peer
// process dies the kernel closes its end and the reader sees EOF.
type link struct {
	dev      *Device
	qp       *QP
	conn     *net.UnixConn
	pair     pairView
	peer     *peer
	peerAddr string
	peerQPN  uint32
	peerPD   uint32
	// peerMinRNR is the responder's RNR timer: a requester waiting for an
	// acknowledgement allows it on top of its own timeout.
	peerMinRNR time.Duration

	state      atomic.Int32 // linkParked, linkAdopted or linkDead
	down       atomic.Bool
	downOnce   sync.Once
	downCh     chan struct{}
	downErr    error // set before downCh closes
	readerDone chan struct{}

	fetchMu  sync.Mutex
	fetchSeq uint32
	fetches  map[uint32]chan int
}

// Link states. A link made by dialling is adopted at once; a link accepted
// for a QP that is not yet connected waits parked until the QP moves to
// RTR with this peer, or its socket closes.
const (
	linkParked int32 = iota
	linkAdopted
	linkDead
)

func newLink(d *Device, q *QP, c *net.UnixConn, seg []byte, side int, p *peer) *link {
	return &link{
		dev: d, qp: q, conn: c, pair: pairView{b: seg, side: side}, peer: p, peerAddr: p.addr,
		downCh: make(chan struct{}), readerDone: make(chan struct{}), fetches: make(map[uint32]chan int),
	}
}

// isDown reports whether the connection is gone.
func (l *link) isDown() bool { return l.down.Load() }

// fail records that the connection is gone and wakes the QP's engine.
func (l *link) fail(err error) {
	l.downOnce.Do(func() {
		l.downErr = err
		l.down.Store(true)
		close(l.downCh)
		_ = l.conn.Close()
		if l.state.Load() == linkAdopted {
			l.qp.kick()
		}
	})
}

// start runs the reader.
func (l *link) start() {
	l.dev.wg.Add(1)
	go l.read()
}

// read serves the socket until it closes: memory files the peer asks for,
// answers to this side's requests, and EOF.
func (l *link) read() {
	defer l.dev.wg.Done()
	defer close(l.readerDone)
	buf, oob := make([]byte, maxMsg), make([]byte, oobSpace)
	for {
		msg, fds, err := receive(l.conn, buf, oob)
		if err == nil {
			err = l.handle(msg, fds)
		}
		if err != nil {
			if errors.Is(err, errProtocol) {
				slog.Warn("shm: closing connection", "qp", l.qp.num, "peer", l.peerAddr, "peer_qp", l.peerQPN, "err", err)
			}
			l.fail(fmt.Errorf("shm: qp %d: connection to %s qp %d: %w", l.qp.num, l.peerAddr, l.peerQPN, err))
			break
		}
	}
	if l.state.CompareAndSwap(linkParked, linkDead) {
		l.qp.parked.CompareAndSwap(l, nil)
		l.release()
	}
}

func (l *link) handle(msg []byte, fds []int) error {
	typ, status, req, memID, err := decodeFixed(msg)
	if err != nil {
		closeFds(fds)
		return err
	}
	if typ == msgFetch {
		fd, ok := l.dev.memoryFd(memID)
		if !ok {
			return send(l.conn, encodeMemory(false, req, memID))
		}
		err := send(l.conn, encodeMemory(true, req, memID), fd)
		unix.Close(fd)
		return err
	}
	l.fetchMu.Lock()
	ch := l.fetches[req]
	delete(l.fetches, req)
	l.fetchMu.Unlock()
	fd := -1
	if status == 0 {
		fd = fds[0]
	}
	if ch == nil {
		// The requester gave up waiting.
		closeFds(fds)
		return nil
	}
	ch <- fd
	return nil
}

// errNoMemory: the peer has no memory file with remote access under the
// id its own region table named; the region was deregistered meanwhile.
var errNoMemory = errors.New("shm: peer does not offer the memory file")

// fetch asks the peer for memory file id and returns its descriptor. It
// gives up at deadline, when stop closes, or when the connection fails.
func (l *link) fetch(id uint32, deadline time.Time, stop <-chan struct{}) (int, error) {
	ch := make(chan int, 1)
	l.fetchMu.Lock()
	l.fetchSeq++
	req := l.fetchSeq
	l.fetches[req] = ch
	l.fetchMu.Unlock()
	forget := func() {
		l.fetchMu.Lock()
		delete(l.fetches, req)
		l.fetchMu.Unlock()
		select { // an answer that raced with giving up
		case fd := <-ch:
			closeFds([]int{fd})
		default:
		}
	}
	if err := send(l.conn, encodeFetch(req, id)); err != nil {
		forget()
		return -1, fmt.Errorf("shm: ask %s for memory file %d: %w", l.peerAddr, id, err)
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case fd := <-ch:
		if fd < 0 {
			return -1, fmt.Errorf("%w %d", errNoMemory, id)
		}
		return fd, nil
	case <-t.C:
		forget()
		return -1, fmt.Errorf("shm: %s did not send memory file %d in time", l.peerAddr, id)
	case <-l.downCh:
		forget()
		return -1, l.downErr
	case <-stop:
		forget()
		return -1, fmt.Errorf("shm: qp %d stopped", l.qp.num)
	}
}

// release unmaps the segment and drops the peer reference. The reader must
// have exited.
func (l *link) release() {
	_ = unix.Munmap(l.pair.b)
	l.dev.releasePeer(l.peer)
}

// shutdown closes the socket, waits for the reader and releases the link.
func (l *link) shutdown() {
	l.fail(fmt.Errorf("shm: qp %d: disconnected", l.qp.num))
	<-l.readerDone
	l.release()
}

// ringPeer wakes the peer's engine.
func (l *link) ringPeer() { l.pair.bell(1 - l.pair.side).ring() }

// checkPeerUID refuses connections from processes of other users: a peer
// can write into registered memory, so only the owner's processes may.
func checkPeerUID(c *net.UnixConn, uid int) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return err
	}
	if cerr != nil {
		return fmt.Errorf("shm: peer credentials: %w", cerr)
	}
	if int(cred.Uid) != uid {
		return fmt.Errorf("shm: peer process %d runs as uid %d, not %d", cred.Pid, cred.Uid, uid)
	}
	return nil
}
