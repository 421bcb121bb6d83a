package shm

import (
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// peer is what this device knows of another device it has QPs connected
// to: its region table and the memory files of its regions, each mapped
// once however many QPs write into it.
type peer struct {
	addr  string
	refs  int // links using it; guarded by Device.mu
	table peerTable

	mu   sync.RWMutex
	mems map[uint32]*mapping
}

// mapping is a peer's memory file mapped into this process. Engines
// acquire it around each copy; a retired mapping is unmapped when the last
// copy into it is done, so a copy never touches unmapped memory.
type mapping struct {
	b     []byte
	users atomic.Int32
	dead  atomic.Bool
	gone  atomic.Bool
}

// acquire pins m for one copy; it fails if m has been retired.
func (m *mapping) acquire() bool {
	m.users.Add(1)
	if m.dead.Load() {
		m.release()
		return false
	}
	return true
}

// release ends a copy.
func (m *mapping) release() {
	if m.users.Add(-1) == 0 && m.dead.Load() {
		m.unmap()
	}
}

// retire stops new copies and unmaps once running ones are done.
func (m *mapping) retire() {
	m.dead.Store(true)
	if m.users.Load() == 0 {
		m.unmap()
	}
}

func (m *mapping) unmap() {
	if m.gone.CompareAndSwap(false, true) {
		_ = unix.Munmap(m.b)
	}
}

// lookup returns the mapping of memory file id, if this process has one.
func (p *peer) lookup(id uint32) *mapping {
	p.mu.RLock()
	m := p.mems[id]
	p.mu.RUnlock()
	return m
}

// insert maps the memory file fd as id. If another engine mapped it
// meanwhile, that mapping wins. It then retires the mappings of memory
// files that no region of the peer lies in any more: a miss is the
// moment a requester meets memory it has not seen, when old memory has
// likely been replaced.
func (p *peer) insert(id uint32, fd int) (*mapping, error) {
	b, err := mapMemory(fd)
	if err != nil {
		return nil, err
	}
	live := p.table.liveMemIDs()
	p.mu.Lock()
	defer p.mu.Unlock()
	if m := p.mems[id]; m != nil && !m.dead.Load() {
		_ = unix.Munmap(b)
		return m, nil
	}
	m := &mapping{b: b}
	p.mems[id] = m
	for mid, old := range p.mems {
		if mid != id && !live[mid] {
			delete(p.mems, mid)
			old.retire()
		}
	}
	return m, nil
}

// close retires every mapping and unmaps the table.
func (p *peer) close() {
	p.mu.Lock()
	for id, m := range p.mems {
		delete(p.mems, id)
		m.retire()
	}
	p.mu.Unlock()
	_ = unix.Munmap(p.table.b)
}
