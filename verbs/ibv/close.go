//go:build ibverbs && cgo

package ibv

// #include "shim.h"
import "C"

import (
	"fmt"
	"time"

	"github.com/rdmacell/rdmacell/verbs"
)

const (
	// drainTimeout bounds how long Close waits for the device to flush
	// the QP's requests into its CQs.
	drainTimeout = 5 * time.Second
	// drainQuiet is how long Close waits without a new completion before
	// it concludes that the send requests still outstanding had
	// succeeded unsignaled, when it could not post a marker.
	drainQuiet = 100 * time.Millisecond
)

// Close implements verbs.QP. It moves the QP to ERR and collects the
// flushed completions of its outstanding requests into the CQs' backlogs
// before destroying it, because ibv_destroy_qp discards the completions
// of the QP still in its CQs while the model promises them to the
// caller.
func (q *QP) Close() error {
	q.modMu.Lock()
	defer q.modMu.Unlock()
	if q.closed {
		return fmt.Errorf("ibv: close QP %d: %w", q.qpn, verbs.ErrClosed)
	}
	q.closed = true
	if s, gen := q.cached(); s != verbs.StateReset {
		if rc := C.rc_to_state(q.qp, qpsErr); rc != 0 {
			q.log.Warn("ibv: move to ERR before destroy failed", "err", errnoOf(rc))
		}
		q.setState(verbs.StateErr, gen)
		q.drain()
	}
	q.sendMu.Lock()
	q.recvMu.Lock()
	q.sendDone, q.recvDone = true, true
	q.recvMu.Unlock()
	q.sendMu.Unlock()
	var err error
	if rc := C.ibv_destroy_qp(q.qp); rc != 0 {
		err = fmt.Errorf("ibv: ibv_destroy_qp of QP %d: %w", q.qpn, errnoOf(rc))
	}
	q.d.qpMu.Lock()
	delete(q.d.qps, q.qpn)
	q.d.qpMu.Unlock()
	q.releaseLabel()
	q.freeArrays()
	q.pd.qpClosed()
	return err
}

// drain polls the QP's CQs until its queues are empty. Every receive
// flushes, so the receive ring empties; a send request that succeeded
// unsignaled never completes, so drain first posts a signaled marker,
// which a QP in ERR flushes behind everything else. If the library
// refuses to post in ERR, drain stops after drainQuiet without news.
func (q *QP) drain() {
	marker := q.postMarker()
	deadline := time.Now().Add(drainTimeout)
	quietSince := time.Now()
	for {
		q.sendMu.Lock()
		sends := q.sq.outstanding()
		q.sendMu.Unlock()
		q.recvMu.Lock()
		recvs := q.rq.outstanding()
		q.recvMu.Unlock()
		if recvs == 0 && (sends == 0 || !marker && time.Since(quietSince) > drainQuiet) {
			return
		}
		if time.Now().After(deadline) {
			q.log.Warn("ibv: QP closed before the device flushed all its requests",
				"send_outstanding", sends, "recv_outstanding", recvs)
			return
		}
		got := q.sendCQ.collect()
		if q.recvCQ != q.sendCQ {
			got += q.recvCQ.collect()
		}
		if got > 0 {
			quietSince = time.Now()
		} else {
			time.Sleep(100 * time.Microsecond)
		}
	}
}

// postMarker posts a signaled empty WRITE that only marks the end of the
// send queue; its completion is never shown to the caller.
func (q *QP) postMarker() bool {
	q.sendMu.Lock()
	defer q.sendMu.Unlock()
	if q.sq.outstanding() == 0 {
		return false
	}
	seq := q.sq.push(wrSlot{marker: true})
	*q.sdesc = C.struct_rc_send{wr_id: C.uint64_t(seq), opcode: wrOpRDMAWrite, flags: sendFlagSignaled}
	if rc := C.rc_post_send(q.qp, q.swrs, q.sdesc, q.ssges, 1, C.int(q.params.maxSGE), q.sbad); rc != 0 {
		q.sq.unpush(1)
		return false
	}
	return true
}
