//go:build ibverbs && cgo

package ibv

// #include <stdlib.h>
// #include "shim.h"
import "C"

import (
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/rdmacell/rdmacell/verbs"
)

// maxBatch bounds the work requests one ibv_post_send or ibv_post_recv
// call carries; a longer chain is posted in several calls, in order,
// which on one RC QP is the same thing. It keeps the C arrays a QP
// preallocates small however deep its queues are.
const maxBatch = 64

// QP is an RC queue pair of an ibv Device. It implements verbs.QP.
//
// The QP's state lives in Go as well as in the device, so that posting
// checks it without a system call; a failed completion, or State reading
// the device, notices when the device moved the QP to ERR on its own.
type QP struct {
	d              *Device
	pd             *PD
	qp             *C.struct_ibv_qp
	qpn            uint32
	params         qpParams
	sendCQ, recvCQ *CQ
	log            *slog.Logger

	// state packs the incarnation (bumped at every move to RESET) above
	// the verbs.QPState in the low byte, so that a completion of an
	// earlier incarnation cannot move the current one to ERR.
	state atomic.Uint64
	psn   atomic.Uint32

	// modMu serialises Modify, Close and State's device queries.
	modMu   sync.Mutex
	closed  bool
	labeled bool
	label   uint32
	peer    peerKey

	// sendMu guards the send ring and the C arrays PostSend fills.
	sendMu    sync.Mutex
	sendDone  bool
	sq        wrRing
	sendBatch int
	swrs      *C.struct_ibv_send_wr
	sdesc     *C.struct_rc_send
	ssges     *C.struct_ibv_sge
	sbad      *C.int

	recvMu    sync.Mutex
	recvDone  bool
	rq        wrRing
	recvBatch int
	rwrs      *C.struct_ibv_recv_wr
	rdesc     *C.struct_rc_recv
	rsges     *C.struct_ibv_sge
	rbad      *C.int
}

var _ verbs.QP = (*QP)(nil)

func newQP(pd *PD, cfg verbs.QPConfig) (*QP, error) {
	d := pd.d
	p, err := qpParamsOf(&cfg, d.lim)
	if err != nil {
		return nil, err
	}
	scq, err := d.ownCQ(cfg.SendCQ, "SendCQ")
	if err != nil {
		return nil, err
	}
	rcq, err := d.ownCQ(cfg.RecvCQ, "RecvCQ")
	if err != nil {
		return nil, err
	}
	// One send slot beyond MaxSendWR is the marker's (see Close).
	qp, cerr := C.rc_create_qp(pd.pd, scq.cq, rcq.cq, C.uint32_t(p.maxSendWR+1), C.uint32_t(p.maxRecvWR), C.uint32_t(p.maxSGE))
	if qp == nil {
		return nil, fmt.Errorf("ibv: ibv_create_qp (send %d, receive %d, %d SGEs): %w", p.maxSendWR+1, p.maxRecvWR, p.maxSGE, cerr)
	}
	q := &QP{
		d: d, pd: pd, qp: qp, qpn: uint32(qp.qp_num), params: p, sendCQ: scq, recvCQ: rcq,
		sq:        newRing(p.maxSendWR, 1),
		rq:        newRing(p.maxRecvWR, 0),
		sendBatch: min(p.maxSendWR+1, maxBatch),
		recvBatch: min(p.maxRecvWR, maxBatch),
	}
	q.log = d.log.With("qpn", q.qpn)
	if !q.allocArrays() {
		q.freeArrays()
		C.ibv_destroy_qp(qp)
		return nil, fmt.Errorf("ibv: allocate work request arrays for QP %d: out of memory", q.qpn)
	}
	if cfg.LocalAddr != "" {
		q.log.Debug("ibv: QPConfig.LocalAddr ignored; paths are chosen by flow label", "local_addr", cfg.LocalAddr)
	}
	d.mu.Lock()
	closed := d.closed
	d.mu.Unlock()
	if closed {
		q.freeArrays()
		C.ibv_destroy_qp(qp)
		return nil, fmt.Errorf("ibv: create QP: %w", verbs.ErrClosed)
	}
	d.qpMu.Lock()
	d.qps[q.qpn] = q
	d.qpMu.Unlock()
	return q, nil
}

