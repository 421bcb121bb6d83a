package driver

import (
	"context"
	"runtime"
	"time"

	"github.com/rdmacell/rdmacell/verbs"
)

// How the progress goroutine waits. After the last progress it polls for
// spinFor, yielding the processor between polls, if polling its CQ does
// work (shm, an RNIC; not tcp, whose completions and records come from
// reader goroutines: a goroutine yielding in a loop keeps Go's scheduler
// from polling the network, and a tcp ping-pong took a millisecond per
// round trip, the sum of the back-offs below); then, while ranges are in
// flight, it waits in the CQ for at most a backoff that grows from
// minBackoff to maxBackoff (and never past the engine's next Tick): a
// completion ends the wait at once, and records written into the rings,
// which signal nothing, are found within the backoff. With nothing in
// flight it parks in the CQ without a timeout until a completion comes
// (a cell, a control message) or a caller posts a range. With only
// receives in flight it polls for recvLinger after the last progress and
// then parks too, waking at least every recvPark: what a receive
// waits for wakes it, cells by their completions and its final by the
// bell the peer rings once the final has landed (msgBell). A
// communicator keeps receives posted on its control connections for
// good, and they would otherwise never let it rest. spinFor matches the
// shm provider's doze: while a goroutine polls a QP's CQ, the QP's engine
// leaves the peer's requests to it and looks only that often.
const (
	spinFor    = 200 * time.Microsecond
	minBackoff = 50 * time.Microsecond
	maxBackoff = 2 * time.Millisecond
	byeTimeout = 250 * time.Millisecond
	recvLinger = 5 * time.Millisecond
	// keepaliveIdle is how long a path may show nothing (no completion,
	// no token) while ranges are in flight before it is probed. A
	// receiver whose peer vanished could otherwise wait forever: providers
	// fail only what is posted, and it may post nothing.
	keepaliveIdle = time.Second
)

// recvPark bounds how long a connection with only receives in flight
// rests before it looks at its paths and probes one (a variable for the
// tests). A communicator's control connections rest so for as long as it
// is idle; a rank that vanished is its lease's to report, within about a
// lease TTL, and this probe only backs that up.
var recvPark = 5 * keepaliveIdle

// now reads the clock.
func (c *Conn) now() int64 { return c.cfg.Clock() }

// run is the connection's progress goroutine.
func (c *Conn) run() {
	defer close(c.exited)
	last := time.Now()
	backoff := minBackoff
	for {
		landed := c.landed.Swap(false) // the step below looks at the rings
		c.cork()
		c.mu.Lock()
		if c.err != nil {
			c.mu.Unlock()
			c.uncork()
			return
		}
		c.holdsDue = c.holdsDue || landed
		work := c.stepLocked()
		work = work || c.kicked
		c.kicked = false
		active := c.ops.sends > 0 || c.recordsOutLocked() || c.ctlOutLocked()
		recvs := c.ops.recvs > 0
		deadline := c.deadline
		posts := c.posts
		done := c.takeCompletedLocked()
		c.mu.Unlock()
		c.report(done)
		c.awaitAnswer(done)
		c.uncork()

		if work {
			last, backoff = time.Now(), minBackoff
			continue
		}
		if !active && (!recvs || time.Since(last) >= recvLinger) {
			d := time.Duration(0)
			if recvs {
				d = recvPark
				if deadline != 0 {
					d = max(min(d, time.Duration(deadline-c.now())), time.Microsecond)
				}
			}
			c.wait(d, true, posts)
			last, backoff = time.Now(), minBackoff
			if !recvs {
				c.mu.Lock()
				c.touchPathsLocked(c.now()) // idle paths said nothing for a reason
				c.mu.Unlock()
			}
			continue
		}

		if c.spin && time.Since(last) < spinFor {
			runtime.Gosched()
			continue
		}
		d := backoff
		if deadline != 0 {
			d = min(d, time.Duration(deadline-c.now()))
		}
		if d > 0 {
			c.wait(d, false, posts)
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// stepLocked polls the CQ and the rings, applies finished resets, lets
// time pass and acts on what the engine produced. It reports whether
// anything happened.
func (c *Conn) stepLocked() bool {
	now := c.now()
	// Resets finished by now are applied after a last poll of everything
	// their old incarnation completed: the workers queued them after their
	// QPs had flushed into the CQ.
	nres, nquiet := len(c.resetDone), len(c.quiets)
	work := false
	if len(c.early) > 0 {
		c.completionsLocked(now, c.early)
		c.early, work = nil, true
	}
	for range 1024 {
		n := c.cq.Poll(c.wcs)
		if n == 0 {
			break
		}
		work = true
		c.completionsLocked(now, c.wcs[:n])
		if n < len(c.wcs) && nres+nquiet == 0 {
			break
		}
	}
	if c.pollRingsLocked(now) {
		work = true
	}
	if nquiet > 0 {
		c.applyQuietsLocked(now, nquiet)
		work = true
	}
	if nres > 0 {
		c.applyResetsLocked(now, nres)
		work = true
	}
	if now >= c.nextKeepalive && c.ops.live() > 0 && c.err == nil {
		c.nextKeepalive = now + int64(keepaliveIdle)/4
		c.keepaliveLocked(now)
		c.holdsDue = true
	}
	if c.err == nil {
		c.watchRecordsLocked(now)
	}
	if c.deadline != 0 && now >= c.deadline && c.err == nil {
		c.eng.Tick(now)
		c.fed = true
	}
	c.drainLocked()
	return work
}

// completionsLocked feeds a batch of work completions.
func (c *Conn) completionsLocked(now int64, wcs []verbs.WC) {
	for i := range wcs {
		wc := &wcs[i]
		q := c.pathOf(wc.QPN)
		if q < 0 {
			if l := c.laneOf(wc.QPN); l != nil {
				c.ctlCompletionLocked(now, l, wc)
			}
			continue
		}
		c.paths[q].lastSeen = now
		if wc.ID&wrKindMask == wrKindProbe {
			c.probeDoneLocked(now, q, wc)
			continue
		}
		if wc.Status == verbs.StatusSuccess && wc.Opcode != verbs.OpRecvWriteImm {
			if wc.ID&(wrKindMask|wrWatched) == wrKindRecord|wrWatched {
				c.paths[q].records.drop(1) // RC completes a QP's requests in order
				if wc.ID&wrBell != 0 {
					c.ringBellLocked()
				}
			}
			continue // a send done: the tokens say more
		}
		_ = c.eng.Completion(now, q, *wc)
		c.fed = true
		c.tailsDue = c.tailsDue || wc.Opcode == verbs.OpRecvWriteImm
		c.counters.completions++
	}
}

func (c *Conn) pathOf(qpn uint32) int {
	for i, n := range c.qpns {
		if n == qpn {
			return i
		}
	}
	return -1
}

// wait blocks in the CQ for at most d (no limit if 0), until a completion
// comes, a caller kicks or the connection ends; park says the connection
// rests meanwhile, which it decided when posts ranges had been posted: a
// range posted since ends the wait before it begins, since Send and Recv
// kick only a parked connection. Completions it receives are handled in
// a round of progress before it returns. Waiting in the CQ rather than
// sleeping matters: on some providers (shm) a goroutine polling its CQ is
// what executes the peer's requests that need this end.
func (c *Conn) wait(d time.Duration, park bool, posts uint64) {
	c.mu.Lock()
	if c.kicked || c.err != nil || (park && c.posts != posts) {
		c.kicked = false
		c.mu.Unlock()
		return
	}
	ctx := c.waiter.arm(d)
	c.inWait.Store(true)
	if c.landed.Load() {
		// A record landed since the rings were last looked at; one
		// landing after inWait was set ends the wait just armed.
		c.inWait.Store(false)
		c.waiter.disarm()
		c.mu.Unlock()
		return
	}
	if park {
		c.parked = true
		c.counters.parks++
	}
	c.waiting = true
	c.mu.Unlock()
	n, _ := c.cq.Wait(ctx, c.waitWCs)
	c.inWait.Store(false)
	c.waiter.disarm()
	c.cork()
	c.mu.Lock()
	c.waiting, c.parked = false, false
	if n > 0 && c.err == nil {
		// A whole round, rings included: an arrival's tail is in its
		// ring, and the range it completes is then reported, and
		// answered, before the cork lets the arrival's token go.
		c.completionsLocked(c.now(), c.waitWCs[:n])
		c.stepLocked()
	}
	done := c.takeCompletedLocked()
	c.mu.Unlock()
	c.report(done)
	c.awaitAnswer(done)
	c.uncork()
}

// cork holds the writes of a round of progress (tokens, grants, the
// cells that follow, what OnComplete posts) so that each path writes them
// together at uncork: on tcp one system call instead of one per record.
func (c *Conn) cork() {
	c.inRound.Store(true)
	for _, k := range c.corkers {
		k.Cork()
	}
}

func (c *Conn) uncork() {
	for _, k := range c.corkers {
		k.Uncork()
	}
	c.inRound.Store(false)
}

// corkPost corks the paths for a caller's post, as a round of progress
// does, so that a range's cells and records leave together, written by
// the caller as the post returns rather than by a provider goroutine
// woken for them, and reports whether it did: inside a round (a post
// from OnComplete) the round's cork holds them already.
func (c *Conn) corkPost() bool {
	if len(c.corkers) == 0 || c.inRound.Load() {
		return false
	}
	for _, k := range c.corkers {
		k.Cork()
	}
	return true
}

func (c *Conn) uncorkPost(corked bool) {
	if corked {
		for _, k := range c.corkers {
			k.Uncork()
		}
	}
}

func (c *Conn) takeCompletedLocked() bool {
	done := c.completed
	c.completed = false
	return done
}

// report calls OnComplete if done says Ops completed. It is called
// without c.mu, since OnComplete posts ranges.
func (c *Conn) report(done bool) {
	if done && c.cfg.OnComplete != nil {
		c.cfg.OnComplete()
	}
}

// onLanded is called by a provider whose regions are write watchers (tcp)
// when a peer's WRITE lands in the rings: a token, grant or final, which
// completes nothing. The progress goroutine then looks at once instead of
// at the end of its back-off. It runs on the provider's receiving
// goroutine, so it takes no lock of the connection: a connection
// blocked writing to its peer while its own receiver waited for that
// lock could stop both peers.
//
// Ending a wait costs its context (see waiter), so only a wait in progress
// is ended: landed and inWait are set in opposite orders by the two
// sides, so either this sees the wait or the wait sees the landing.
func (c *Conn) onLanded() {
	c.landings.Add(1)
	c.landed.Store(true)
	if c.inWait.Load() {
		c.waiter.end(context.Canceled)
	}
}

// postedLocked is what Send and Recv do after posting a range: wake the
// progress goroutine if it must see the range at once. A parked one waits
// with no bound and would not time the range's cells; a spinning provider
// (shm) finds what the range brings back sooner if the spin starts again;
// OnComplete reports from the progress goroutine what posting completed.
// A goroutine waiting with a back-off on another provider is woken by
// what the range brings back, and a kick would only cost it a wake-up.
func (c *Conn) postedLocked() {
	c.posts++
	if c.unawaited {
		c.unawaited = false
		c.answers = min(c.answers+1, answersMax)
	}
	if c.parked || c.spin || c.completed {
		c.kickLocked()
	}
}

// awaitAnswer lets the goroutines that the round's report woke run
// before the round's cork lets its tokens and grants go, so that a caller
// answering at once (the next message of a ping-pong or of a two-rank
// collective) finds the round's records corked and its cells leave in the
// same write as them: one write each way per message instead of two. It only
// yields the processor once, to goroutines runnable already; a woken
// caller that computes before it posts delays the records until it
// posts, blocks or is preempted, so where answers do not come (the next message
// goes to another peer, as in recursive doubling beyond two ranks) the
// yield stops: a round whose yield saw no post lowers the score by two,
// one that did raises it by one, and so does the first post after a
// report that did not yield (see postedLocked), so that a connection
// whose answers come again yields again.
func (c *Conn) awaitAnswer(done bool) {
	if !done || len(c.corkers) == 0 {
		return
	}
	c.mu.Lock()
	if c.answers < 0 {
		c.unawaited = true
		c.mu.Unlock()
		return
	}
	posts := c.posts
	c.mu.Unlock()
	// The paths stay corked, but a post from now on uncorks them as a
	// caller's post outside a round does: the answer and the round's
	// records leave from the caller's goroutine before its post returns,
	// so that an operation that returned has handed its messages to the
	// provider, whatever the process does next (exit, or die).
	c.inRound.Store(false)
	runtime.Gosched()
	c.mu.Lock()
	if c.posts != posts {
		c.answers = min(c.answers+1, answersMax)
	} else {
		c.answers = max(c.answers-answersMiss, answersMin)
	}
	c.mu.Unlock()
}

// Scores of Conn.answers (see awaitAnswer): a round yields for an answer
// while the score is at least zero.
const (
	answersMax  = 3
	answersMin  = -4
	answersMiss = 2
)

// kickLocked makes the progress goroutine look again at once.
func (c *Conn) kickLocked() {
	if c.waiting {
		c.waiting = false
		c.waiter.end(context.Canceled)
		return
	}
	c.kicked = true
}
