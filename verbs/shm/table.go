package shm

import (
	"fmt"
	"sync/atomic"
)

// The region table is how a requester checks a WRITE against the
// responder's registered regions without asking it: every device publishes
// its regions in a sealed memory file that its peers map read-only.
//
// Layout (little endian, offsets in bytes):
//
//	header  0  magic u32, version u32, slots u32, high u32 (slots ever used)
//	slot i  64 + 48*i:
//	        0  tag u64     generation<<32 | key; key 0 means free
//	        8  addr u64    the region's address in the owner's process
//	       16  len u64
//	       24  memOff u64  the region's offset in its memory file
//	       32  memID u32   the memory file, fetched from the owner by id
//	       36  access u32
//	       40  pd u32      the protection domain the region belongs to
//
// The tag is a sequence lock. The owner changes a slot only while its key
// is 0 and bumps the generation with every change, so a reader that sees
// the same tag before and after reading the fields has read one
// consistent region. Deregistration clears the key before MR.Close
// returns, so a check made after that fails.
const (
	tableMagic   = 0x54524d53 // "SMRT"
	tableVersion = 1
	tableSlots   = 1 << 14
	tableHeader  = 64
	slotSize     = 48
	tableSize    = tableHeader + tableSlots*slotSize

	slotTag    = 0
	slotAddr   = 8
	slotLen    = 16
	slotMemOff = 24
	slotMemID  = 32
	slotAccess = 36
	slotPD     = 40
)

// region is one published registration.
type region struct {
	addr, len, memOff uint64
	memID, access, pd uint32
}

// regionTable is a device's own, writable table.
type regionTable struct {
	b    []byte
	free []uint32
	high uint32
}

func newRegionTable(b []byte) *regionTable {
	atomic.StoreUint32(word(b, 4), tableVersion)
	atomic.StoreUint32(word(b, 8), tableSlots)
	atomic.StoreUint32(word(b, 0), tableMagic)
	return &regionTable{b: b}
}

// publish writes r under key into a free slot and returns the slot. The
// caller serialises calls.
func (t *regionTable) publish(key uint32, r region) (uint32, error) {
	var i uint32
	switch {
	case len(t.free) > 0:
		i = t.free[len(t.free)-1]
		t.free = t.free[:len(t.free)-1]
	case t.high < tableSlots:
		i = t.high
		t.high++
		atomic.StoreUint32(word(t.b, 12), t.high)
	default:
		return 0, fmt.Errorf("shm: region table full (%d regions)", tableSlots)
	}
	s := tableHeader + int(i)*slotSize
	gen := atomic.LoadUint64(dword(t.b, s+slotTag)) >> 32
	atomic.StoreUint64(dword(t.b, s+slotAddr), r.addr)
	atomic.StoreUint64(dword(t.b, s+slotLen), r.len)
	atomic.StoreUint64(dword(t.b, s+slotMemOff), r.memOff)
	atomic.StoreUint32(word(t.b, s+slotMemID), r.memID)
	atomic.StoreUint32(word(t.b, s+slotAccess), r.access)
	atomic.StoreUint32(word(t.b, s+slotPD), r.pd)
	atomic.StoreUint64(dword(t.b, s+slotTag), (gen+1)<<32|uint64(key))
	return i, nil
}

// retract clears slot i; checks that start after it returns fail.
func (t *regionTable) retract(i uint32) {
	s := tableHeader + int(i)*slotSize
	gen := atomic.LoadUint64(dword(t.b, s+slotTag)) >> 32
	atomic.StoreUint64(dword(t.b, s+slotTag), (gen+1)<<32)
	t.free = append(t.free, i)
}

// peerTable is a read-only view of a peer device's table. Everything read
// from it is checked before use: the peer may be buggy or hostile.
type peerTable struct{ b []byte }

func checkPeerTable(b []byte) error {
	if m := atomic.LoadUint32(word(b, 0)); m != tableMagic {
		return fmt.Errorf("shm: peer region table has magic %#x, want %#x", m, tableMagic)
	}
	if v := atomic.LoadUint32(word(b, 4)); v != tableVersion {
		return fmt.Errorf("shm: peer region table version %d, want %d", v, tableVersion)
	}
	if n := atomic.LoadUint32(word(b, 8)); n != tableSlots {
		return fmt.Errorf("shm: peer region table has %d slots, want %d", n, tableSlots)
	}
	return nil
}

// find returns the slot holding key, scanning the slots in use.
func (t peerTable) find(key uint32) (uint32, bool) {
	high := min(atomic.LoadUint32(word(t.b, 12)), tableSlots)
	for i := uint32(0); i < high; i++ {
		s := tableHeader + int(i)*slotSize
		if uint32(atomic.LoadUint64(dword(t.b, s+slotTag))) == key {
			return i, true
		}
	}
	return 0, false
}

// read returns the region in slot i if it is registered under key.
func (t peerTable) read(i, key uint32) (region, bool) {
	if i >= tableSlots || key == 0 {
		return region{}, false
	}
	s := tableHeader + int(i)*slotSize
	for range 8 {
		tag := atomic.LoadUint64(dword(t.b, s+slotTag))
		if uint32(tag) != key {
			return region{}, false
		}
		r := region{
			addr:   atomic.LoadUint64(dword(t.b, s+slotAddr)),
			len:    atomic.LoadUint64(dword(t.b, s+slotLen)),
			memOff: atomic.LoadUint64(dword(t.b, s+slotMemOff)),
			memID:  atomic.LoadUint32(word(t.b, s+slotMemID)),
			access: atomic.LoadUint32(word(t.b, s+slotAccess)),
			pd:     atomic.LoadUint32(word(t.b, s+slotPD)),
		}
		if atomic.LoadUint64(dword(t.b, s+slotTag)) == tag {
			return r, true
		}
	}
	return region{}, false
}

// liveMemIDs returns the memory files that registered regions lie in.
func (t peerTable) liveMemIDs() map[uint32]bool {
	live := make(map[uint32]bool)
	high := min(atomic.LoadUint32(word(t.b, 12)), tableSlots)
	for i := uint32(0); i < high; i++ {
		s := tableHeader + int(i)*slotSize
		tag := atomic.LoadUint64(dword(t.b, s+slotTag))
		if uint32(tag) != 0 {
			live[atomic.LoadUint32(word(t.b, s+slotMemID))] = true
		}
	}
	return live
}
