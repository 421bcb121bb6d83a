// Package hostseg is memory that the processes of one host share by name:
// one process creates a segment, tells the others its name by any channel,
// they open it, and the creator unlinks the name once they have.
//
// A segment also says which of its users are alive. Each user holds a lock
// on its own byte (an open-file-description lock, which the kernel drops
// when the process exits, however it exits), and any user can ask whether
// another's lock is still held. That is how a process waiting on shared
// memory for a peer learns that the peer is gone, without a heartbeat.
package hostseg

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Dir is where segments are named: a memory file system on Linux.
const Dir = "/dev/shm"

// prefix starts every segment's name, so that one a crashed creator left
// behind can be told apart.
const prefix = "rdmacell-"

// Segment is one mapping of a shared segment.
type Segment struct {
	name string
	f    *os.File
	b    []byte
}

// Create makes a segment of size bytes with a fresh random name, backed by
// memory up front (so that a full memory file system is an error here, not
// a SIGBUS later), and maps it.
func Create(size int) (*Segment, error) {
	if size <= 0 {
		return nil, fmt.Errorf("hostseg: size %d, want > 0", size)
	}
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, fmt.Errorf("hostseg: name: %w", err)
	}
	name := prefix + hex.EncodeToString(id[:])
	path := filepath.Join(Dir, name)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("hostseg: create: %w", err)
	}
	if err := unix.Fallocate(int(f.Fd()), 0, 0, int64(size)); err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("hostseg: reserve %d bytes in %s: %w", size, Dir, err)
	}
	s, err := mapFile(name, f, size)
	if err != nil {
		os.Remove(path)
		return nil, err
	}
	return s, nil
}

// Open maps the segment called name, which must be at least size bytes.
func Open(name string, size int) (*Segment, error) {
	if !strings.HasPrefix(name, prefix) || strings.ContainsAny(name, "/\x00") {
		return nil, fmt.Errorf("hostseg: %q is not a segment name", name)
	}
	f, err := os.OpenFile(filepath.Join(Dir, name), os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("hostseg: open: %w", err)
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

func mapFile(name string, f *os.File, size int) (*Segment, error) {
	b, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("hostseg: map %s: %w", name, err)
	}
	return &Segment{name: name, f: f, b: b}, nil
}

// Name is what another process passes to Open.
func (s *Segment) Name() string { return s.name }

// Bytes is the mapping. It is valid until Close.
func (s *Segment) Bytes() []byte { return s.b }

// Unlink removes the name; the mappings stay valid and the memory is freed
// when the last one is closed.
func (s *Segment) Unlink() error {
	err := os.Remove(filepath.Join(Dir, s.name))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

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
	err := unix.Munmap(s.b)
	s.b = nil
	return errors.Join(err, s.f.Close())
}
