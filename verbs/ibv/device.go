//go:build ibverbs && cgo

package ibv

// #cgo LDFLAGS: -libverbs
// #include <stdlib.h>
// #include "shim.h"
import "C"

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"syscall"
	"unsafe"

	"github.com/rdmacell/rdmacell/verbs"
)

// Device is one port of an opened RDMA device, the counterpart of an
// ibv_context bound to a port and a GID. It implements verbs.Device.
type Device struct {
	ctx    *C.struct_ibv_context
	port   portInfo
	lim    deviceLimits
	maxCQE int
	opts   Options
	log    *slog.Logger
	labels flowLabels

	// qpMu guards qps, which every polled completion looks its QP up in.
	qpMu sync.RWMutex
	qps  map[uint32]*QP

	mu     sync.Mutex
	closed bool
	cqs    map[*CQ]struct{}
	pds    map[*PD]struct{}
}

var _ verbs.Device = (*Device)(nil)

// Open applies the environment to opts (see the package documentation),
// finds the port they name or the first active one, chooses its GID and
// returns the device. With no usable port the error wraps ErrNoDevice.
func Open(opts Options) (verbs.Device, error) {
	d, err := open(opts)
	if err != nil {
		return nil, err
	}
	return d, nil
}

func open(opts Options) (*Device, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if opts.Host == "" {
		var err error
		if opts.Host, err = os.Hostname(); err != nil {
			return nil, fmt.Errorf("ibv: host name: %w", err)
		}
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	ctx, cand, err := openPort(opts.Device, opts.Port)
	if err != nil {
		return nil, err
	}
	d := &Device{
		ctx:  ctx,
		opts: opts,
		log:  log.With("provider", ProviderName, "device", cand.device, "port", cand.port),
		qps:  make(map[uint32]*QP),
		cqs:  make(map[*CQ]struct{}),
		pds:  make(map[*PD]struct{}),
	}
	if err := d.describe(cand); err != nil {
		C.ibv_close_device(ctx)
		return nil, err
	}
	return d, nil
}

// openPort opens every device in turn until one has the wanted port
// active, and returns its context with the port. The ports of the other
// devices are looked at too, so that the error can list them.
func openPort(device string, port int) (*C.struct_ibv_context, portCandidate, error) {
	var n C.int
	list, err := C.ibv_get_device_list(&n)
	if list == nil {
		// Without kernel RDMA support the list is NULL with ENOSYS.
		_, none := choosePort(nil, device, port)
		return nil, portCandidate{}, fmt.Errorf("%w (ibv_get_device_list: %w)", none, err)
	}
	defer C.ibv_free_device_list(list)
	var seen []portCandidate
	for _, dev := range unsafeSlice(list, int(n)) {
		name := C.GoString(C.ibv_get_device_name(dev))
		ctx := C.ibv_open_device(dev)
		if ctx == nil {
			continue
		}
		var da C.struct_rc_device
		if C.rc_query_device(ctx, &da) != 0 {
			C.ibv_close_device(ctx)
			continue
		}
		for p := 1; p <= int(da.phys_port_cnt); p++ {
			var pa C.struct_rc_port
			if C.rc_query_port(ctx, C.int(p), &pa) != 0 {
				continue
			}
			c := portCandidate{device: name, port: p, state: int(pa.state), linkLayer: int(pa.link_layer)}
			seen = append(seen, c)
			if chosen, err := choosePort([]portCandidate{c}, device, port); err == nil {
				return ctx, chosen, nil
			}
		}
		C.ibv_close_device(ctx)
	}
	_, err = choosePort(seen, device, port)
	return nil, portCandidate{}, err
}

// describe reads the chosen port's attributes, the device's limits and
// the GID table, and logs what was chosen and why.
func (d *Device) describe(c portCandidate) error {
	var da C.struct_rc_device
	if rc := C.rc_query_device(d.ctx, &da); rc != 0 {
		return fmt.Errorf("ibv: query device %s: %w", c.device, syscall.Errno(rc))
	}
	d.lim = deviceLimits{maxQPWR: int(da.max_qp_wr), maxSGE: int(da.max_sge)}
	d.maxCQE = int(da.max_cqe)
	var pa C.struct_rc_port
	if rc := C.rc_query_port(d.ctx, C.int(c.port), &pa); rc != 0 {
		return fmt.Errorf("ibv: query %s: %w", c, syscall.Errno(rc))
	}
	d.port = portInfo{portCandidate: c, lid: uint16(pa.lid), mtu: mtuBytes(int(pa.active_mtu))}
	if d.opts.PathMTU != 0 && d.opts.PathMTU < d.port.mtu {
		d.port.mtu = d.opts.PathMTU
	}
	var why string
	if d.opts.GIDIndex != nil {
		e, err := pickGID(d.gidTable(*d.opts.GIDIndex, *d.opts.GIDIndex+1), *d.opts.GIDIndex)
		if err != nil {
			return fmt.Errorf("ibv: %s: %w", c, err)
		}
		d.port.gid, why = e, "set by option or "+EnvGIDIndex
		if c.linkLayer == linkLayerEthernet && e.typ != gidTypeRoCEv2 {
			d.log.Warn("ibv: chosen GID is not RoCEv2; both ends must use the same type", "gid_index", e.index, "type", gidTypeName(e.typ))
		}
	} else {
		e, reason, err := chooseGID(d.gidTable(0, int(pa.gid_tbl_len)), c.linkLayer)
		if err != nil {
			return fmt.Errorf("ibv: %s: %w", c, err)
		}
		d.port.gid, why = e, reason
	}
	d.log.Debug("ibv: device opened",
		"link_layer", linkLayerName(c.linkLayer), "lid", d.port.lid, "mtu", d.port.mtu,
		"gid_index", d.port.gid.index, "gid", formatGID(d.port.gid.gid),
		"gid_type", gidTypeName(d.port.gid.typ), "gid_type_from", d.port.gid.from, "gid_choice", why)
	return nil
}

// gidTable reads the GID entries from..to-1 of the device's port, with
// their types from the library or, failing that, from sysfs. Empty
// entries are left out.
func (d *Device) gidTable(from, to int) []gidEntry {
	var table []gidEntry
	for i := from; i < to; i++ {
		var g [16]C.uint8_t
		var t C.int
		rc := C.rc_query_gid(d.ctx, C.int(d.port.port), C.int(i), &g[0], &t)
		if rc != 0 && rc != 1 {
			continue
		}
		e := gidEntry{index: i, typ: int(t), from: "ibv_query_gid_ex"}
		for k := range g {
			e.gid[k] = byte(g[k])
		}
		if rc == 1 {
			e.typ, e.from = gidTypeUnknown, "unknown"
			if st, err := sysfsGIDType(sysfsClass, d.port.device, d.port.port, i); err == nil {
				e.typ, e.from = st, "sysfs"
			}
		}
		table = append(table, e)
	}
	return table
}

// Provider implements verbs.Device.
func (d *Device) Provider() string { return ProviderName }

// Name is the RDMA device's name ("mlx5_0").
func (d *Device) Name() string { return d.port.device }

// Port is the port number the device uses.
func (d *Device) Port() int { return d.port.port }

// GIDIndex is the GID table index QPs use as their source address.
func (d *Device) GIDIndex() int { return d.port.gid.index }

// LinkLayer is "InfiniBand" or "Ethernet" (RoCE).
func (d *Device) LinkLayer() string { return linkLayerName(d.port.linkLayer) }

// AllocPD implements verbs.Device.
func (d *Device) AllocPD() (verbs.PD, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, fmt.Errorf("ibv: alloc PD: %w", verbs.ErrClosed)
	}
	p, err := C.ibv_alloc_pd(d.ctx)
	if p == nil {
		return nil, fmt.Errorf("ibv: ibv_alloc_pd: %w", err)
	}
	pd := &PD{d: d, pd: p, mrs: make(map[*MR]struct{})}
	d.pds[pd] = struct{}{}
	return pd, nil
}

