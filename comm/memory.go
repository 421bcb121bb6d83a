package comm

import (
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/rdmacell/rdmacell/verbs"
)

// region is memory from verbs.Alloc registered in the protection domain of
// every device the communicator opened, or memory of the program's that
// Register adopted, registered with every device but shm.
type region struct {
	mem     *verbs.Memory
	mrs     [numDevices]verbs.MR
	addr    uint64
	n       int
	user    bool // handed out by Alloc, so Free may release it
	adopted bool // the program's, from Register, so Unregister may forget it
}

// anyDevice asks lookup for a region registered with every device opened,
// for a receive whose peer is not known yet.
const anyDevice = numDevices

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
	return m.add(&region{mem: mem, addr: mem.Addr(), n: n, user: user})
}

// adopt registers memory the program owns with every device that can
// reach it: shm peers map memory files, which such memory has not.
func (m *memory) adopt(b []byte) (*region, error) {
	mem, err := verbs.Adopt(b)
	if err != nil {
		return nil, err
	}
	return m.add(&region{mem: mem, addr: mem.Addr(), n: len(b), adopted: true})
}

// add registers r's memory with every device it can be registered with
// and makes it a region lookup finds; on failure it releases r.
func (m *memory) add(r *region) (*region, error) {
	for d, pd := range m.pds {
		if pd == nil || r.adopted && device(d) == devShm {
			continue
		}
		var err error
		if r.mrs[d], err = pd.RegMR(r.bytes(), accessAll); err != nil {
			err = fmt.Errorf("register %d bytes with %s: %w", r.n, device(d), err)
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
// when b is not memory registered with dev (or is empty); with anyDevice,
// registered with every device.
func (m *memory) lookup(b []byte, dev device) (*region, int) {
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
	if off+uint64(len(b)) > uint64(r.n) || !r.registered(m, dev) {
		return nil, 0
	}
	return r, int(off)
}

// registered reports whether r is registered with dev, or with every
// device of m for anyDevice.
func (r *region) registered(m *memory, dev device) bool {
	if dev != anyDevice {
		return r.mrs[dev] != nil
	}
	for d, pd := range m.pds {
		if pd != nil && r.mrs[d] == nil {
			return false
		}
	}
	return true
}

// free releases the user allocation that starts at b.
func (m *memory) free(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	r := m.take(b, func(r *region) bool { return r.user })
	if r == nil {
		return fmt.Errorf("%w: Free of %d bytes at %#x: not memory from Alloc (or freed already)", ErrInvalidArgument, len(b), verbs.AddrOf(b))
	}
	return r.release()
}

// forget deregisters the memory Register adopted, which is exactly b.
func (m *memory) forget(b []byte) error {
	r := m.take(b, func(r *region) bool { return r.adopted && r.n == len(b) })
	if r == nil {
		return fmt.Errorf("%w: Unregister of %d bytes at %#x: not memory Register registered, whole (or unregistered already)", ErrInvalidArgument, len(b), verbs.AddrOf(b))
	}
	return r.release()
}

// take removes and returns the region that starts at b, if ok holds for
// it.
func (m *memory) take(b []byte, ok func(*region) bool) *region {
	if len(b) == 0 {
		return nil
	}
	addr := verbs.AddrOf(b)
	m.mu.Lock()
	defer m.mu.Unlock()
	i := sort.Search(len(m.byAddr), func(i int) bool { return m.byAddr[i].addr >= addr })
	if i == len(m.byAddr) || m.byAddr[i].addr != addr || !ok(m.byAddr[i]) {
		return nil
	}
	r := m.byAddr[i]
	m.byAddr = append(m.byAddr[:i], m.byAddr[i+1:]...)
	return r
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
