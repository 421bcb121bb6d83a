package comm

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/rdmacell/rdmacell/flight"
)

// A stall report is a round of notes through the bootstrap (see
// bootstrap.Job.Note). A rank whose wait has lasted Options.StallReport
// publishes a "stall" note with the next round number and what it waits
// for; every rank, itself included, answers with a "status" note, a
// flight.Status: its open operations, the newest one of each of its
// communicators, and the state of the paths to the peers it waits on.
// The launcher prints flight.Summarize of the answers; the watchdog puts
// the same finding in the *TimeoutError of a wait it ends. The rank asks
// again each time the wait has doubled, and says when it ends.
const (
	stallNote  = "stall"
	statusNote = "status"
	traceNote  = "trace"
)

// noteTimeout bounds the publication of a note.
const noteTimeout = 2 * time.Second

// stallState is the stall this rank reported, if any.
type stallState struct {
	active bool
	id     uint64 // the recorder id of the operation, 0 for messages
	what   string
	next   time.Duration // the wait's age at which to report again
	round  int           // the last round this rank asked for, 0 for none
	waited time.Duration
}

// stalled notes a wait that has lasted age, and asks for a report when it
// is due.
func (w *world) stalled(id uint64, what string, age time.Duration) {
	st := &w.watch.stall
	if !st.active || st.id != id {
		w.unstalled()
		*st = stallState{active: true, id: id, what: what, next: w.opts.StallReport}
	}
	st.what, st.waited = what, age
	if age < st.next {
		return
	}
	interval := st.next / 2
	for st.next <= age {
		st.next *= 2
	}
	// The ranks that wait in one stall would each ask: one round per
	// interval is enough for the job.
	last, at := w.lastStall()
	if time.Since(at) < max(interval, w.opts.StallReport) {
		return
	}
	st.round = last + 1
	w.note(stallNote, flight.StallNote{Round: st.round, By: w.rank, What: what, Waited: age, At: time.Now()})
}

// unstalled says that the wait this rank reported has ended.
func (w *world) unstalled() {
	st := &w.watch.stall
	if st.active && st.round > 0 {
		w.note(stallNote, flight.StallNote{Round: st.round, By: w.rank, What: st.what, Waited: st.waited, At: time.Now(), Over: true})
	}
	*st = stallState{}
}

// lastStall is the highest round any rank has asked for, and when the
// latest round still open was asked for.
func (w *world) lastStall() (int, time.Time) {
	notes, _ := w.job.Notes(stallNote)
	last := 0
	var at time.Time
	for _, v := range notes {
		var n flight.StallNote
		if json.Unmarshal(v, &n) == nil {
			last = max(last, n.Round)
			if !n.Over && n.At.After(at) {
				at = n.At
			}
		}
	}
	return last, at
}

// note publishes v as this rank's note name.
func (w *world) note(name string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(w.life, noteTimeout)
	defer cancel()
	if err := w.job.Note(ctx, name, b); err != nil && w.life.Err() == nil {
		w.log.Debug("comm: cannot publish a stall note", "note", name, "err", err)
	}
}

// answerStalls answers every round of stall reports with this rank's
// status, until Close.
func (w *world) answerStalls() {
	defer w.wg.Done()
	var version int64
	answered := 0
	for {
		v, err := w.job.WaitNotes(w.life, stallNote, version)
		if err != nil {
			return
		}
		version = v
		round := 0
		notes, _ := w.job.Notes(stallNote)
		for _, b := range notes {
			var n flight.StallNote
			if json.Unmarshal(b, &n) == nil && !n.Over {
				round = max(round, n.Round)
			}
		}
		if round > answered {
			answered = round
			w.note(statusNote, w.status(round))
		}
	}
}

// status is what this rank is doing now.
func (w *world) status(round int) flight.Status {
	st := flight.Status{Rank: w.rank, Host: w.host, PID: w.pid, Time: time.Now(), Round: round}
	open := w.rec.Open(nil)
	w.mu.Lock()
	comms := make([]*Comm, 0, len(w.comms))
	for _, c := range w.comms {
		comms = append(comms, c)
	}
	w.mu.Unlock()
	for _, c := range comms {
		cs := flight.CommStatus{ID: c.id, Ranks: c.ranks}
		if last, ok := w.rec.Last(c.id); ok {
			cs.Last = &last
		}
		for _, op := range open {
			if op.Comm != c.id {
				continue
			}
			cs.Open = append(cs.Open, op)
			if op.Peer >= 0 && op.Peer < len(c.ranks) {
				cs.Paths = append(cs.Paths, w.peers[c.ranks[op.Peer]].paths())
			}
		}
		st.Comms = append(st.Comms, cs)
	}
	for _, p := range w.peers {
		p.mu.Lock()
		for h := p.live; h != nil && len(st.Waits) < 8; h = h.nextLive {
			if h.chKind == chanUser {
				st.Waits = append(st.Waits, h.describe())
			}
		}
		p.mu.Unlock()
	}
	w.wild.mu.Lock()
	for _, q := range w.wild.comms {
		for h := q.head; h != nil && len(st.Waits) < 8; h = h.next {
			st.Waits = append(st.Waits, h.describe())
		}
	}
	w.wild.mu.Unlock()
	return st
}

// paths describes the connections to p, from its Stats.
func (p *peer) paths() flight.PeerPaths {
	st := p.stats()
	pp := flight.PeerPaths{Peer: p.rank, Err: st.Err}
	for _, l := range st.Links {
		ls := flight.LinkStatus{Name: l.Name}
		for _, ps := range l.Paths {
			ls.Paths = append(ls.Paths, flight.PathStatus{Path: ps.Index, State: ps.State, Attempts: ps.Resets,
				Outstanding: ps.OutstandingCells, SRTT: ps.SRTT})
		}
		pp.Links = append(pp.Links, ls)
	}
	return pp
}

// stallCause is the finding of the latest stall report this rank has
// seen the answers of, "" if none.
func (w *world) stallCause() string {
	notes, _ := w.job.Notes(statusNote)
	var sts []flight.Status
	round := 0
	for _, b := range notes {
		var s flight.Status
		if json.Unmarshal(b, &s) == nil {
			if s.Round > round {
				round, sts = s.Round, sts[:0]
			}
			if s.Round == round {
				sts = append(sts, s)
			}
		}
	}
	if len(sts) == 0 {
		return ""
	}
	return strings.Join(flight.Summarize(w.size, sts, time.Now()), "; ")
}

// RequestTrace asks every rank of the job that has a trace directory
// (Options.TraceDir) to write its flight recorder there, this one
// included.
func (c *Comm) RequestTrace(ctx context.Context) error {
	return c.w.job.Note(ctx, traceNote, []byte(time.Now().Format(time.RFC3339Nano)))
}
