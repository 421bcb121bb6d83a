package ibv

import "github.com/rdmacell/rdmacell/verbs"

// wrSlot is what a QP remembers of a posted request until its completion:
// ibverbs returns only the 64-bit wr_id, and this package puts its own
// sequence number there (see wrRing), so the caller's ID, the opcode and
// the length come from here.
type wrSlot struct {
	id     uint64
	op     verbs.Opcode
	n      uint32
	marker bool // posted by Close to learn when the queue is empty
}

// wrRing is the software image of one work queue. Requests take sequence
// numbers in posting order; a completion for sequence s retires every
// request up to s, because an RC queue completes in order and an
// unsignaled request that succeeded leaves no completion of its own: its
// slot is freed by the next completion, as the hardware frees it. The
// ring therefore enforces MaxSendWR and MaxRecvWR exactly, whatever
// depth the driver rounded the hardware queue up to.
type wrRing struct {
	slots      []wrSlot
	limit      int    // requests the caller may have outstanding
	head, tail uint64 // next sequence number to post; oldest outstanding
}

func newRing(limit, spare int) wrRing {
	return wrRing{slots: make([]wrSlot, limit+spare), limit: limit}
}

// outstanding is the number of requests posted and not yet retired.
func (r *wrRing) outstanding() int { return int(r.head - r.tail) }

// room is how many more requests the caller may post now.
func (r *wrRing) room() int { return r.limit - r.outstanding() }

// push records a request and returns its sequence number. Callers check
// room first; a marker may use the spare slots beyond limit.
func (r *wrRing) push(s wrSlot) uint64 {
	seq := r.head
	r.slots[seq%uint64(len(r.slots))] = s
	r.head++
	return seq
}

// unpush forgets the last n pushed requests, which the device refused.
func (r *wrRing) unpush(n int) { r.head -= uint64(n) }

// complete retires every request up to seq and returns the one at seq.
// ok is false for a sequence number that is not outstanding: a completion
// of an incarnation discarded by a reset.
func (r *wrRing) complete(seq uint64) (wrSlot, bool) {
	if seq < r.tail || seq >= r.head {
		return wrSlot{}, false
	}
	r.tail = seq + 1
	return r.slots[seq%uint64(len(r.slots))], true
}

// reset discards every outstanding request, as a move to RESET does.
func (r *wrRing) reset() { r.tail = r.head }
