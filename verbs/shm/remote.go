package shm

import (
	"errors"
	"fmt"

	"github.com/rdmacell/rdmacell/verbs"
)

// remote checks a WRITE of n bytes at addr under rkey against the peer's
// region table and returns the destination in this process's mapping of
// the peer's memory, pinned until m.release.
func (e *engine) remote(l *link, rkey uint32, addr, n uint64, c *clock, fetch bool) (dst []byte, m *mapping, st verbs.Status, err error) {
	t := l.peer.table
	r, ok := region{}, false
	for _, h := range e.hints {
		if h.key == rkey && rkey != 0 {
			r, ok = t.read(h.slot, rkey)
			break
		}
	}
	if !ok {
		if i, found := t.find(rkey); found {
			if r, ok = t.read(i, rkey); ok {
				e.hints[e.nextHint] = keyHint{key: rkey, slot: i}
				e.nextHint = (e.nextHint + 1) % len(e.hints)
			}
		}
	}
	if !ok {
		return nil, nil, verbs.StatusRemoteAccess, fmt.Errorf("shm: rkey %#x is not registered at %s", rkey, l.peerAddr)
	}
	if r.pd != l.peerPD || r.access&uint32(verbs.AccessRemoteWrite) == 0 ||
		addr < r.addr || addr-r.addr > r.len || n > r.len-(addr-r.addr) {
		return nil, nil, verbs.StatusRemoteAccess, fmt.Errorf("shm: %d bytes at %#x under rkey %#x outside the region or its rights", n, addr, rkey)
	}
	m, err = e.mapping(l, r.memID, c, fetch)
	if err != nil {
		if errors.Is(err, errNoMemory) {
			return nil, nil, verbs.StatusRemoteAccess, err
		}
		return nil, nil, verbs.StatusRetryExceeded, err
	}
	off := r.memOff + (addr - r.addr)
	if off > uint64(len(m.b)) || n > uint64(len(m.b))-off {
		m.release()
		return nil, nil, verbs.StatusRemoteAccess, fmt.Errorf("%w: region %#x lies outside its memory file", errProtocol, rkey)
	}
	return m.b[off : off+n : off+n], m, verbs.StatusSuccess, nil
}

// errWouldBlock: the fast path met a memory file it has not mapped yet.
var errWouldBlock = errors.New("shm: memory file not mapped yet")

// mapping returns the peer's memory file id mapped and pinned, fetching
// it over the socket the first time.
func (e *engine) mapping(l *link, id uint32, c *clock, fetch bool) (*mapping, error) {
	if e.lastMap != nil && e.lastPeer == l.peer && e.lastMem == id && e.lastMap.acquire() {
		return e.lastMap, nil
	}
	for range 3 {
		m := l.peer.lookup(id)
		if m == nil && !fetch {
			return nil, errWouldBlock
		}
		if m == nil {
			fd, err := l.fetch(id, c.now().Add(e.budget(l)), e.stopCh)
			if err != nil {
				return nil, err
			}
			m, err = l.peer.insert(id, fd)
			closeFds([]int{fd})
			if err != nil {
				return nil, err
			}
		}
		if m.acquire() {
			e.lastPeer, e.lastMem, e.lastMap = l.peer, id, m
			return m, nil
		}
	}
	return nil, fmt.Errorf("shm: memory file %d of %s keeps being replaced", id, l.peerAddr)
}
