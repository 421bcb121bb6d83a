package soft

import (
	"fmt"
	"sync"
	"time"

	"github.com/rdmacell/rdmacell/verbs"
)

// RecvQueue holds posted receive requests. Scatter-gather lists are copied
// into preallocated slots at post time, as an RNIC copies a WQE, so the
// caller may reuse its RecvWR at once and posting does not allocate.
type RecvQueue struct {
	mu     sync.Mutex
	slots  []RecvSlot
	head   int
	n      int
	maxSGE int
	posted chan struct{}
}

// RecvSlot is one posted receive request.
type RecvSlot struct {
	ID  uint64
	SGL []verbs.SGE
}

// NewRecvQueue returns a queue for up to depth requests of up to maxSGE
// elements each.
func NewRecvQueue(depth, maxSGE int) *RecvQueue {
	q := &RecvQueue{slots: make([]RecvSlot, depth), maxSGE: maxSGE, posted: make(chan struct{}, 1)}
	for i := range q.slots {
		q.slots[i].SGL = make([]verbs.SGE, 0, maxSGE)
	}
	return q
}

// Post appends the chain at wr. check validates each request before it is
// queued; its error stops the chain at that request.
func (q *RecvQueue) Post(wr *verbs.RecvWR, check func(*verbs.RecvWR) error) (*verbs.RecvWR, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for ; wr != nil; wr = wr.Next {
		if len(wr.SGL) > q.maxSGE {
			return wr, fmt.Errorf("%w: receive wr %d has %d SGEs, QP allows %d", verbs.ErrInvalidArgument, wr.ID, len(wr.SGL), q.maxSGE)
		}
		if q.n == len(q.slots) {
			return wr, fmt.Errorf("%w: %d receives outstanding", verbs.ErrQueueFull, q.n)
		}
		if check != nil {
			if err := check(wr); err != nil {
				return wr, err
			}
		}
		s := &q.slots[(q.head+q.n)%len(q.slots)]
		s.ID = wr.ID
		s.SGL = append(s.SGL[:0], wr.SGL...)
		q.n++
	}
	select {
	case q.posted <- struct{}{}:
	default:
	}
	return nil, nil
}

// Take moves the oldest posted request into dst, waiting up to wait for
// one to be posted. dst.SGL is reused, so a caller that keeps one slot does
// not allocate.
func (q *RecvQueue) Take(wait time.Duration, dst *RecvSlot) bool {
	var timer *time.Timer
	for {
		q.mu.Lock()
		if q.n > 0 {
			s := &q.slots[q.head]
			dst.ID = s.ID
			dst.SGL = append(dst.SGL[:0], s.SGL...)
			q.head = (q.head + 1) % len(q.slots)
			q.n--
			q.mu.Unlock()
			if timer != nil {
				timer.Stop()
			}
			return true
		}
		q.mu.Unlock()
		if wait <= 0 {
			return false
		}
		if timer == nil {
			timer = time.NewTimer(wait)
		}
		select {
		case <-q.posted:
		case <-timer.C:
			wait = 0
		}
	}
}

// Flush completes every posted request with StatusWRFlush into cq.
func (q *RecvQueue) Flush(cq *CQ, qpn uint32) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for ; q.n > 0; q.n-- {
		cq.Push(verbs.WC{ID: q.slots[q.head].ID, Status: verbs.StatusWRFlush, Opcode: verbs.OpRecv, QPN: qpn})
		q.head = (q.head + 1) % len(q.slots)
	}
}

// Reset discards every posted request without completions.
func (q *RecvQueue) Reset() {
	q.mu.Lock()
	q.head, q.n = 0, 0
	q.mu.Unlock()
}
