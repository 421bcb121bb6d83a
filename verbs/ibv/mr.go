//go:build ibverbs && cgo

package ibv

// #include "shim.h"
import "C"

import (
	"fmt"
	"syscall"

	"github.com/rdmacell/rdmacell/verbs"
)

// MR is a memory region registered with ibv_reg_mr. It implements
// verbs.MR.
type MR struct {
	pd         *PD
	mr         *C.struct_ibv_mr // nil once deregistered; guarded by pd.mu
	mem        []byte
	access     verbs.Access
	lkey, rkey uint32
}

var _ verbs.MR = (*MR)(nil)

// Addr implements verbs.MR.
func (m *MR) Addr() uint64 { return verbs.AddrOf(m.mem) }

// Len implements verbs.MR.
func (m *MR) Len() int { return len(m.mem) }

// LKey implements verbs.MR.
func (m *MR) LKey() uint32 { return m.lkey }

// RKey implements verbs.MR.
func (m *MR) RKey() uint32 { return m.rkey }

// Access implements verbs.MR.
func (m *MR) Access() verbs.Access { return m.access }

// Bytes implements verbs.MR.
func (m *MR) Bytes() []byte { return m.mem }

// Close implements verbs.MR with ibv_dereg_mr.
func (m *MR) Close() error {
	m.pd.mu.Lock()
	defer m.pd.mu.Unlock()
	if m.mr == nil {
		return fmt.Errorf("ibv: close region: %w", verbs.ErrClosed)
	}
	delete(m.pd.mrs, m)
	return m.dereg()
}

// dereg deregisters the region; the caller holds pd.mu.
func (m *MR) dereg() error {
	if m.mr == nil {
		return nil
	}
	rc := C.ibv_dereg_mr(m.mr)
	m.mr = nil
	if rc != 0 {
		return fmt.Errorf("ibv: ibv_dereg_mr: %w", errnoOf(rc))
	}
	return nil
}

// errnoOf turns the return value of an ibverbs call that returns an
// errno (positive, or negated by some providers) into an error.
func errnoOf(rc C.int) error {
	if rc < 0 {
		rc = -rc
	}
	return syscall.Errno(rc)
}