// allocArrays allocates in C memory the work requests and scatter-gather
// lists PostSend and PostRecv fill, so that no Go pointer is handed to
// the library.
func (q *QP) allocArrays() bool {
	sge := q.params.maxSGE
	q.swrs = (*C.struct_ibv_send_wr)(C.calloc(C.size_t(q.sendBatch), C.sizeof_struct_ibv_send_wr))
	q.sdesc = (*C.struct_rc_send)(C.calloc(C.size_t(q.sendBatch), C.sizeof_struct_rc_send))
	q.ssges = (*C.struct_ibv_sge)(C.calloc(C.size_t(q.sendBatch*sge), C.sizeof_struct_ibv_sge))
	q.sbad = (*C.int)(C.calloc(1, C.sizeof_int))
	q.rwrs = (*C.struct_ibv_recv_wr)(C.calloc(C.size_t(q.recvBatch), C.sizeof_struct_ibv_recv_wr))
	q.rdesc = (*C.struct_rc_recv)(C.calloc(C.size_t(q.recvBatch), C.sizeof_struct_rc_recv))
	q.rsges = (*C.struct_ibv_sge)(C.calloc(C.size_t(q.recvBatch*sge), C.sizeof_struct_ibv_sge))
	q.rbad = (*C.int)(C.calloc(1, C.sizeof_int))
	return q.swrs != nil && q.sdesc != nil && q.ssges != nil && q.sbad != nil &&
		q.rwrs != nil && q.rdesc != nil && q.rsges != nil && q.rbad != nil
}

func (q *QP) freeArrays() {
	for _, p := range []unsafe.Pointer{
		unsafe.Pointer(q.swrs), unsafe.Pointer(q.sdesc), unsafe.Pointer(q.ssges), unsafe.Pointer(q.sbad),
		unsafe.Pointer(q.rwrs), unsafe.Pointer(q.rdesc), unsafe.Pointer(q.rsges), unsafe.Pointer(q.rbad),
	} {
		C.free(p)
	}
	q.swrs, q.sdesc, q.ssges, q.sbad = nil, nil, nil, nil
	q.rwrs, q.rdesc, q.rsges, q.rbad = nil, nil, nil, nil
}

// ownCQ returns c as an open CQ of this device, or an error naming what
// it is.
func (d *Device) ownCQ(c verbs.CQ, which string) (*CQ, error) {
	cq, ok := c.(*CQ)
	if ok {
		d.mu.Lock()
		_, ok = d.cqs[cq]
		d.mu.Unlock()
	}
	if !ok {
		return nil, fmt.Errorf("%w: %s %T is not an open CQ of this ibv device", verbs.ErrInvalidArgument, which, c)
	}
	return cq, nil
}

// Num implements verbs.QP.
func (q *QP) Num() uint32 { return q.qpn }

// cached is the state as this package last set or learnt it, with its
// incarnation.
func (q *QP) cached() (verbs.QPState, uint32) {
	v := q.state.Load()
	return verbs.QPState(v & 0xff), uint32(v >> 32)
}

// setState records a state the caller moved the QP to.
func (q *QP) setState(s verbs.QPState, gen uint32) {
	q.state.Store(uint64(gen)<<32 | uint64(s))
}

// failed records that incarnation gen of the QP entered ERR on its own,
// as a failed completion proves.
func (q *QP) failed(gen uint32) {
	for {
		v := q.state.Load()
		s := verbs.QPState(v & 0xff)
		if uint32(v>>32) != gen || s == verbs.StateReset || s == verbs.StateErr {
			return
		}
		if q.state.CompareAndSwap(v, uint64(gen)<<32|uint64(verbs.StateErr)) {
			return
		}
	}
}

// State implements verbs.QP. While the QP is in RTR or RTS it asks the
// device, which moves a QP to ERR when a request fails or its peer stops
// answering, before its completion has been polled.
func (q *QP) State() verbs.QPState {
	s, gen := q.cached()
	if s != verbs.StateRTR && s != verbs.StateRTS {
		return s
	}
	q.modMu.Lock()
	defer q.modMu.Unlock()
	if q.closed {
		return verbs.StateErr
	}
	if hw := int(C.rc_query_state(q.qp)); hw >= 0 && qpState(hw) == verbs.StateErr {
		q.failed(gen)
	}
	s, _ = q.cached()
	return s
}

// Endpoint implements verbs.QP.
func (q *QP) Endpoint() verbs.Endpoint {
	return endpointOf(&q.d.port, q.d.opts.Host, q.qpn, q.psn.Load(), q.params.rnrRetry)
}

// retireSend retires the send requests up to seq and returns the one at
// seq with the QP's incarnation.
func (q *QP) retireSend(seq uint64) (wrSlot, uint32, bool) {
	q.sendMu.Lock()
	defer q.sendMu.Unlock()
	s, ok := q.sq.complete(seq)
	_, gen := q.cached()
	return s, gen, ok
}

// retireRecv is retireSend for the receive queue.
func (q *QP) retireRecv(seq uint64) (wrSlot, uint32, bool) {
	q.recvMu.Lock()
	defer q.recvMu.Unlock()
	s, ok := q.rq.complete(seq)
	_, gen := q.cached()
	return s, gen, ok
}
