//go:build ibverbs && cgo

package ibv

// #include "shim.h"
import "C"

import (
	"errors"
	"fmt"
	"syscall"
	"unsafe"

	"github.com/rdmacell/rdmacell/verbs"
)

// PostSend implements verbs.QP. Requests are written into the QP's C
// arrays and posted with ibv_post_send, up to maxBatch per call; nothing
// is allocated. The caller's IDs stay in the send ring: the device sees
// sequence numbers. Immediate data is converted to network byte order,
// so the responder's WC.Imm equals the Imm posted.
func (q *QP) PostSend(wr *verbs.SendWR) (*verbs.SendWR, error) {
	q.sendMu.Lock()
	defer q.sendMu.Unlock()
	if q.sendDone {
		return wr, fmt.Errorf("ibv: post send on QP %d: %w", q.qpn, verbs.ErrClosed)
	}
	if s, _ := q.cached(); s != verbs.StateRTS {
		return wr, fmt.Errorf("%w: post send on QP %d in %s", verbs.ErrInvalidState, q.qpn, s)
	}
	maxSGE := q.params.maxSGE
	descs := unsafe.Slice(q.sdesc, q.sendBatch)
	sges := unsafe.Slice(q.ssges, q.sendBatch*maxSGE)
	for wr != nil {
		first, n := wr, 0
		var refused error
		for ; wr != nil && n < q.sendBatch; wr = wr.Next {
			op, ok := wrOpcode(wr.Opcode)
			switch {
			case !ok:
				refused = fmt.Errorf("%w: send opcode %s on QP %d", verbs.ErrInvalidArgument, wr.Opcode, q.qpn)
			case len(wr.SGL) > maxSGE:
				refused = fmt.Errorf("%w: %d SGEs on QP %d with MaxSGE %d", verbs.ErrInvalidArgument, len(wr.SGL), q.qpn, maxSGE)
			case q.sq.room() == 0:
				refused = fmt.Errorf("%w: QP %d has %d send requests outstanding", verbs.ErrQueueFull, q.qpn, q.sq.outstanding())
			}
			if refused != nil {
				break
			}
			for j, s := range wr.SGL {
				sges[n*maxSGE+j] = C.struct_ibv_sge{addr: C.uint64_t(s.Addr), length: C.uint32_t(s.Length), lkey: C.uint32_t(s.LKey)}
			}
			var flags C.uint32_t
			if wr.Flags&verbs.Signaled != 0 {
				flags = sendFlagSignaled
			}
			seq := q.sq.push(wrSlot{id: wr.ID, op: wr.Opcode, n: uint32(wr.Len())})
			descs[n] = C.struct_rc_send{
				wr_id:       C.uint64_t(seq),
				remote_addr: C.uint64_t(wr.RemoteAddr),
				rkey:        C.uint32_t(wr.RKey),
				imm:         C.uint32_t(wr.Imm),
				opcode:      C.uint32_t(op),
				flags:       flags,
				num_sge:     C.uint32_t(len(wr.SGL)),
			}
			n++
		}
		if n > 0 {
			if rc := C.rc_post_send(q.qp, q.swrs, q.sdesc, q.ssges, C.int(n), C.int(maxSGE), q.sbad); rc != 0 {
				k := max(int(*q.sbad), 0)
				q.sq.unpush(n - k)
				return nthSend(first, k), q.postErr("ibv_post_send", rc)
			}
		}
		if refused != nil {
			return wr, refused
		}
	}
	return nil, nil
}

// PostRecv implements verbs.QP, as PostSend does, from StateInit on.
func (q *QP) PostRecv(wr *verbs.RecvWR) (*verbs.RecvWR, error) {
	q.recvMu.Lock()
	defer q.recvMu.Unlock()
	if q.recvDone {
		return wr, fmt.Errorf("ibv: post receive on QP %d: %w", q.qpn, verbs.ErrClosed)
	}
	if s, _ := q.cached(); s == verbs.StateReset || s == verbs.StateErr {
		return wr, fmt.Errorf("%w: post receive on QP %d in %s", verbs.ErrInvalidState, q.qpn, s)
	}
	maxSGE := q.params.maxSGE
	descs := unsafe.Slice(q.rdesc, q.recvBatch)
	sges := unsafe.Slice(q.rsges, q.recvBatch*maxSGE)
	for wr != nil {
		first, n := wr, 0
		var refused error
		for ; wr != nil && n < q.recvBatch; wr = wr.Next {
			switch {
			case len(wr.SGL) > maxSGE:
				refused = fmt.Errorf("%w: %d SGEs on QP %d with MaxSGE %d", verbs.ErrInvalidArgument, len(wr.SGL), q.qpn, maxSGE)
			case q.rq.room() == 0:
				refused = fmt.Errorf("%w: QP %d has %d receive requests outstanding", verbs.ErrQueueFull, q.qpn, q.rq.outstanding())
			}
			if refused != nil {
				break
			}
			for j, s := range wr.SGL {
				sges[n*maxSGE+j] = C.struct_ibv_sge{addr: C.uint64_t(s.Addr), length: C.uint32_t(s.Length), lkey: C.uint32_t(s.LKey)}
			}
			seq := q.rq.push(wrSlot{id: wr.ID, op: verbs.OpRecv})
			descs[n] = C.struct_rc_recv{wr_id: C.uint64_t(seq | recvTag), num_sge: C.uint32_t(len(wr.SGL))}
			n++
		}
		if n > 0 {
			if rc := C.rc_post_recv(q.qp, q.rwrs, q.rdesc, q.rsges, C.int(n), C.int(maxSGE), q.rbad); rc != 0 {
				k := max(int(*q.rbad), 0)
				q.rq.unpush(n - k)
				return nthRecv(first, k), q.postErr("ibv_post_recv", rc)
			}
		}
		if refused != nil {
			return wr, refused
		}
	}
	return nil, nil
}

// postErr explains a post the library refused: ENOMEM is a full queue,
// EINVAL a malformed request.
func (q *QP) postErr(call string, rc C.int) error {
	err := errnoOf(rc)
	switch {
	case errors.Is(err, syscall.ENOMEM):
		err = errors.Join(verbs.ErrQueueFull, err)
	case errors.Is(err, syscall.EINVAL):
		err = errors.Join(verbs.ErrInvalidArgument, err)
	}
	return fmt.Errorf("ibv: %s on QP %d: %w", call, q.qpn, err)
}

// nthSend returns the request k links after first.
func nthSend(first *verbs.SendWR, k int) *verbs.SendWR {
	for range k {
		first = first.Next
	}
	return first
}

// nthRecv returns the request k links after first.
func nthRecv(first *verbs.RecvWR, k int) *verbs.RecvWR {
	for range k {
		first = first.Next
	}
	return first
}
