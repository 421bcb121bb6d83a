//go:build ibverbs && cgo

package ibv

// #include "shim.h"
import "C"

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"github.com/rdmacell/rdmacell/verbs"
)

// PD is a protection domain of an ibv Device. It implements verbs.PD.
type PD struct {
	d  *Device
	pd *C.struct_ibv_pd

	mu     sync.Mutex
	closed bool
	mrs    map[*MR]struct{}
	nqp    int
}

var _ verbs.PD = (*PD)(nil)

// RegMR implements verbs.PD with ibv_reg_mr. mem must come from
// verbs.Alloc: that memory is off the Go heap, so the RNIC may access it
// at any time without the garbage collector moving or freeing it.
func (pd *PD) RegMR(mem []byte, access verbs.Access) (verbs.MR, error) {
	if _, _, err := verbs.Lookup(mem); err != nil {
		return nil, fmt.Errorf("ibv: register region: %w", err)
	}
	if access&verbs.AccessRemoteWrite != 0 && access&verbs.AccessLocalWrite == 0 {
		return nil, fmt.Errorf("%w: remote write access requires local write access", verbs.ErrInvalidArgument)
	}
	pd.mu.Lock()
	defer pd.mu.Unlock()
	if pd.closed {
		return nil, fmt.Errorf("ibv: register region: %w", verbs.ErrClosed)
	}
	m, err := C.ibv_reg_mr(pd.pd, unsafe.Pointer(unsafe.SliceData(mem)), C.size_t(len(mem)), C.int(accessFlags(access)))
	if m == nil {
		return nil, fmt.Errorf("ibv: ibv_reg_mr of %d bytes with access %#x: %w", len(mem), access, err)
	}
	mr := &MR{pd: pd, mr: m, mem: mem, access: access, lkey: uint32(m.lkey), rkey: uint32(m.rkey)}
	pd.mrs[mr] = struct{}{}
	return mr, nil
}

// CreateQP implements verbs.PD.
func (pd *PD) CreateQP(cfg verbs.QPConfig) (verbs.QP, error) {
	pd.mu.Lock()
	if pd.closed {
		pd.mu.Unlock()
		return nil, fmt.Errorf("ibv: create QP: %w", verbs.ErrClosed)
	}
	pd.nqp++
	pd.mu.Unlock()
	q, err := newQP(pd, cfg)
	if err != nil {
		pd.qpClosed()
		return nil, err
	}
	return q, nil
}

func (pd *PD) qpClosed() {
	pd.mu.Lock()
	pd.nqp--
	pd.mu.Unlock()
}

// Close implements verbs.PD. It fails while regions or QPs of the PD are
// open, as ibv_dealloc_pd does.
func (pd *PD) Close() error {
	pd.mu.Lock()
	if pd.closed {
		pd.mu.Unlock()
		return fmt.Errorf("ibv: close PD: %w", verbs.ErrClosed)
	}
	if len(pd.mrs) > 0 || pd.nqp > 0 {
		n := len(pd.mrs)
		pd.mu.Unlock()
		return fmt.Errorf("%w: PD still has %d regions and %d QPs open", verbs.ErrInvalidArgument, n, pd.nqp)
	}
	pd.mu.Unlock()
	pd.d.mu.Lock()
	delete(pd.d.pds, pd)
	pd.d.mu.Unlock()
	return pd.release()
}

// release deregisters the PD's regions and deallocates it; the device's
// Close calls it after closing every QP.
func (pd *PD) release() error {
	pd.mu.Lock()
	defer pd.mu.Unlock()
	if pd.closed {
		return nil
	}
	pd.closed = true
	var err error
	for mr := range pd.mrs {
		err = errors.Join(err, mr.dereg())
	}
	clear(pd.mrs)
	if rc := C.ibv_dealloc_pd(pd.pd); rc != 0 {
		err = errors.Join(err, fmt.Errorf("ibv: ibv_dealloc_pd: %w", errnoOf(rc)))
	}
	return err
}
