package shm

import (
	"fmt"

	"github.com/rdmacell/rdmacell/verbs"
	"github.com/rdmacell/rdmacell/verbs/internal/soft"
)

// PD is a protection domain of a Device. It implements verbs.PD. Regions
// and QPs of different PDs do not mix: a local element naming a region of
// another PD fails with StatusLocalProtection, a WRITE naming one with
// StatusRemoteAccess.
type PD struct {
	dev *Device
	id  uint32
	mrs *soft.MRTable

	// guarded by dev.mu
	nmr, nqp int
	closed   bool
}

var _ verbs.PD = (*PD)(nil)

// RegMR implements verbs.PD. It publishes the region in the device's
// region table, where peers check their WRITEs against it.
//
// Memory of verbs.Adopt is refused with an error wrapping
// verbs.ErrInvalidArgument: peers map the memory file of a region, and
// adopted memory has none.
func (pd *PD) RegMR(mem []byte, access verbs.Access) (verbs.MR, error) {
	d := pd.dev
	smr, err := pd.mrs.Register(mem, access)
	if err != nil {
		return nil, fmt.Errorf("shm: register region: %w", err)
	}
	m, off := smr.Memory()
	if m.Adopted() {
		_ = smr.Close()
		return nil, fmt.Errorf("shm: register region: %w: memory of verbs.Adopt has no memory file for peers to map; register memory of verbs.Alloc", verbs.ErrInvalidArgument)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed || pd.closed {
		_ = smr.Close()
		return nil, fmt.Errorf("shm: register region: %w", verbs.ErrClosed)
	}
	mf := d.memOf[m]
	if mf == nil {
		fd, err := dupFd(m.Fd())
		if err != nil {
			_ = smr.Close()
			return nil, err
		}
		d.nextMem++
		mf = &memFile{id: d.nextMem, fd: fd}
		d.memOf[m], d.mems[mf.id] = mf, mf
	}
	slot, err := d.table.publish(smr.RKey(), region{
		addr: smr.Addr(), len: uint64(smr.Len()), memOff: uint64(off),
		memID: mf.id, access: uint32(access), pd: pd.id,
	})
	if err != nil {
		_ = smr.Close()
		d.dropMemFile(m, mf)
		return nil, err
	}
	mf.regions++
	if access&(verbs.AccessRemoteWrite|verbs.AccessRemoteRead) != 0 {
		mf.remote++
	}
	pd.nmr++
	return &MR{smr: smr, pd: pd, mem: m, file: mf, slot: slot}, nil
}

// dropMemFile forgets mf once no region lies in it. Called with d.mu held.
func (d *Device) dropMemFile(m *verbs.Memory, mf *memFile) {
	if mf.regions > 0 {
		return
	}
	delete(d.memOf, m)
	delete(d.mems, mf.id)
	closeFds([]int{mf.fd})
}

// CreateQP implements verbs.PD.
func (pd *PD) CreateQP(cfg verbs.QPConfig) (verbs.QP, error) { return newQP(pd, cfg) }

// Close implements verbs.PD. Its regions and QPs must be closed first.
func (pd *PD) Close() error {
	d := pd.dev
	d.mu.Lock()
	defer d.mu.Unlock()
	if pd.closed {
		return nil
	}
	if pd.nmr > 0 || pd.nqp > 0 {
		return fmt.Errorf("%w: pd %d still has %d regions and %d QPs", verbs.ErrInvalidState, pd.id, pd.nmr, pd.nqp)
	}
	pd.closed = true
	delete(d.pds, pd)
	return nil
}

// MR is a region registered with a PD of a Device. It implements verbs.MR.
type MR struct {
	smr    *soft.MR
	pd     *PD
	mem    *verbs.Memory
	file   *memFile
	slot   uint32
	closed bool // guarded by dev.mu
}

var _ verbs.MR = (*MR)(nil)

// Addr implements verbs.MR.
func (mr *MR) Addr() uint64 { return mr.smr.Addr() }

// Len implements verbs.MR.
func (mr *MR) Len() int { return mr.smr.Len() }

// LKey implements verbs.MR.
func (mr *MR) LKey() uint32 { return mr.smr.LKey() }

// RKey implements verbs.MR. It equals LKey.
func (mr *MR) RKey() uint32 { return mr.smr.RKey() }

// Access implements verbs.MR.
func (mr *MR) Access() verbs.Access { return mr.smr.Access() }

// Bytes implements verbs.MR.
func (mr *MR) Bytes() []byte { return mr.smr.Bytes() }

// Close implements verbs.MR. When it returns, no WRITE checked afterwards,
// by this process or a peer, reaches the region.
func (mr *MR) Close() error {
	d := mr.pd.dev
	d.mu.Lock()
	defer d.mu.Unlock()
	if mr.closed {
		return fmt.Errorf("%w: region %#x already deregistered", verbs.ErrClosed, mr.RKey())
	}
	mr.closed = true
	if d.closed {
		// The table and memory files went with the device.
		return mr.smr.Close()
	}
	d.table.retract(mr.slot)
	err := mr.smr.Close()
	mr.file.regions--
	if mr.Access()&(verbs.AccessRemoteWrite|verbs.AccessRemoteRead) != 0 {
		mr.file.remote--
	}
	d.dropMemFile(mr.mem, mr.file)
	mr.pd.nmr--
	return err
}
