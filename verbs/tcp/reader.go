package tcp

import (
	"errors"
	"io"
	"net"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// reader reads a QP's incoming frames. On a socket it fills a frame's
// payload and, in the same readv, as much of the next header as has
// arrived: a stream of small requests then costs one system call per
// request instead of two. Every byte still lands where it belongs, the
// payload straight in its target memory, and nothing is read past the
// next header, whose payload target is not known yet.
type reader struct {
	conn net.Conn
	raw  syscall.RawConn // nil when conn is no socket (tests use pipes)
	hdr  [headerLen]byte
	have int // bytes of the next header already in hdr

	// readv's arguments and results, fields so that the function handed
	// to raw.Read is made once and reading allocates nothing.
	iov  [2]unix.Iovec
	niov int
	n    int
	err  error
	fn   func(fd uintptr) bool

	gone   bool
	goneFn func(fd uintptr)
}

func (r *reader) init(conn net.Conn) {
	r.conn = conn
	if sc, ok := conn.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			r.raw = raw
		}
	}
	r.fn = r.readvFD
	r.goneFn = r.goneFD
}

// readHeader reads the next frame header into hdr.
func (r *reader) readHeader() error {
	for r.have < headerLen {
		n, err := r.readv(nil, r.hdr[r.have:])
		r.have += n
		if err != nil && r.have < headerLen {
			if errors.Is(err, io.EOF) && r.have > 0 {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
	}
	// Consumed: the caller decodes hdr before the next read refills it.
	r.have = 0
	return nil
}

// fill reads exactly len(dst) bytes into dst. last says dst ends the
// frame's payload, so that the next header may be read along with it.
func (r *reader) fill(dst []byte, last bool) error {
	for len(dst) > 0 {
		var spill []byte
		if last {
			spill = r.hdr[r.have:]
		}
		n, err := r.readv(dst, spill)
		if n > len(dst) {
			r.have += n - len(dst)
			n = len(dst)
		}
		dst = dst[n:]
		if err != nil && len(dst) > 0 {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return nil
}

// readv reads into a and then b with one system call, or one Read when
// conn is no socket. It returns an error only when it read nothing.
func (r *reader) readv(a, b []byte) (int, error) {
	if r.raw == nil {
		if len(a) > 0 {
			return r.conn.Read(a)
		}
		return r.conn.Read(b)
	}
	r.niov = 0
	for _, p := range [2][]byte{a, b} {
		if len(p) > 0 {
			r.iov[r.niov].Base = unsafe.SliceData(p)
			r.iov[r.niov].SetLen(len(p))
			r.niov++
		}
	}
	r.n, r.err = 0, nil
	if err := r.raw.Read(r.fn); err != nil {
		return 0, err
	}
	switch {
	case r.err != nil:
		return 0, r.err
	case r.n == 0:
		return 0, io.EOF
	}
	return r.n, nil
}

// readvFD is the body of raw.Read: false asks the runtime to wait until
// the socket is readable.
func (r *reader) readvFD(fd uintptr) bool {
	for {
		n, _, e := unix.Syscall(unix.SYS_READV, fd, uintptr(unsafe.Pointer(&r.iov[0])), uintptr(r.niov))
		switch e {
		case 0:
			r.n = int(n)
			return true
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false
		}
		r.err = e
		return true
	}
}

// pending reports whether bytes wait unread in the socket. It may run
// beside the receiver goroutine: it only asks the kernel.
func (r *reader) pending() bool {
	if r.raw == nil {
		return false
	}
	n := 0
	_ = r.raw.Control(func(fd uintptr) {
		n, _ = unix.IoctlGetInt(int(fd), unix.SIOCINQ)
	})
	return n > 0
}

// peerGone reports whether the peer has closed or reset the connection,
// even if bytes it sent before wait unread.
func (r *reader) peerGone() bool {
	if r.raw == nil {
		return false
	}
	r.gone = false
	if err := r.raw.Control(r.goneFn); err != nil {
		return true
	}
	return r.gone
}

func (r *reader) goneFD(fd uintptr) {
	fds := [1]unix.PollFd{{Fd: int32(fd), Events: unix.POLLRDHUP}}
	if n, err := unix.Poll(fds[:], 0); err == nil && n > 0 {
		r.gone = fds[0].Revents&(unix.POLLRDHUP|unix.POLLHUP|unix.POLLERR) != 0
	}
}
