package shm

import (
	"sync/atomic"

	"github.com/rdmacell/rdmacell/verbs"
)

// sendQueue is a QP's send queue: a ring of slots into which PostSend
// copies each request, as an RNIC copies a WQE, so that the caller may
// reuse its SendWR at once and posting does not allocate. Posters append
// under QP.sqMu; the holder of the requester role (see engine) executes
// and completes.
type sendQueue struct {
	slots []sendSlot
	head  atomic.Uint64 // next request to complete; advanced by the engine
	tail  atomic.Uint64 // next free slot; advanced by posters
}

// sendSlot is one posted send request.
type sendSlot struct {
	id    uint64
	op    verbs.Opcode
	flags verbs.SendFlags
	sgl   []verbs.SGE
	raddr uint64
	rkey  uint32
	imm   uint32
	total uint64
	// need is the last descriptor published when the request was
	// executed: it completes once that one is acknowledged.
	need uint32
}

func (q *sendQueue) init(depth, maxSGE int) {
	q.slots = make([]sendSlot, depth)
	for i := range q.slots {
		q.slots[i].sgl = make([]verbs.SGE, 0, maxSGE)
	}
}

func (q *sendQueue) slot(i uint64) *sendSlot { return &q.slots[i%uint64(len(q.slots))] }

// put copies wr into slot i.
func (s *sendSlot) put(wr *verbs.SendWR, total uint64) {
	s.id, s.op, s.flags = wr.ID, wr.Opcode, wr.Flags
	s.sgl = append(s.sgl[:0], wr.SGL...)
	s.raddr, s.rkey, s.imm, s.total = wr.RemoteAddr, wr.RKey, wr.Imm, total
}
