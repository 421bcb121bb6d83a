// Package hostseg is memory that the processes of one host share: one
// process creates a segment, tells the others its name by any channel,
// and they open it.
//
// A segment is an anonymous memory file (memfd): nothing appears on a file
// system, /dev/shm's size limit does not apply, and the kernel frees the
// memory once the last process that maps it is gone, however it ends. Its
// name is the creator's pid and descriptor; the others open it through
// /proc, which the kernel allows to processes of the same user. Its size
// is sealed, so that no process can shrink it under another's mapping.
//
// A segment also says which of its users are alive. Each user holds a lock
// on its own byte (an open-file-description lock, which the kernel drops
// when the process exits, however it exits), and any user can ask whether
// another's lock is still held. That is how a process waiting on shared
// memory for a peer learns that the peer is gone, without a heartbeat.
package hostseg

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/rdmacell/rdmacell/internal/prefault"
)

const sizeSeals = unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_SEAL

// mapped counts the process's mappings and their bytes, for its stats.
var mapped struct{ bytes, segments atomic.Int64 }

// Mapped is the memory of the segments this process has mapped now, and
// how many there are.
func Mapped() (bytes int64, segments int) {
	return mapped.bytes.Load(), int(mapped.segments.Load())
}

// Segment is one mapping of a shared segment.
type Segment struct {
	name string
	f    *os.File
	b    []byte
}

// Create makes a segment of size bytes, backed by memory up front (so
// that running out of memory is an error here, not a SIGBUS later), and
// maps it. It stays open to others as long as this mapping is.
func Create(size int) (*Segment, error) {
	if size <= 0 {
		return nil, fmt.Errorf("hostseg: size %d, want > 0", size)
	}
	fd, err := unix.MemfdCreate("rdmacell-segment", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("hostseg: memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), "rdmacell-segment")
	if err := unix.Fallocate(fd, 0, 0, int64(size)); err != nil {
		f.Close()
		return nil, fmt.Errorf("hostseg: reserve %d bytes: %w", size, err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, sizeSeals); err != nil {
		f.Close()
		return nil, fmt.Errorf("hostseg: seal: %w", err)
	}
	return mapFile(fmt.Sprintf("%d:%d", os.Getpid(), fd), f, size)
}

// Open maps the segment called name, which must be at least size bytes.
func Open(name string, size int) (*Segment, error) {
	pid, fd, ok := strings.Cut(name, ":")
	if !ok || !isNumber(pid) || !isNumber(fd) {
		return nil, fmt.Errorf("hostseg: %q is not a segment name", name)
	}
	f, err := os.OpenFile("/proc/"+pid+"/fd/"+fd, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("hostseg: open: %w", err)
	}
	// Anything else the descriptor might be (a reused pid's file, say)
	// is refused: only a segment has its size sealed.
	seals, err := unix.FcntlInt(f.Fd(), unix.F_GET_SEALS, 0)
	if err != nil || seals&sizeSeals != sizeSeals {
		f.Close()
		return nil, fmt.Errorf("hostseg: %s is not a segment (seals %#x, %v)", name, seals, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("hostseg: open: %w", err)
	}
	if fi.Size() < int64(size) {
		f.Close()
		return nil, fmt.Errorf("hostseg: segment %s is %d bytes, want %d", name, fi.Size(), size)
	}
	return mapFile(name, f, size)
}

func isNumber(s string) bool {
	_, err := strconv.ParseUint(s, 10, 31)
	return err == nil
}

func mapFile(name string, f *os.File, size int) (*Segment, error) {
	b, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("hostseg: map %s: %w", name, err)
	}
	if err := prefault.Pages(b, true); err != nil {
		_ = unix.Munmap(b)
		f.Close()
		return nil, fmt.Errorf("hostseg: map %s: %w", name, err)
	}
	mapped.bytes.Add(int64(len(b)))
	mapped.segments.Add(1)
	return &Segment{name: name, f: f, b: b}, nil
}

// Name is what another process passes to Open.
func (s *Segment) Name() string { return s.name }

// Bytes is the mapping. It is valid until Close.
func (s *Segment) Bytes() []byte { return s.b }

// Lock takes user i's lock for this mapping. It fails if another mapping
// holds it.
func (s *Segment) Lock(i int) error {
	lk := byteLock(i)
	if err := unix.FcntlFlock(s.f.Fd(), unix.F_OFD_SETLK, &lk); err != nil {
		return fmt.Errorf("hostseg: lock %d of %s: %w", i, s.name, err)
	}
	return nil
}

// Held reports whether a mapping other than this one holds user i's lock.
func (s *Segment) Held(i int) (bool, error) {
	lk := byteLock(i)
	if err := unix.FcntlFlock(s.f.Fd(), unix.F_OFD_GETLK, &lk); err != nil {
		return false, fmt.Errorf("hostseg: query lock %d of %s: %w", i, s.name, err)
	}
	return lk.Type != unix.F_UNLCK, nil
}

func byteLock(i int) unix.Flock_t {
	return unix.Flock_t{Type: unix.F_WRLCK, Whence: int16(io.SeekStart), Start: int64(i), Len: 1}
}

// Close unmaps the segment and releases its locks.
func (s *Segment) Close() error {
	if s.b == nil {
		return nil
	}
	mapped.bytes.Add(-int64(len(s.b)))
	mapped.segments.Add(-1)
	err := unix.Munmap(s.b)
	s.b = nil
	return errors.Join(err, s.f.Close())
}
