package shm

import (
	"runtime"
	"sync/atomic"
	"time"

	"github.com/rdmacell/rdmacell/verbs"
	"github.com/rdmacell/rdmacell/verbs/internal/soft"
)

// Engine tuning.
const (
	// spinRounds is how many times (each a yield to other goroutines,
	// some 50 µs in all) an engine polls after its last piece of work
	// before it sleeps. A reply that comes back within it costs no
	// wake-up; an idle QP sleeps and costs nothing.
	spinRounds = 200
	// idleWait bounds a sleep with nothing pending, so that even a lost
	// wake-up would only delay, never hang.
	idleWait = time.Second
	// dozeTime is how long an engine sleeps while a poller drives its QP;
	// when polling stops, the engine takes over within it.
	dozeTime = 200 * time.Microsecond
	// inlineMax is the largest request a poster or poller executes in
	// its own goroutine; the copy takes about a microsecond.
	inlineMax = 16 << 10
)

// Engine stop modes.
const (
	stopFlush   int32 = 1 // the QP moves to ERR: flush what the engine holds
	stopDiscard int32 = 2 // the QP moves to RESET: drop it
)

// engine executes one QP's requests, as requester, and its peer's requests,
// as responder. Each QP has its own, so a slow or stalled QP delays no
// other. It runs from the move to RTR until the QP leaves RTR and RTS.
type engine struct {
	q        *QP
	stopMode atomic.Int32
	stopCh   chan struct{}
	done     chan struct{}
	timer    *time.Timer
	exited   bool // the engine failed the QP

	// The requester and responder roles are each held by one goroutine
	// at a time: the engine, or a goroutine polling or posting (see
	// poll). The fields below belong to the holder of their role.
	reqBusy, respBusy atomic.Bool
	dozing            atomic.Bool   // the engine sleeps while pollers drive
	polled            atomic.Uint32 // bell value of the last complete poll
	lastPolls         uint32        // q.polls when the engine last looked

	// Requester. The request at the head of the send queue is being
	// executed; waiting says since when it waits for the peer to connect
	// or acknowledge.
	waiting  bool
	since    time.Time
	inflight bool   // a request descriptor awaits its acknowledgement
	seq      uint32 // sequence number of the last request posted
	progress uint32 // the responder's progress counter when last seen
	sent     uint64 // bytes of the head SEND already acknowledged
	chunk    uint32 // bytes of the SEND chunk in flight
	srcs     [][]byte

	// Responder.
	handled  uint32 // sequence number of the peer's last request answered
	recv     soft.RecvSlot
	haveRecv bool   // recv was taken for the message being received
	recvOff  uint64 // bytes of that message placed
	rnr      bool   // no receive was posted for the pending request
	rnrTries int
	rnrNext  time.Time

	// Caches of remote lookups: rkey → table slot, and the last mapping.
	hints    [4]keyHint
	nextHint int
	lastPeer *peer
	lastMem  uint32
	lastMap  *mapping
}

type keyHint struct{ key, slot uint32 }

func newEngine(q *QP) *engine {
	e := &engine{
		q: q, stopCh: make(chan struct{}), done: make(chan struct{}),
		timer: time.NewTimer(time.Hour),
		srcs:  make([][]byte, 0, q.cfg.MaxSGE),
		recv:  soft.RecvSlot{SGL: make([]verbs.SGE, 0, q.cfg.MaxSGE)},
	}
	e.timer.Stop()
	return e
}

// stop makes the engine exit and waits for it. Called with q.mu held.
func (e *engine) stop(mode int32) {
	e.stopMode.Store(mode)
	close(e.stopCh)
	e.q.kickHard()
	<-e.done
}

func (e *engine) run() {
	q := e.q
	defer q.dev.wg.Done()
	defer close(e.done)
	spins := 0
	for {
		l := q.link.Load()
		var b bell
		var seen uint32
		if l != nil {
			b = l.pair.bell(l.pair.side)
			seen = b.load()
		}
		if m := e.stopMode.Load(); m != 0 {
			// Both roles stay locked: pollers leave a stopped engine alone.
			e.lockAll()
			if e.inflight && l != nil {
				l.pair.cancel(e.seq)
			}
			if m == stopFlush && e.haveRecv {
				q.recvCQ.Push(verbs.WC{ID: e.recv.ID, Status: verbs.StatusWRFlush, Opcode: verbs.OpRecv, QPN: q.num})
			}
			return
		}
		var c clock
		worked, busy := false, false
		wait := idleWait
		if e.respBusy.CompareAndSwap(false, true) {
			worked = e.respond(l, &c)
			if e.rnr {
				wait = min(wait, e.rnrNext.Sub(c.now()))
			}
			e.respBusy.Store(false)
		} else {
			busy = true
		}
		if e.reqBusy.CompareAndSwap(false, true) {
			worked = e.request(l, &c) || worked
			if e.exited {
				return // fail locked both roles for good
			}
			if e.waiting {
				if e.since.IsZero() {
					e.since = c.now()
				}
				wait = min(wait, e.since.Add(e.budget(l)).Sub(c.now()))
			}
			e.reqBusy.Store(false)
		} else {
			busy = true
		}
		if worked {
			spins = 0
			continue
		}
		if p := q.polls.Load(); p != e.lastPolls || busy {
			// A goroutine polling a CQ of this QP drives it: stay out of
			// its way, and do not make the peer pay for waking us.
			e.lastPolls = p
			e.doze(l, min(wait, dozeTime))
			continue
		}
		if spins < spinRounds {
			spins++
			runtime.Gosched()
			continue
		}
		wait = max(wait, 10*time.Microsecond)
		if l != nil {
			b.sleep(seen, wait)
			continue
		}
		e.timer.Reset(wait)
		select {
		case <-q.wake:
		case <-e.timer.C:
		}
		e.timer.Stop()
	}
}

// clock reads the time once, when first needed: on the machines this
// runs on a clock read costs a few hundred nanoseconds, as much as the
// rest of a small request.
type clock struct{ t time.Time }

func (c *clock) now() time.Time {
	if c.t.IsZero() {
		c.t = time.Now()
	}
	return c.t
}

// doze sleeps for d without asking to be woken by the peer: only a local
// post that leaves work for the engine wakes it early.
func (e *engine) doze(l *link, d time.Duration) {
	d = max(d, 10*time.Microsecond)
	e.dozing.Store(true)
	if l != nil {
		b := l.pair.bell(l.pair.side)
		futexWait(b.seq, b.load(), d)
	} else {
		e.timer.Reset(d)
		select {
		case <-e.q.wake:
		case <-e.timer.C:
		}
		e.timer.Stop()
	}
	e.dozing.Store(false)
}

// lockAll takes both roles, waiting for pollers to let go of them; they
// hold a role only for non-blocking work.
func (e *engine) lockAll() {
	for !e.respBusy.CompareAndSwap(false, true) {
		runtime.Gosched()
	}
	for !e.reqBusy.CompareAndSwap(false, true) {
		runtime.Gosched()
	}
}
