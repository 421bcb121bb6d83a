package shm

import (
	"slices"
	"sync"
	"sync/atomic"
)

// cqHook makes polling a CQ drive the QPs that complete into it (see
// engine.poll): a goroutine spinning on a CQ then executes the peer's
// requests itself, and a ping-pong needs no hand-off between goroutines.
type cqHook struct {
	mu  sync.Mutex
	qps atomic.Pointer[[]*QP] // copied on change; read by every poll
}

func (h *cqHook) run() {
	p := h.qps.Load()
	if p == nil || len(*p) == 0 {
		return
	}
	var c clock
	for _, q := range *p {
		if e := q.running.Load(); e != nil {
			e.poll(&c)
		}
	}
}

// park runs when a goroutine waiting on the CQ stops polling and blocks:
// the engines of its QPs take over at once (see engine.handOver).
func (h *cqHook) park() {
	p := h.qps.Load()
	if p == nil {
		return
	}
	for _, q := range *p {
		if e := q.running.Load(); e != nil {
			e.handOver()
		}
	}
}

func (h *cqHook) add(q *QP) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var qps []*QP
	if p := h.qps.Load(); p != nil {
		qps = slices.Clone(*p)
	}
	if !slices.Contains(qps, q) {
		qps = append(qps, q)
	}
	h.qps.Store(&qps)
}

func (h *cqHook) remove(q *QP) {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := h.qps.Load()
	if p == nil {
		return
	}
	qps := slices.DeleteFunc(slices.Clone(*p), func(x *QP) bool { return x == q })
	h.qps.Store(&qps)
}
