package soft

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/rdmacell/rdmacell/verbs"
)

// MRTable is a device's registered regions, indexed by key. Keys are
// random, so a peer cannot guess the rkey of a region it was not given.
// Each region has one key that serves as both lkey and rkey.
type MRTable struct {
	mu    sync.RWMutex
	byKey map[uint32]*MR
}

// MR is a region registered in an MRTable. It implements verbs.MR.
type MR struct {
	table  *MRTable
	mem    *verbs.Memory
	off    int
	b      []byte
	addr   uint64
	key    uint32
	access verbs.Access
	// onWrite is called after each remote WRITE lands (WriteWatcher).
	onWrite atomic.Pointer[func()]
}

// Register registers mem, which must come from verbs.Alloc.
func (t *MRTable) Register(mem []byte, access verbs.Access) (*MR, error) {
	if access&^(verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead) != 0 {
		return nil, fmt.Errorf("%w: unknown access flags %#x", verbs.ErrInvalidArgument, access)
	}
	if access&verbs.AccessRemoteWrite != 0 && access&verbs.AccessLocalWrite == 0 {
		return nil, fmt.Errorf("%w: remote write access needs local write access", verbs.ErrInvalidArgument)
	}
	m, off, err := verbs.Lookup(mem)
	if err != nil {
		return nil, err
	}
	mr := &MR{table: t, mem: m, off: off, b: mem, addr: verbs.AddrOf(mem), access: access}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byKey == nil {
		t.byKey = make(map[uint32]*MR)
	}
	for {
		var k [4]byte
		_, _ = rand.Read(k[:])
		mr.key = binary.LittleEndian.Uint32(k[:])
		if _, dup := t.byKey[mr.key]; mr.key != 0 && !dup {
			break
		}
	}
	t.byKey[mr.key] = mr
	return mr, nil
}

// Len reports how many regions are registered.
func (t *MRTable) Len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.byKey)
}

// Local resolves a local scatter-gather element. write says the request
// stores into it (a receive), which needs local write access.
func (t *MRTable) Local(sge verbs.SGE, write bool) ([]byte, verbs.Status) {
	need := verbs.Access(0)
	if write {
		need = verbs.AccessLocalWrite
	}
	b, _, ok := t.lookup(sge.LKey, sge.Addr, uint64(sge.Length), need)
	if !ok {
		return nil, verbs.StatusLocalProtection
	}
	return b, verbs.StatusSuccess
}

// Remote resolves n bytes at addr under rkey for a peer's access with the
// rights in need, and returns the region they lie in.
func (t *MRTable) Remote(rkey uint32, addr, n uint64, need verbs.Access) ([]byte, *MR, verbs.Status) {
	b, mr, ok := t.lookup(rkey, addr, n, need)
	if !ok {
		return nil, nil, verbs.StatusRemoteAccess
	}
	return b, mr, verbs.StatusSuccess
}

func (t *MRTable) lookup(key uint32, addr, n uint64, need verbs.Access) ([]byte, *MR, bool) {
	t.mu.RLock()
	mr := t.byKey[key]
	t.mu.RUnlock()
	if mr == nil || mr.access&need != need || addr < mr.addr {
		return nil, nil, false
	}
	off := addr - mr.addr
	if off > uint64(len(mr.b)) || n > uint64(len(mr.b))-off {
		return nil, nil, false
	}
	return mr.b[off : off+n : off+n], mr, true
}

// OnRemoteWrite implements verbs.WriteWatcher, for providers that call
// Landed.
func (mr *MR) OnRemoteWrite(f func()) {
	if f == nil {
		mr.onWrite.Store(nil)
		return
	}
	mr.onWrite.Store(&f)
}

// Landed is what a provider calls once a peer's WRITE has landed in full
// in the region.
func (mr *MR) Landed() {
	if f := mr.onWrite.Load(); f != nil {
		(*f)()
	}
}

// Addr implements verbs.MR.
func (mr *MR) Addr() uint64 { return mr.addr }

// Len implements verbs.MR.
func (mr *MR) Len() int { return len(mr.b) }

// LKey implements verbs.MR.
func (mr *MR) LKey() uint32 { return mr.key }

// RKey implements verbs.MR.
func (mr *MR) RKey() uint32 { return mr.key }

// Access implements verbs.MR.
func (mr *MR) Access() verbs.Access { return mr.access }

// Bytes implements verbs.MR.
func (mr *MR) Bytes() []byte { return mr.b }

// Memory returns the allocation the region lies in and its offset there.
func (mr *MR) Memory() (*verbs.Memory, int) { return mr.mem, mr.off }

// Close implements verbs.MR.
func (mr *MR) Close() error {
	mr.table.mu.Lock()
	defer mr.table.mu.Unlock()
	if mr.table.byKey[mr.key] != mr {
		return fmt.Errorf("%w: region %#x already deregistered", verbs.ErrClosed, mr.key)
	}
	delete(mr.table.byKey, mr.key)
	return nil
}
