package tcp

import (
	"fmt"
	"sync"

	"github.com/rdmacell/rdmacell/verbs"
	"github.com/rdmacell/rdmacell/verbs/internal/soft"
)

// PD is a protection domain of a tcp Device. Each PD has its own table of
// regions: a QP resolves local and remote keys only among the regions of
// its own PD, as on an RNIC. It implements verbs.PD.
type PD struct {
	d   *Device
	mrs soft.MRTable

	mu     sync.Mutex
	closed bool
	nqp    int
}

var _ verbs.PD = (*PD)(nil)

// RegMR implements verbs.PD. The region is a *soft.MR whose key serves as
// both lkey and rkey.
func (pd *PD) RegMR(mem []byte, access verbs.Access) (verbs.MR, error) {
	pd.mu.Lock()
	closed := pd.closed
	pd.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("tcp: register region: %w", verbs.ErrClosed)
	}
	mr, err := pd.mrs.Register(mem, access)
	if err != nil {
		return nil, fmt.Errorf("tcp: register region: %w", err)
	}
	return mr, nil
}

// CreateQP implements verbs.PD.
func (pd *PD) CreateQP(cfg verbs.QPConfig) (verbs.QP, error) {
	pd.mu.Lock()
	if pd.closed {
		pd.mu.Unlock()
		return nil, fmt.Errorf("tcp: create QP: %w", verbs.ErrClosed)
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
	defer pd.mu.Unlock()
	if pd.closed {
		return fmt.Errorf("tcp: close PD: %w", verbs.ErrClosed)
	}
	if n := pd.mrs.Len(); n > 0 || pd.nqp > 0 {
		return fmt.Errorf("%w: PD still has %d regions and %d QPs open", verbs.ErrInvalidArgument, n, pd.nqp)
	}
	pd.closed = true
	pd.d.mu.Lock()
	delete(pd.d.pds, pd)
	pd.d.mu.Unlock()
	return nil
}
