package comm

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rdmacell/rdmacell/flight"
)

// ErrTimeout is what the watchdog fails a wait with, wrapped in a
// *TimeoutError.
var ErrTimeout = errors.New("comm: watchdog timeout")

// TimeoutError reports a wait the watchdog ended: a collective that had
// not finished, or a message that had not moved, Options.Timeout after
// it began.
type TimeoutError struct {
	Rank int // the rank whose watchdog fired
	// What describes the wait: the operation, its step and the peer it
	// waited for.
	What            string
	Waited, Timeout time.Duration
	// Cause is what the latest stall report found, when there was one:
	// e.g. "rank 2 has not entered AllReduce #4; ranks 0-1 have waited
	// in it for 1m1s".
	Cause string
}

// Error says what waited, how long, and the stall report's finding.
func (e *TimeoutError) Error() string {
	s := fmt.Sprintf("comm: rank %d: watchdog: %s has waited %s, past the %s bound (Options.Timeout, %s)",
		e.Rank, e.What, e.Waited.Round(time.Millisecond), e.Timeout, EnvTimeout)
	if e.Cause != "" {
		s += "; stall report: " + e.Cause
	}
	return s
}

// Unwrap makes errors.Is(err, ErrTimeout) hold.
func (e *TimeoutError) Unwrap() error { return ErrTimeout }

// The watchdog is one goroutine per process that looks, once a tick, at
// the operations the flight recorder holds open and at the point-to-point
// messages in flight:
//
//   - a collective open longer than Options.Timeout fails its
//     communicator's collectives (as a dead member would: the streams of
//     its ordered channel can no longer be trusted), and the rank writes
//     its trace;
//   - a Send or Recv (or Isend, Irecv) in flight longer than that fails
//     alone;
//   - a wait longer than Options.StallReport asks every rank for a stall
//     report (stall.go).
//
// A handle's age is counted in ticks (its epoch), so that posting one
// costs an atomic load, not a clock read. A tick is an eighth of the
// shorter bound, at most watchTickMax: a process whose communicator is idle
// wakes up that often and does nothing else.
type watchdog struct {
	tick time.Duration
	open []flight.Op // scratch for Recorder.Open
	// fired holds the recorder ids of the operations timed out already.
	fired map[uint64]bool
	stall stallState
	// traceKick asks the watchdog goroutine to write the trace, for the
	// reason in traceWhy.
	traceKick chan string
}

// watchTickMax bounds the watchdog's tick.
const watchTickMax = 5 * time.Second

// startWatchdog starts the watchdog goroutine unless it has nothing to do.
func (w *world) startWatchdog() {
	d := min(positive(w.opts.Timeout), positive(w.opts.StallReport))
	w.watch = watchdog{fired: make(map[uint64]bool), traceKick: make(chan string, 1)}
	if w.opts.TraceDir != "" {
		w.rec.OnFailure(func(op flight.Op) {
			w.requestTrace(fmt.Sprintf("failure: %s #%d: %s", op.Name, op.Seq, op.Err))
		})
	}
	if d == maxDuration && w.opts.TraceDir == "" {
		return
	}
	w.watch.tick = min(max(d/8, time.Millisecond), watchTickMax)
	w.wg.Add(1)
	go w.watchLoop()
	if positive(w.opts.StallReport) != maxDuration {
		w.wg.Add(1)
		go w.answerStalls()
	}
	if w.opts.TraceDir != "" {
		w.wg.Add(1)
		go w.answerTraceRequests()
	}
}

const maxDuration = time.Duration(1<<63 - 1)

// positive is d, or the longest duration for NoTimeout.
func positive(d time.Duration) time.Duration {
	if d <= 0 {
		return maxDuration
	}
	return d
}

func (w *world) watchLoop() {
	defer w.wg.Done()
	t := time.NewTicker(w.watch.tick)
	defer t.Stop()
	for {
		select {
		case <-w.life.Done():
			return
		case why := <-w.watch.traceKick:
			w.writeTrace(why)
		case now := <-t.C:
			w.epoch.Add(1)
			w.check(now)
		}
	}
}

// check looks at every wait once.
func (w *world) check(now time.Time) {
	timeout, report := positive(w.opts.Timeout), positive(w.opts.StallReport)
	oldest := w.checkOps(now, timeout)
	stuck, stuckAge := w.checkMessages(timeout, report)
	if report == maxDuration {
		return
	}
	switch {
	case oldest != nil && now.Sub(oldest.Start) > report:
		w.stalled(oldest.ID, describeOp(oldest, w.commRanks(oldest.Comm)), now.Sub(oldest.Start))
	case len(stuck) > 0:
		w.stalled(0, strings.Join(stuck, ", "), stuckAge)
	default:
		w.unstalled()
	}
}

// checkOps times out the operations open longer than timeout, once each,
// and returns the oldest one open, nil if none is.
func (w *world) checkOps(now time.Time, timeout time.Duration) *flight.Op {
	wd := &w.watch
	wd.open = w.rec.Open(wd.open[:0])
	var oldest *flight.Op
	for i := range wd.open {
		op := &wd.open[i]
		if oldest == nil || op.Start.Before(oldest.Start) {
			oldest = op
		}
		if age := now.Sub(op.Start); age > timeout && !wd.fired[op.ID] {
			wd.fired[op.ID] = true
			w.timeOut(op, age)
		}
	}
	for id := range wd.fired {
		if !openID(wd.open, id) {
			delete(wd.fired, id)
		}
	}
	return oldest
}

// checkMessages ends the point-to-point messages in flight longer than
// timeout, and describes (a few of) those in flight longer than report,
// with the age of the oldest.
func (w *world) checkMessages(timeout, report time.Duration) ([]string, time.Duration) {
	tick := w.watch.tick
	epoch := w.epoch.Load()
	var stuck []string
	var oldest time.Duration
	for _, p := range w.peers {
		if p.self {
			continue
		}
		cancelled := false
		p.mu.Lock()
		for h := p.live; h != nil; {
			next := h.nextLive // cancelling may unlink h
			if h.chKind == chanUser {
				age := time.Duration(epoch-h.epoch) * tick
				switch {
				case timeout != maxDuration && epoch-h.epoch > uint64(timeout/tick):
					h.cancelLocked(&TimeoutError{Rank: w.rank, What: h.describe(), Waited: age, Timeout: timeout})
					cancelled = true
				case age > report && len(stuck) < 4:
					stuck = append(stuck, fmt.Sprintf("%s (%s)", h.describe(), age))
					oldest = max(oldest, age)
				}
			}
			h = next
		}
		p.mu.Unlock()
		if cancelled {
			p.wake() // a receive given up may owe the peer a NACK
		}
	}
	// Receives from any rank that no message has taken yet.
	w.wild.mu.Lock()
	for _, q := range w.wild.comms {
		for h := q.head; h != nil; {
			next := h.next
			age := time.Duration(epoch-h.epoch) * tick
			switch {
			case timeout != maxDuration && epoch-h.epoch > uint64(timeout/tick):
				w.wild.unlinkLocked(h)
				h.finishAlone(&TimeoutError{Rank: w.rank, What: h.describe(), Waited: age, Timeout: timeout})
			case age > report && len(stuck) < 4:
				stuck = append(stuck, fmt.Sprintf("%s (%s)", h.describe(), age))
				oldest = max(oldest, age)
			}
			h = next
		}
	}
	w.wild.mu.Unlock()
	return stuck, oldest
}

func openID(ops []flight.Op, id uint64) bool {
	for i := range ops {
		if ops[i].ID == id {
			return true
		}
	}
	return false
}

// timeOut fails the collectives of op's communicator.
func (w *world) timeOut(op *flight.Op, age time.Duration) {
	w.mu.Lock()
	c := w.comms[op.Comm]
	w.mu.Unlock()
	var ranks []int
	if c != nil {
		ranks = c.ranks
	}
	err := &TimeoutError{Rank: w.rank, What: describeOp(op, ranks), Waited: age,
		Timeout: w.opts.Timeout, Cause: w.stallCause()}
	w.log.Error(err.Error())
	if c != nil {
		c.poisonOrdered(err)
	}
	w.requestTrace("watchdog: " + err.What)
}

// commRanks is the job ranks of communicator id, nil if it is gone.
func (w *world) commRanks(id uint64) []int {
	w.mu.Lock()
	defer w.mu.Unlock()
	if c := w.comms[id]; c != nil {
		return c.ranks
	}
	return nil
}

// describeOp says what an open operation waits for, naming job ranks.
func describeOp(op *flight.Op, ranks []int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s #%d", op.Name, op.Seq)
	if op.Algorithm != "" {
		fmt.Fprintf(&b, " (%s)", op.Algorithm)
	}
	if op.Comm != worldID {
		fmt.Fprintf(&b, " of communicator %#x", op.Comm)
	}
	if op.Peer >= 0 {
		peer := op.Peer
		if peer < len(ranks) {
			peer = ranks[peer]
		}
		switch op.Dir {
		case flight.Send:
			fmt.Fprintf(&b, ", sending to rank %d", peer)
		case flight.Recv:
			fmt.Fprintf(&b, ", receiving from rank %d", peer)
		case flight.Memory:
			fmt.Fprintf(&b, ", waiting for rank %d in host memory", peer)
		}
		if op.Step >= 0 {
			fmt.Fprintf(&b, " at step %d", op.Step)
		}
	}
	return b.String()
}

// requestTrace asks the watchdog goroutine to write the trace, if there is
// a trace directory; a request already pending stands for this one.
func (w *world) requestTrace(why string) {
	if w.opts.TraceDir == "" {
		return
	}
	select {
	case w.watch.traceKick <- why:
	default:
	}
}

// answerTraceRequests writes the trace each time a rank or the launcher
// asks for it with a "trace" note (see RequestTrace), until Close.
func (w *world) answerTraceRequests() {
	defer w.wg.Done()
	_, version := w.job.Notes(traceNote)
	for {
		v, err := w.job.WaitNotes(w.life, traceNote, version)
		if err != nil {
			return
		}
		version = v
		w.requestTrace("requested")
	}
}

// writeTrace writes the flight recorder to the trace directory.
func (w *world) writeTrace(why string) {
	if w.opts.TraceDir == "" {
		return
	}
	d := &flight.Dump{Job: w.opts.Job, Rank: w.rank, Host: w.host, PID: w.pid, Reason: why, Time: time.Now(), Ops: w.rec.Ops()}
	if err := d.WriteFile(w.opts.TraceDir); err != nil {
		w.log.Warn("comm: cannot write the trace", "dir", w.opts.TraceDir, "err", err)
	}
}
