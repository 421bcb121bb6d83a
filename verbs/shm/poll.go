package shm

import (
	"github.com/rdmacell/rdmacell/verbs"
)

// poll lets a goroutine polling one of the QP's CQs advance the QP: it
// executes the peer's requests, collects acknowledgements and executes
// small requests of its own, without blocking and without failing
// anything (failures are left to the engine). The clock is shared by
// the QPs of one poll.
func (e *engine) poll(c *clock) {
	q := e.q
	q.polls.Add(1)
	// The segment may be touched only with a role held and the engine
	// not stopped: a QP being reset unmaps it after locking both roles.
	if !e.respBusy.CompareAndSwap(false, true) {
		return
	}
	defer e.respBusy.Store(false)
	l := q.link.Load()
	if l == nil || e.stopMode.Load() != 0 {
		return
	}
	seen := l.pair.bell(l.pair.side).load()
	if seen == e.polled.Load() {
		return // nothing happened since the last complete poll
	}
	e.respond(l, c)
	if e.reqBusy.CompareAndSwap(false, true) {
		e.fast(l, c)
		e.reqBusy.Store(false)
		e.polled.Store(seen)
	}
}

// fast is the requester's path for pollers and posters: it completes
// acknowledged requests and executes small WRITEs and WRITE_WITH_IMMs
// whose checks pass against cached state. Anything else (a failure, a
// memory file to fetch, a large copy, a SEND) is left to the engine.
func (e *engine) fast(l *link, c *clock) {
	q := e.q
	if l == nil || l.isDown() || !l.pair.peerAttached() {
		return
	}
	for {
		head := q.sq.head.Load()
		s := q.sq.slot(head)
		if e.inflight {
			seq, status, _ := l.pair.acked()
			if seq != e.seq {
				return // the acknowledgement is not there yet
			}
			if verbs.Status(status) != verbs.StatusSuccess || s.op == verbs.OpSend {
				e.wake(l)
				return
			}
			e.inflight, e.waiting = false, false
			e.complete(s)
			continue
		}
		if head == q.sq.tail.Load() {
			return
		}
		if s.op == verbs.OpSend || s.total > inlineMax {
			e.wake(l)
			return
		}
		e.waiting = false
		total, st := e.gather(s)
		if st != verbs.StatusSuccess {
			e.wake(l)
			return
		}
		dst, m, st, _ := e.remote(l, s.rkey, s.raddr, total, c, false)
		if st != verbs.StatusSuccess {
			e.wake(l)
			return
		}
		off := 0
		for _, src := range e.srcs {
			off += copy(dst[off:], src)
		}
		m.release()
		if s.op == verbs.OpWrite {
			e.complete(s)
			continue
		}
		e.post(l, desc{op: descImm, imm: s.imm, total: uint32(total)}, c)
		return
	}
}

// wake rouses an engine dozing while pollers drive its QP: they met work
// only the engine does.
func (e *engine) wake(l *link) {
	if e.dozing.Load() {
		futexWake(l.pair.bell(l.pair.side).seq)
	}
}
