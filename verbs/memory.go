package verbs

import (
	"fmt"
	"os"
	"sort"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/rdmacell/rdmacell/internal/prefault"
)

// Memory is an allocation off the Go heap that can be registered as memory
// regions. It is backed by an anonymous memory file, sealed against
// resizing, so that providers can map it into peer processes safely, and it is pre-faulted at allocation: on the
// machines this runs on a first touch of a page costs about 11 µs, which a
// data path must not pay.
type Memory struct {
	b      []byte // the usable bytes, as asked of Alloc
	mapped []byte // the whole mapping, a whole number of pages
	fd     int
}

var allocs struct {
	sync.RWMutex
	byAddr []*Memory // sorted by address
}

var pageSize = os.Getpagesize()

// Alloc allocates n bytes, rounded up to a whole number of pages, zeroed and
// pre-faulted. Huge pages are requested where the kernel offers them.
func Alloc(n int) (*Memory, error) {
	if n <= 0 {
		return nil, fmt.Errorf("%w: alloc size %d, want > 0", ErrInvalidArgument, n)
	}
	size := (n + pageSize - 1) &^ (pageSize - 1)
	fd, err := unix.MemfdCreate("rdmacell", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("verbs: memfd_create: %w", err)
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("verbs: size memory file to %d bytes: %w", size, err)
	}
	// A peer that maps this file must be able to trust its size: a file
	// that could shrink under a mapping would fault the peer's copies.
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("verbs: seal memory file: %w", err)
	}
	b, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("verbs: map %d bytes: %w", size, err)
	}
	// Best effort: shmem huge pages are often disabled; the mapping works
	// either way.
	_ = unix.Madvise(b, unix.MADV_HUGEPAGE)
	if err := prefault.Pages(b, true); err != nil {
		_ = unix.Munmap(b)
		unix.Close(fd)
		return nil, fmt.Errorf("verbs: alloc %d bytes: %w", size, err)
	}
	m := &Memory{b: b[:n:n], mapped: b, fd: fd}
	allocs.Lock()
	i := sort.Search(len(allocs.byAddr), func(i int) bool { return allocs.byAddr[i].Addr() > m.Addr() })
	allocs.byAddr = append(allocs.byAddr, nil)
	copy(allocs.byAddr[i+1:], allocs.byAddr[i:])
	allocs.byAddr[i] = m
	allocs.Unlock()
	return m, nil
}

// Adopt makes memory the program already owns (of the Go heap, of C, of
// another library) a Memory that providers can register, without copying
// it. The Memory keeps b reachable until Free, which forgets it and
// leaves b to its owner. It has no memory file (Fd returns -1), so a
// provider that shares memory with other processes (shm) refuses to
// register it. b must not be empty nor overlap another Memory.
func Adopt(b []byte) (*Memory, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("%w: adopt empty memory", ErrInvalidArgument)
	}
	m := &Memory{b: b[:len(b):len(b)], fd: -1}
	allocs.Lock()
	defer allocs.Unlock()
	addr, end := m.Addr(), m.Addr()+uint64(len(b))
	i := sort.Search(len(allocs.byAddr), func(i int) bool { return allocs.byAddr[i].Addr() > addr })
	// Only the memory before b and the memory after it can overlap it.
	for _, o := range allocs.byAddr[max(i-1, 0):min(i+1, len(allocs.byAddr))] {
		if o.Addr() < end && addr < o.Addr()+uint64(o.Len()) {
			return nil, fmt.Errorf("%w: adopt %d bytes at %#x: they overlap memory at %#x (%d bytes)", ErrInvalidArgument, len(b), addr, o.Addr(), o.Len())
		}
	}
	allocs.byAddr = append(allocs.byAddr, nil)
	copy(allocs.byAddr[i+1:], allocs.byAddr[i:])
	allocs.byAddr[i] = m
	return m, nil
}

// Adopted reports whether m came from Adopt: memory its owner holds, with
// no memory file to share.
func (m *Memory) Adopted() bool { return m.fd < 0 }

// Bytes returns the allocated memory.
func (m *Memory) Bytes() []byte { return m.b }

// Addr returns the virtual address of the first byte.
func (m *Memory) Addr() uint64 { return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(m.b)))) }

// Len returns the usable length, as asked of Alloc.
func (m *Memory) Len() int { return len(m.b) }

// Fd returns the memory file backing the allocation, for providers that
// share it with other processes, or -1 for adopted memory. It stays owned
// by m.
func (m *Memory) Fd() int { return m.fd }

// MappedLen is the length of the mapping, a whole number of pages.
func (m *Memory) MappedLen() int { return len(m.mapped) }

// Free unmaps the memory, or, for adopted memory, forgets it and leaves
// its bytes to their owner. Regions registered over it must be
// deregistered first; using the bytes of an allocation afterwards faults.
func (m *Memory) Free() error {
	allocs.Lock()
	for i, x := range allocs.byAddr {
		if x == m {
			allocs.byAddr = append(allocs.byAddr[:i], allocs.byAddr[i+1:]...)
			break
		}
	}
	allocs.Unlock()
	if m.b == nil {
		return nil
	}
	if m.Adopted() {
		m.b = nil
		return nil
	}
	err := unix.Munmap(m.mapped)
	unix.Close(m.fd)
	m.b, m.mapped = nil, nil
	return err
}

// Lookup finds the allocation that holds all of mem and returns it with
// mem's offset inside it. Providers use it in RegMR.
func Lookup(mem []byte) (*Memory, int, error) {
	if len(mem) == 0 {
		return nil, 0, fmt.Errorf("%w: empty memory", ErrInvalidArgument)
	}
	addr := uint64(uintptr(unsafe.Pointer(unsafe.SliceData(mem))))
	allocs.RLock()
	defer allocs.RUnlock()
	i := sort.Search(len(allocs.byAddr), func(i int) bool { return allocs.byAddr[i].Addr() > addr })
	if i > 0 {
		m := allocs.byAddr[i-1]
		off := addr - m.Addr()
		if off+uint64(len(mem)) <= uint64(len(m.b)) {
			return m, int(off), nil
		}
	}
	return nil, 0, fmt.Errorf("%w: memory at %#x (%d bytes) was not allocated by verbs.Alloc nor adopted", ErrInvalidArgument, addr, len(mem))
}

// AddrOf returns the virtual address of b's first byte, for building
// scatter-gather elements.
func AddrOf(b []byte) uint64 { return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }
