package shm

import (
	"runtime"
	"sync/atomic"
	"time"

	"github.com/rdmacell/rdmacell/internal/futex"
	"github.com/rdmacell/rdmacell/verbs"
	"github.com/rdmacell/rdmacell/verbs/internal/soft"
)

// Engine tuning.
const (
	// spinRounds is how many times (each a yield to other goroutines,
	// some 10–20 µs in all) an engine polls after its last piece of work
	// before it sleeps. A reply that comes back within it costs no
	// wake-up; an idle QP sleeps and costs nothing. More rounds (200
	// once) put the scheduler's lock at a quarter of a chain benchmark's
	// profile, yields of several spinning engines contending for it.
	spinRounds = 50
	// idleWait bounds a sleep with nothing pending, so that even a lost
	// wake-up would only delay, never hang. Every idle QP's engine pays
	// it: at 1 s the engines of a rank with three peers cost it about
	// 0.5% of a core. A long bound shows a lost wake-up instead of hiding
	// it: the one there was (a dialer attaching to the pair without
	// ringing the peer) held every job's start for the whole bound.
	idleWait = 10 * time.Second
	// dozeTime bounds how long an engine stays out of the way while a
	// goroutine polls one of its QP's CQs. A poller that parks in CQ.Wait
	// hands the QP back at once (see handOver); only one that stops
	// polling without waiting leaves the peer's requests for this long.
	dozeTime = 200 * time.Microsecond
	// inlineMax is the largest request a poster or poller executes in
	// its own goroutine (a copy of some 10 µs). Waking the engine
	// instead costs a futex wake and a scheduling round, hundreds of
	// microseconds on a busy machine: with 16 KiB here, a 64 KiB
	// ping-pong between two connections took 2 ms per round trip.
	inlineMax = 256 << 10
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
	polled            atomic.Uint32 // bell value of the last complete poll
	lastPolls         uint32        // q.polls when the engine last looked

	// While pollers drive the QP the engine dozes on dozeWord, a futex
	// word in this process's memory that only local events touch (a
	// post that leaves work, a poller that parks, a stop), so the peer
	// pays no system call to wake it. handover says a poller parked:
	// the engine must sleep where the peer's doorbell reaches it.
	dozeWord uint32
	dozing   atomic.Bool
	handover atomic.Bool
	// needed says a poster or poller left work only the engine does and
	// has woken it; until the engine looks, others need not wake it again.
	needed atomic.Bool
	// wakeups counts the engine's returns from sleeping or dozing, so
	// tests can tell an idle engine from a busy loop without timing it.
	wakeups atomic.Uint64

	// Requester (see request.go). waiting says since when the oldest
	// outstanding descriptor, or the peer's connection, is awaited.
	waiting   bool
	since     time.Time
	seq       uint32 // last descriptor published
	acked     uint32 // last descriptor acknowledged
	progress  uint32 // the responder's progress counter when last seen
	next      uint64 // next request of the send queue to execute
	blocked   bool   // nothing executes until blockSeq is acknowledged
	blockSeq  uint32
	recvsUsed uint32 // receives the published requests consume
	sendOff   uint64 // bytes of the SEND being executed acknowledged
	chunk     uint32 // bytes of its chunk in flight
	chunkOut  bool
	failing   bool // the request at next failed and waits for those before it
	failSt    verbs.Status
	failErr   error
	srcs      [][]byte

	// Responder.
	handled      uint32 // sequence number of the peer's last request executed
	answeredUpTo uint32 // the last one acknowledged
	peerFailed   bool   // a request was answered with a failure
	recv         soft.RecvSlot
	haveRecv     bool   // recv was taken for the message being received
	recvOff      uint64 // bytes of that message placed
	rnr          bool   // no receive was posted for the pending request
	rnrTries     int
	rnrNext      time.Time

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
			if l != nil {
				l.pair.cancel()
			}
			if m == stopFlush && e.haveRecv {
				q.recvCQ.Push(verbs.WC{ID: e.recv.ID, Status: verbs.StatusWRFlush, Opcode: verbs.OpRecv, QPN: q.num})
			}
			return
		}
		// Cleared before the roles are taken: a wake for work found
		// after this is not lost.
		e.needed.Store(false)
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
		if busy {
			// A poster or poller holds a role for a moment: it may be
			// the one that left us work it cannot do. Try again soon
			// rather than doze past that work.
			runtime.Gosched()
			continue
		}
		if e.handover.Swap(false) {
			// The pollers parked: whatever they polled before is no
			// reason to stay out of the way, and nothing is coming that
			// a spin would catch sooner than the doorbell. Sleep now,
			// or polls resuming meanwhile would keep us dozing.
			e.lastPolls = q.polls.Load()
			spins = spinRounds
		} else if p := q.polls.Load(); p != e.lastPolls && !e.needed.Load() {
			// A goroutine polling a CQ of this QP drives it: stay out of
			// its way, and do not make the peer pay for waking us.
			e.lastPolls = p
			e.doze(min(wait, dozeTime))
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
			e.wakeups.Add(1)
			continue
		}
		e.timer.Reset(wait)
		select {
		case <-q.wake:
		case <-e.timer.C:
		}
		e.timer.Stop()
		e.wakeups.Add(1)
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

// doze sleeps for d without asking to be woken by the peer: only a
// local event (wakeDoze) ends it early.
func (e *engine) doze(d time.Duration) {
	d = max(d, 10*time.Microsecond)
	v := atomic.LoadUint32(&e.dozeWord)
	e.dozing.Store(true)
	// handOver sets handover before it looks at dozing, and this looks
	// at handover after setting dozing: one of the two sees the other.
	if !e.handover.Load() && e.stopMode.Load() == 0 {
		futex.Wait(&e.dozeWord, v, d)
	}
	e.dozing.Store(false)
	e.wakeups.Add(1)
}

// wakeDoze ends a doze: a local event left the engine work.
func (e *engine) wakeDoze() {
	if e.dozing.Load() {
		atomic.AddUint32(&e.dozeWord, 1)
		futex.Wake(&e.dozeWord)
	}
}

// handOver is called by a goroutine that polled the QP's CQ and is about
// to block in CQ.Wait: from now on the engine must serve the peer, and
// sleep where the peer's doorbell wakes it.
func (e *engine) handOver() {
	e.handover.Store(true)
	e.wakeDoze()
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
