package fault

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/rdmacell/rdmacell/verbs"
)

// Device wraps a provider's device. It implements verbs.Device; its PDs
// create *QP and its CQs are *CQ.
type Device struct {
	under verbs.Device

	mu  sync.Mutex
	qps map[*QP]struct{}
}

var _ verbs.Device = (*Device)(nil)

// Wrap wraps d. Every QP created through the result starts without a fault.
func Wrap(d verbs.Device) *Device {
	return &Device{under: d, qps: make(map[*QP]struct{})}
}

// Provider names the wrapped provider, so that endpoints of wrapped and
// unwrapped QPs of one provider connect to each other.
func (d *Device) Provider() string { return d.under.Provider() }

// Unwrap returns the wrapped device.
func (d *Device) Unwrap() verbs.Device { return d.under }

// AllocPD implements verbs.Device.
func (d *Device) AllocPD() (verbs.PD, error) {
	pd, err := d.under.AllocPD()
	if err != nil {
		return nil, err
	}
	return &PD{d: d, under: pd}, nil
}

// CreateCQ implements verbs.Device.
func (d *Device) CreateCQ(depth int) (verbs.CQ, error) {
	cq, err := d.under.CreateCQ(depth)
	if err != nil {
		return nil, err
	}
	return newCQ(cq), nil
}

// Close closes the device's QPs, which stops their delivery, and then the
// wrapped device.
func (d *Device) Close() error {
	d.mu.Lock()
	qps := make([]*QP, 0, len(d.qps))
	for q := range d.qps {
		qps = append(qps, q)
	}
	d.mu.Unlock()
	var errs []error
	for _, q := range qps {
		if err := q.Close(); err != nil && !errors.Is(err, verbs.ErrClosed) {
			errs = append(errs, err)
		}
	}
	return errors.Join(append(errs, d.under.Close())...)
}

// QPs returns the QPs created through d and not closed yet, in the order of
// their numbers.
func (d *Device) QPs() []*QP {
	d.mu.Lock()
	qps := make([]*QP, 0, len(d.qps))
	for q := range d.qps {
		qps = append(qps, q)
	}
	d.mu.Unlock()
	slices.SortFunc(qps, func(a, b *QP) int { return cmp.Compare(a.Num(), b.Num()) })
	return qps
}

// PD wraps a provider's protection domain. It implements verbs.PD.
type PD struct {
	d     *Device
	under verbs.PD
}

var _ verbs.PD = (*PD)(nil)

// RegMR registers memory with the wrapped PD; regions are not wrapped.
func (pd *PD) RegMR(mem []byte, access verbs.Access) (verbs.MR, error) {
	return pd.under.RegMR(mem, access)
}

// CreateQP creates a *QP over a QP of the wrapped PD. cfg's CQs must have
// been created by the same fault Device.
func (pd *PD) CreateQP(cfg verbs.QPConfig) (verbs.QP, error) {
	scq, ok := cfg.SendCQ.(*CQ)
	if !ok {
		return nil, fmt.Errorf("%w: fault: send CQ %T was not created by the fault device", verbs.ErrInvalidArgument, cfg.SendCQ)
	}
	rcq, ok := cfg.RecvCQ.(*CQ)
	if !ok {
		return nil, fmt.Errorf("%w: fault: receive CQ %T was not created by the fault device", verbs.ErrInvalidArgument, cfg.RecvCQ)
	}
	ucfg := cfg
	// The provider gets its own CQ type back: it only accepts its own.
	ucfg.SendCQ, ucfg.RecvCQ = scq.under, rcq.under
	uq, err := pd.under.CreateQP(ucfg)
	if err != nil {
		return nil, err
	}
	q := newQP(pd.d, uq, scq, cfg)
	pd.d.mu.Lock()
	pd.d.qps[q] = struct{}{}
	pd.d.mu.Unlock()
	return q, nil
}

// Close implements verbs.PD.
func (pd *PD) Close() error { return pd.under.Close() }

// forget removes a closed QP from its device.
func (d *Device) forget(q *QP) {
	d.mu.Lock()
	delete(d.qps, q)
	d.mu.Unlock()
}

// Defaults of verbs.QPConfig that the wrapper needs to know.
const (
	defaultMaxWR   = 1024
	defaultMaxSGE  = 4
	defaultTimeout = time.Second
)
