package comm

import (
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/rdmacell/rdmacell/verbs"
)

// region is memory from verbs.Alloc registered in the protection domain of
// every device the communicator opened.
type region struct {
	mem  *verbs.Memory
	mrs  [numDevices]verbs.MR
	addr uint64
	n    int
	user bool // handed out by Alloc, so Free may release it
}

func (r *region) bytes() []byte { return r.mem.Bytes() }

// memory registers allocations and finds the region a buffer lies in.
type memory struct {
	pds [numDevices]verbs.PD

	mu     sync.RWMutex
	byAddr []*region // sorted by address
	closed bool
}

const accessAll = verbs.AccessLocalWrite | verbs.AccessRemoteWrite

// alloc allocates n > 0 bytes and registers them everywhere.
func (m *memory) alloc(n int, user bool) (*region, error) {
	mem, err := verbs.Alloc(n)
	if err != nil {
		return nil, err
	}
	r := &region{mem: mem, addr: mem.Addr(), n: n, user: user}
	for d, pd := range m.pds {
		if pd == nil {
			continue
		}
		if r.mrs[d], err = pd.RegMR(mem.Bytes(), accessAll); err != nil {
			err = fmt.Errorf("register %d bytes with %s: %w", n, device(d), err)
			_ = r.release()
			return nil, err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		_ = r.release()
		return nil, ErrClosed
	}
	i := sort.Search(len(m.byAddr), func(i int) bool { return m.byAddr[i].addr > r.addr })
	m.byAddr = append(m.byAddr, nil)
	copy(m.byAddr[i+1:], m.byAddr[i:])
	m.byAddr[i] = r
	return r, nil
}

// release deregisters r and frees its memory.
func (r *region) release() error {
	var errs []error
	for d, mr := range r.mrs {
		if mr != nil {
			if err := mr.Close(); err != nil && !errors.Is(err, verbs.ErrClosed) {
				errs = append(errs, err)
			}
			r.mrs[d] = nil
		}
	}
	if err := r.mem.Free(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// lookup returns the region holding all of b and b's offset in it, or nil
// when b is not registered memory (or is empty).
func (m *memory) lookup(b []byte) (*region, int) {
	if len(b) == 0 {
		return nil, 0
	}
	addr := verbs.AddrOf(b)
	m.mu.RLock()
	defer m.mu.RUnlock()
	i := sort.Search(len(m.byAddr), func(i int) bool { return m.byAddr[i].addr > addr })
	if i == 0 {
		return nil, 0
	}
	r := m.byAddr[i-1]
	off := addr - r.addr
	if off+uint64(len(b)) > uint64(r.n) {
		return nil, 0
	}
	return r, int(off)
}

// free releases the user allocation that starts at b.
func (m *memory) free(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	addr := verbs.AddrOf(b)
	m.mu.Lock()
	i := sort.Search(len(m.byAddr), func(i int) bool { return m.byAddr[i].addr >= addr })
	if i == len(m.byAddr) || m.byAddr[i].addr != addr || !m.byAddr[i].user {
		m.mu.Unlock()
		return fmt.Errorf("%w: Free of %d bytes at %#x: not memory from Alloc (or freed already)", ErrInvalidArgument, len(b), addr)
	}
	r := m.byAddr[i]
	m.byAddr = append(m.byAddr[:i], m.byAddr[i+1:]...)
	m.mu.Unlock()
	return r.release()
}

// close releases every region still registered, user allocations
// included; later allocations fail.
func (m *memory) close() error {
	m.mu.Lock()
	rs := m.byAddr
	m.byAddr, m.closed = nil, true
	m.mu.Unlock()
	var errs []error
	for _, r := range rs {
		errs = append(errs, r.release())
	}
	return errors.Join(errs...)
}
