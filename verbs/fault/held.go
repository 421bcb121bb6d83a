package fault

import (
	"time"

	"github.com/rdmacell/rdmacell/verbs"
)

// held is a send request the wrapper holds instead of handing it to the
// provider: a copy of the caller's request, which the caller may reuse.
type held struct {
	wr verbs.SendWR // Next is nil; SGL is owned by the entry
	// at is when the request reaches the provider (Delay) or, for the
	// first dropped request, when it fails.
	at time.Time
	// stalled requests wait for the fault to change; at is unset.
	stalled bool
	// drop marks a request that vanished; only the first has an at.
	drop bool
}

// heldQueue is a FIFO of held requests. Popped entries keep their
// scatter-gather arrays for reuse, so a steady stream of delayed requests
// does not allocate once the queue has grown.
type heldQueue struct {
	q    []held
	head int
}

func (h *heldQueue) len() int { return len(h.q) - h.head }

// at returns the i-th pending entry.
func (h *heldQueue) at(i int) *held { return &h.q[h.head+i] }

// push appends a copy of wr and returns its entry.
func (h *heldQueue) push(wr *verbs.SendWR) *held {
	if len(h.q) < cap(h.q) {
		h.q = h.q[:len(h.q)+1]
	} else {
		h.q = append(h.q, held{})
	}
	e := &h.q[len(h.q)-1]
	sgl := append(e.wr.SGL[:0], wr.SGL...)
	*e = held{wr: *wr}
	e.wr.SGL, e.wr.Next = sgl, nil
	return e
}

// pop removes the first entry. Its contents stay valid until the next push.
func (h *heldQueue) pop() {
	h.head++
	if h.head == len(h.q) {
		h.q, h.head = h.q[:0], 0
	}
}

// clear removes every entry.
func (h *heldQueue) clear() { h.q, h.head = h.q[:0], 0 }
