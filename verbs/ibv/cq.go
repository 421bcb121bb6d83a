//go:build ibverbs && cgo

package ibv

// #include <stdlib.h>
// #include "shim.h"
import "C"

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/rdmacell/rdmacell/verbs"
)

// pollBatch is how many completions one ibv_poll_cq call moves.
const pollBatch = 64

// recvTag marks the wr_id of receive requests, so that a completion says
// which queue it belongs to even when it is an error completion, whose
// opcode ibverbs leaves undefined, and when both queues share a CQ.
const recvTag = 1 << 63

// CQ is a completion queue with its own completion channel, so that Wait
// can sleep on the channel's file descriptor. It implements verbs.CQ.
//
// Poll translates each ibverbs completion back into the caller's terms:
// the wr_id carries this package's sequence number, and the QP's ring
// gives the caller's ID, opcode and length (see wrRing).
type CQ struct {
	d    *Device
	cq   *C.struct_ibv_cq
	ch   *C.struct_ibv_comp_channel
	chFD int
	wcs  *C.struct_ibv_wc // pollBatch entries
	out  *C.struct_rc_wc  // pollBatch entries

	mu sync.Mutex
	// backlog holds translated completions taken off the device early,
	// by a closing QP that had to see its own flushed requests; Poll
	// returns them first.
	backlog []verbs.WC
	closed  bool
	parked  map[*waiter]struct{}
	idle    []*waiter
	left    *sync.Cond // signalled when a parked waiter leaves
}

var _ verbs.CQ = (*CQ)(nil)

// CreateCQ implements verbs.Device.
func (d *Device) CreateCQ(depth int) (verbs.CQ, error) {
	if depth <= 0 || depth > d.maxCQE {
		return nil, fmt.Errorf("%w: CQ depth %d, want 1..%d on this device", verbs.ErrInvalidArgument, depth, d.maxCQE)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, fmt.Errorf("ibv: create CQ: %w", verbs.ErrClosed)
	}
	ch, err := C.ibv_create_comp_channel(d.ctx)
	if ch == nil {
		return nil, fmt.Errorf("ibv: ibv_create_comp_channel: %w", err)
	}
	// Events are read without blocking; Wait blocks in poll(2) instead,
	// where it can also be woken for its context or Close.
	if err := unix.SetNonblock(int(ch.fd), true); err != nil {
		C.ibv_destroy_comp_channel(ch)
		return nil, fmt.Errorf("ibv: completion channel non-blocking: %w", err)
	}
	c, err := C.ibv_create_cq(d.ctx, C.int(depth), nil, ch, 0)
	if c == nil {
		C.ibv_destroy_comp_channel(ch)
		return nil, fmt.Errorf("ibv: ibv_create_cq of depth %d: %w", depth, err)
	}
	cq := &CQ{
		d:      d,
		cq:     c,
		ch:     ch,
		chFD:   int(ch.fd),
		wcs:    (*C.struct_ibv_wc)(C.calloc(pollBatch, C.sizeof_struct_ibv_wc)),
		out:    (*C.struct_rc_wc)(C.calloc(pollBatch, C.sizeof_struct_rc_wc)),
		parked: make(map[*waiter]struct{}),
	}
	cq.left = sync.NewCond(&cq.mu)
	if cq.wcs == nil || cq.out == nil {
		cq.free()
		return nil, fmt.Errorf("ibv: allocate completion buffers: %w", unix.ENOMEM)
	}
	d.cqs[cq] = struct{}{}
	return cq, nil
}

// Poll implements verbs.CQ.
func (cq *CQ) Poll(wc []verbs.WC) int {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	if cq.closed {
		return 0
	}
	n := copy(wc, cq.backlog)
	if n > 0 {
		cq.backlog = cq.backlog[:copy(cq.backlog, cq.backlog[n:])]
	}
	for n < len(wc) {
		n2, more := cq.pollLocked(wc[n:])
		n += n2
		if !more {
			break
		}
	}
	return n
}

// pollLocked moves one batch of completions off the device into wc and
// returns how many it stored; more reports that the device may hold
// others. Completions that the caller must not see (a marker, a request
// discarded by a reset) are dropped.
func (cq *CQ) pollLocked(wc []verbs.WC) (n int, more bool) {
	want := min(len(wc), pollBatch)
	k := int(C.rc_poll(cq.cq, cq.wcs, cq.out, C.int(want)))
	if k <= 0 {
		return 0, false
	}
	outs := unsafe.Slice(cq.out, k)
	for i := range outs {
		if cq.translate(&outs[i], &wc[n]) {
			n++
		}
	}
	return n, k == want
}

