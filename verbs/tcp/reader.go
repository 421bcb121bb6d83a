package tcp

import (
	"errors"
	"io"
	"net"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// reader reads a QP's incoming frames. It keeps a small read-ahead
// buffer: one readv takes a frame's header together with whatever
// follows it in the socket (the payload of a small request, the frames
// after it), so a stream of small requests, or a request with an
// acknowledgement behind it, costs one system call instead of one per
// header and per payload. A payload is copied out of the buffer only for
// the bytes that came along with its header, at most readAhead bytes; the
// rest of a payload larger than smallRead is read straight into its
// target memory, with the buffer taking what follows it in the same
// readv. Every byte lands in its target only after the caller has
// checked the header it belongs to.
type reader struct {
	conn net.Conn
	raw  syscall.RawConn // nil when conn is no socket (tests use pipes)
	hdr  [headerLen]byte // the header readHeader returned
	buf  [readAhead]byte
	r, w int // buf[r:w] is read and not yet consumed

	// readv's arguments and results, fields so that the function handed
	// to raw.Read is made once and reading allocates nothing.
	iov  [2]unix.Iovec
	niov int
	n    int
	err  error
	fn   func(fd uintptr) bool

	gone   bool
	goneFn func(fd uintptr)

	// before, if set, runs before every system call that reads: the
	// link writes the acknowledgements that cannot wait for the peer.
	before func()
}

// Read-ahead sizes: the buffer, and the largest rest of a payload that is
// read into the buffer (and copied) rather than straight into its target.
// Copying a few hundred bytes costs far less than the system call it
// saves.
const (
	readAhead = 4096
	smallRead = 512
)

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

// compact moves the unread bytes to the front of the buffer.
func (r *reader) compact() {
	if r.r == r.w {
		r.r, r.w = 0, 0
		return
	}
	if r.r > 0 {
		r.w = copy(r.buf[:], r.buf[r.r:r.w])
		r.r = 0
	}
}

// readHeader reads the next frame header into hdr.
func (r *reader) readHeader() error {
	if r.w-r.r < headerLen {
		r.compact()
		for r.w < headerLen {
			n, err := r.readv(nil, r.buf[r.w:])
			r.w += n
			if err != nil && r.w < headerLen {
				if errors.Is(err, io.EOF) && r.w > 0 {
					err = io.ErrUnexpectedEOF
				}
				return err
			}
		}
	}
	copy(r.hdr[:], r.buf[r.r:r.r+headerLen])
	r.r += headerLen
	return nil
}

// fill reads exactly len(dst) bytes of the current frame's payload into
// dst: first what the buffer holds, then, for a small rest, through the
// buffer (taking what follows along), else straight into dst with the
// buffer catching what follows. last is kept for the callers' sake: any
// byte read past dst is buffered, so reading ahead is always safe.
func (r *reader) fill(dst []byte, last bool) error {
	_ = last
	n := copy(dst, r.buf[r.r:r.w])
	r.r += n
	dst = dst[n:]
	for len(dst) > 0 {
		r.compact() // empty: everything buffered went into dst
		var err error
		if len(dst) <= smallRead {
			n, err = r.readv(nil, r.buf[:])
			r.w = n
			c := copy(dst, r.buf[:r.w])
			r.r = c
			n = c
		} else {
			n, err = r.readv(dst, r.buf[:])
			if n > len(dst) {
				r.w = n - len(dst)
				n = len(dst)
			}
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
	if r.before != nil {
		r.before()
	}
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
		n, e := iovCall(unix.SYS_READV, fd, r.iov[:r.niov])
		switch e {
		case 0:
			r.n = n
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

// rawMax bounds the bytes of a readv or writev made as a raw system
// call, which skips the runtime's bookkeeping around a system call. The
// sockets are non-blocking, so neither call can block, and copying this
// much takes microseconds, during which the goroutine cannot be
// preempted; larger calls, a payload read or written in place, go
// through the runtime as usual. A profile of a two-rank 8-byte AllReduce
// over tcp spent 7% of its CPU on entering these calls, waking the
// runtime's monitor thread so that it could take the processor back
// from a call that blocks, which these never do.
const rawMax = 64 << 10

// iovCall makes the readv or writev trap over iov and returns its result
// and errno.
func iovCall(trap, fd uintptr, iov []unix.Iovec) (int, syscall.Errno) {
	var n uint64
	for _, v := range iov {
		n += v.Len
	}
	// Direct calls, so that the compiler keeps iov alive across them.
	var r uintptr
	var e syscall.Errno
	if n <= rawMax {
		r, _, e = unix.RawSyscall(trap, fd, uintptr(unsafe.Pointer(unsafe.SliceData(iov))), uintptr(len(iov)))
	} else {
		r, _, e = unix.Syscall(trap, fd, uintptr(unsafe.Pointer(unsafe.SliceData(iov))), uintptr(len(iov)))
	}
	return int(r), e
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