// Close implements verbs.Device: it closes every QP (flushing its
// requests into its CQs), region, PD and CQ still open, then the device.
func (d *Device) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	d.mu.Unlock()

	var err error
	d.qpMu.RLock()
	qps := make([]*QP, 0, len(d.qps))
	for _, q := range d.qps {
		qps = append(qps, q)
	}
	d.qpMu.RUnlock()
	for _, q := range qps {
		if cerr := q.Close(); cerr != nil && !errors.Is(cerr, verbs.ErrClosed) {
			err = errors.Join(err, cerr)
		}
	}
	d.mu.Lock()
	pds, cqs := d.pds, d.cqs
	d.pds, d.cqs = map[*PD]struct{}{}, map[*CQ]struct{}{}
	d.mu.Unlock()
	for pd := range pds {
		err = errors.Join(err, pd.release())
	}
	for cq := range cqs {
		err = errors.Join(err, cq.destroy())
	}
	if rc, cerr := C.ibv_close_device(d.ctx); rc != 0 {
		err = errors.Join(err, fmt.Errorf("ibv: close device %s: %w", d.port.device, cerr))
	}
	return err
}

func (d *Device) lookupQP(qpn uint32) *QP {
	d.qpMu.RLock()
	q := d.qps[qpn]
	d.qpMu.RUnlock()
	return q
}

// unsafeSlice views n elements of a C array as a Go slice.
func unsafeSlice[T any](p *T, n int) []T {
	if p == nil || n <= 0 {
		return nil
	}
	return unsafe.Slice(p, n)
}
