//go:build ibverbs && cgo

package ibv

// #include "shim.h"
import "C"

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"syscall"

	"github.com/rdmacell/rdmacell/verbs"
)

// Modify implements verbs.QP with ibv_modify_qp: INIT binds the QP to the
// device's port with remote read and write access and draws a fresh PSN;
// RTR takes the peer's endpoint, the path MTU both ends offer, the QP's
// MinRNRTimer and, on a global route, the source GID, traffic class, hop
// limit and the path's flow label; RTS takes Timeout, RetryCount and
// RNRRetry. Moving to RESET discards the outstanding requests and their
// completions, and gives the flow label back.
func (q *QP) Modify(state verbs.QPState, remote *verbs.Endpoint) error {
	q.modMu.Lock()
	defer q.modMu.Unlock()
	if q.closed {
		return fmt.Errorf("ibv: modify QP %d: %w", q.qpn, verbs.ErrClosed)
	}
	from, gen := q.cached()
	if !verbs.CanTransition(from, state) {
		return fmt.Errorf("%w: QP %d cannot move from %s to %s", verbs.ErrInvalidState, q.qpn, from, state)
	}
	var rc C.int
	switch state {
	case verbs.StateInit:
		rc = C.rc_to_init(q.qp, C.int(q.d.port.port))
		if rc == 0 {
			q.psn.Store(rand.Uint32() & psnMask)
		}
	case verbs.StateRTR:
		pa, err := pathTo(&q.d.port, remote)
		if err != nil {
			return fmt.Errorf("ibv: QP %d to RTR: %w", q.qpn, err)
		}
		rc = q.toRTR(pa)
	case verbs.StateRTS:
		p := &q.params
		rc = C.rc_to_rts(q.qp, C.uint32_t(q.psn.Load()), C.int(p.timeout), C.int(p.retry), C.int(p.rnrRetry))
	case verbs.StateErr:
		rc = C.rc_to_state(q.qp, qpsErr)
	case verbs.StateReset:
		rc = C.rc_to_state(q.qp, qpsReset)
		if rc == 0 {
			q.discard(gen)
			q.releaseLabel()
			return nil
		}
	}
	if rc != 0 {
		return q.modifyErr(from, state, rc)
	}
	q.setState(state, gen)
	return nil
}

// toRTR moves the QP to RTR on path pa, with a flow label assigned for
// it when the path is global.
func (q *QP) toRTR(pa path) C.int {
	o := &q.d.opts
	a := C.struct_rc_rtr{
		dest_qpn:      C.uint32_t(pa.qpn),
		rq_psn:        C.uint32_t(pa.psn),
		path_mtu:      C.int(pa.mtu),
		port:          C.int(q.d.port.port),
		min_rnr_timer: C.int(q.params.minRNR),
		dlid:          C.int(pa.dlid),
		sl:            C.int(o.ServiceLevel),
	}
	if pa.global {
		q.releaseLabel()
		q.label = q.d.labels.assign(pa.peer, q.qpn, pa.qpn, q.params.flowLabel)
		q.peer, q.labeled = pa.peer, true
		a.is_global = 1
		a.flow_label = C.uint32_t(q.label)
		a.sgid_index = C.int(q.d.port.gid.index)
		a.hop_limit = C.int(o.HopLimit)
		a.traffic_class = C.int(o.TrafficClass)
		for i, b := range pa.dgid {
			a.dgid[i] = C.uint8_t(b)
		}
	}
	rc := C.rc_to_rtr(q.qp, &a)
	if rc != 0 {
		q.releaseLabel()
	} else if pa.global {
		q.log.Debug("ibv: QP ready to receive", "peer_qpn", pa.qpn, "peer_gid", formatGID(pa.dgid),
			"flow_label", q.label, "udp_sport", UDPSourcePort(q.label), "mtu", mtuBytes(pa.mtu))
	}
	return rc
}

func (q *QP) releaseLabel() {
	if q.labeled {
		q.d.labels.release(q.peer, q.label)
		q.labeled = false
	}
}

// discard forgets the outstanding requests of incarnation gen after the
// device reset the QP, and starts the next incarnation.
func (q *QP) discard(gen uint32) {
	q.sendMu.Lock()
	q.recvMu.Lock()
	q.sq.reset()
	q.rq.reset()
	q.setState(verbs.StateReset, gen+1)
	q.recvMu.Unlock()
	q.sendMu.Unlock()
}

// modifyErr explains a failed ibv_modify_qp. EINVAL is the device
// refusing an attribute, which is a bad argument of the caller's (or a
// wrong GID index): it wraps verbs.ErrInvalidArgument too.
func (q *QP) modifyErr(from, to verbs.QPState, rc C.int) error {
	err := errnoOf(rc)
	if errors.Is(err, syscall.EINVAL) {
		err = errors.Join(verbs.ErrInvalidArgument, err)
	}
	return fmt.Errorf("ibv: ibv_modify_qp of QP %d from %s to %s: %w", q.qpn, from, to, err)
}
