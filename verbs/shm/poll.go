package shm

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
// whose checks pass against cached state (see advance). Anything else is
// left to the engine.
func (e *engine) fast(l *link, c *clock) {
	if l == nil || l.isDown() || !l.pair.peerAttached() {
		return
	}
	e.advance(l, c, false)
}

// wake rouses the engine, dozing or asleep: a poster or poller met work
// only the engine does. The caller holds a role, so the link stays
// mapped.
func (e *engine) wake() {
	if e.needed.Swap(true) {
		return // told already, and it has not looked yet
	}
	if l := e.q.link.Load(); l != nil {
		l.pair.bell(l.pair.side).ring()
	}
	e.wakeDoze()
}