// translate turns a device completion into the caller's, and reports
// whether the caller should see it.
func (cq *CQ) translate(c *C.struct_rc_wc, wc *verbs.WC) bool {
	qpn := uint32(c.qp_num)
	q := cq.d.lookupQP(qpn)
	if q == nil {
		return false // a destroyed QP's; Close collected those it owed
	}
	id, status := uint64(c.wr_id), int(c.status)
	var (
		slot wrSlot
		gen  uint32
		ok   bool
	)
	if id&recvTag != 0 {
		slot, gen, ok = q.retireRecv(id &^ recvTag)
	} else {
		slot, gen, ok = q.retireSend(id)
	}
	if !ok || slot.marker {
		return false
	}
	*wc = verbs.WC{ID: slot.id, Status: statusOf(status), Opcode: slot.op, ByteLen: slot.n, QPN: qpn}
	if id&recvTag != 0 {
		wc.Opcode, wc.ByteLen = verbs.OpRecv, 0
		if status == wcSuccess {
			wc.Opcode, wc.ByteLen = recvOpcode(int(c.opcode)), uint32(c.byte_len)
		}
		if c.flags&wcFlagWithImm != 0 {
			wc.Flags |= verbs.WCWithImm
			wc.Imm = uint32(c.imm)
		}
	}
	if status != wcSuccess {
		// The device moved the QP to ERR; say so without asking it.
		q.failed(gen)
		if status != wcWRFlushErr {
			q.log.Debug("ibv: request failed", "wr", slot.id, "opcode", wc.Opcode,
				"status", statusName(status), "vendor_err", uint32(c.vendor_err))
		}
	}
	return true
}

// collect moves every completion the device holds into the backlog, and
// returns how many. A closing QP calls it to see its flushed requests
// before it destroys itself.
func (cq *CQ) collect() int {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	if cq.closed {
		return 0
	}
	var buf [pollBatch]verbs.WC
	total := 0
	for {
		n, more := cq.pollLocked(buf[:])
		cq.backlog = append(cq.backlog, buf[:n]...)
		total += n
		if !more {
			break
		}
	}
	if total > 0 {
		// A waiter parked on the channel may already have consumed the
		// event of these completions.
		for w := range cq.parked {
			w.wake()
		}
	}
	return total
}

// Close implements verbs.CQ. It fails while a QP uses the CQ; it wakes
// every waiter, which returns verbs.ErrClosed.
func (cq *CQ) Close() error {
	cq.d.qpMu.RLock()
	for _, q := range cq.d.qps {
		if q.sendCQ == cq || q.recvCQ == cq {
			cq.d.qpMu.RUnlock()
			return fmt.Errorf("%w: CQ still used by QP %d", verbs.ErrInvalidArgument, q.qpn)
		}
	}
	cq.d.qpMu.RUnlock()
	cq.d.mu.Lock()
	delete(cq.d.cqs, cq)
	cq.d.mu.Unlock()
	return cq.destroy()
}

// destroy wakes and waits out the waiters, then releases the CQ, its
// channel and buffers.
func (cq *CQ) destroy() error {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	if cq.closed {
		return nil
	}
	cq.closed = true
	for w := range cq.parked {
		w.wake()
	}
	for len(cq.parked) > 0 {
		cq.left.Wait()
	}
	var err error
	// Unacknowledged events would make ibv_destroy_cq wait forever.
	C.rc_drain_events(cq.ch)
	if rc := C.ibv_destroy_cq(cq.cq); rc != 0 {
		err = errors.Join(err, fmt.Errorf("ibv: ibv_destroy_cq: %w", errnoOf(rc)))
	}
	if rc := C.ibv_destroy_comp_channel(cq.ch); rc != 0 {
		err = errors.Join(err, fmt.Errorf("ibv: ibv_destroy_comp_channel: %w", errnoOf(rc)))
	}
	cq.free()
	return err
}

// free releases the C buffers and the idle waiters' descriptors.
func (cq *CQ) free() {
	C.free(unsafe.Pointer(cq.wcs))
	C.free(unsafe.Pointer(cq.out))
	cq.wcs, cq.out = nil, nil
	for _, w := range cq.idle {
		w.close()
	}
	cq.idle = nil
}
