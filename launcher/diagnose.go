package launcher

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rdmacell/rdmacell/bootstrap"
	"github.com/rdmacell/rdmacell/flight"
	"github.com/rdmacell/rdmacell/flight/timeline"
)

// The ranks report stalls and write traces themselves (package comm);
// cellrun watches the job's notes for their stall reports and prints one
// summary per round (node 0's cellrun, so that a multi-node job prints
// it once), and asks for traces on SIGUSR1.

// statusGrace is how long cellrun waits for every rank's answer to a
// stall report before it prints what it has.
const statusGrace = 2 * time.Second

// diagnosis follows the notes of the running generation of the job.
type diagnosis struct {
	j     *job
	store bootstrap.Store
	size  int
	ctx   context.Context // ends when cellrun stops following

	mu        sync.Mutex
	jobID     string             // the running generation's job id
	endFollow context.CancelFunc // stops the follower of that generation
	followed  chan struct{}      // closed when that follower returns

	// The follower's own state, fresh for each generation.

	stalls   map[int]flight.StallNote // each rank's latest
	statuses map[int]flight.Status    // each rank's latest answer
	pending  int                      // the round asked for and not printed yet, 0 for none
	printed  int
	deadline <-chan time.Time
}

// startDiagnosis opens the store the ranks meet in and follows their notes
// until ctx ends. It returns nil when there is nothing to follow.
func (j *job) startDiagnosis(ctx context.Context, client bootstrap.ClientConfig) *diagnosis {
	if j.cfg.NodeRank != 0 && j.cfg.TraceDir == "" {
		return nil
	}
	dial, cancel := context.WithTimeout(ctx, etcdStartTimeout)
	defer cancel()
	st, err := bootstrap.NewEtcdStore(dial, client)
	if err != nil {
		j.log.Warn("cellrun: no stall reports: cannot reach etcd", "err", err)
		return nil
	}
	d := &diagnosis{j: j, store: st, size: j.cfg.Nodes * j.cfg.ProcsPerNode, ctx: ctx}
	d.followJob(j.cfg.Job)
	return d
}

// followJob makes d follow the notes of job, the running generation's
// job id, instead of those of the previous one. Only node 0 prints stall
// reports; the others only ask for traces.
func (d *diagnosis) followJob(job string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.jobID = job
	if d.j.cfg.NodeRank != 0 {
		return
	}
	if d.endFollow != nil {
		d.endFollow()
		<-d.followed
	}
	d.stalls, d.statuses = make(map[int]flight.StallNote), make(map[int]flight.Status)
	d.pending, d.printed, d.deadline = 0, 0, nil
	ctx, cancel := context.WithCancel(d.ctx)
	notes, err := bootstrap.WatchNotes(ctx, d.store, "", job)
	if err != nil {
		cancel()
		d.endFollow = nil
		d.j.log.Warn("cellrun: no stall reports", "job", job, "err", err)
		return
	}
	done := make(chan struct{})
	d.endFollow, d.followed = cancel, done
	go func() {
		defer close(done)
		d.follow(ctx, notes)
	}()
}

func (d *diagnosis) close() error { return d.store.Close() }

// requestTraces asks every rank to write its trace.
func (d *diagnosis) requestTraces(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, statusGrace)
	defer cancel()
	d.mu.Lock()
	job := d.jobID
	d.mu.Unlock()
	if err := bootstrap.PutNote(ctx, d.store, "", job, "trace", []byte(time.Now().Format(time.RFC3339Nano))); err != nil {
		d.j.log.Warn("cellrun: cannot ask the ranks for their traces", "err", err)
	}
}

func (d *diagnosis) follow(ctx context.Context, notes <-chan bootstrap.NoteEvent) {
	for {
		select {
		case ev, ok := <-notes:
			if !ok {
				return
			}
			d.apply(ev)
		case <-d.deadline:
			d.print()
		case <-ctx.Done():
			return
		}
	}
}

func (d *diagnosis) apply(ev bootstrap.NoteEvent) {
	switch ev.Name {
	case "stall":
		var n flight.StallNote
		if json.Unmarshal(ev.Value, &n) != nil {
			return
		}
		d.stalls[ev.Rank] = n
		switch {
		case n.Over:
			d.j.console.write(d.j.console.stderr, []byte(fmt.Sprintf("cellrun: stall over: rank %d: %s, after %s\n",
				n.By, n.What, n.Waited.Round(time.Second))))
		case n.Round > d.printed && n.Round > d.pending:
			d.pending = n.Round
			d.deadline = time.After(statusGrace)
		}
	case "status":
		var s flight.Status
		if json.Unmarshal(ev.Value, &s) != nil {
			return
		}
		d.statuses[ev.Rank] = s
	}
	if d.pending > 0 && d.answered() == d.size {
		d.print()
	}
}

// answered counts the ranks that answered the pending round.
func (d *diagnosis) answered() int {
	n := 0
	for _, s := range d.statuses {
		if s.Round >= d.pending {
			n++
		}
	}
	return n
}

// print writes the summary of the pending round.
func (d *diagnosis) print() {
	if d.pending == 0 {
		return
	}
	var sts []flight.Status
	for _, r := range slices.Sorted(maps.Keys(d.statuses)) {
		if s := d.statuses[r]; s.Round >= d.pending {
			sts = append(sts, s)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "cellrun: stall report %d:", d.pending)
	for _, r := range slices.Sorted(maps.Keys(d.stalls)) {
		if n := d.stalls[r]; n.Round == d.pending && !n.Over {
			fmt.Fprintf(&b, " rank %d: %s has waited %s.", n.By, n.What, n.Waited.Round(time.Second))
		}
	}
	b.WriteString("\n")
	for _, line := range flight.Summarize(d.size, sts, time.Now()) {
		b.WriteString("cellrun:   " + line + "\n")
	}
	d.j.console.write(d.j.console.stderr, []byte(b.String()))
	d.printed, d.pending, d.deadline = d.pending, 0, nil
}

// requestTraces asks the ranks for their traces, for SIGUSR1.
func (j *job) requestTraces() {
	j.mu.Lock()
	d := j.diag
	j.mu.Unlock()
	if d == nil || j.cfg.TraceDir == "" {
		j.log.Warn("cellrun: SIGUSR1 asks the ranks for their traces, which needs --trace-dir")
		return
	}
	j.mu.Lock()
	stop, gen := j.stopCtx, j.gen
	j.mu.Unlock()
	go func() {
		d.requestTraces(stop)
		// The ranks write theirs as soon as the note reaches them.
		select {
		case <-time.After(statusGrace):
			j.mergeTraces(gen)
		case <-stop.Done():
		}
	}()
}

// mergeTraces merges the traces of generation gen's ranks into its
// timeline, when there are any.
func (j *job) mergeTraces(gen int) {
	if j.cfg.TraceDir == "" {
		return
	}
	dir := generationDir(j.cfg.TraceDir, gen)
	j.traceMu.Lock()
	defer j.traceMu.Unlock()
	if files, _ := filepath.Glob(filepath.Join(dir, "rank-*.json")); len(files) == 0 {
		return // no rank got as far as writing one
	}
	if err := timeline.MergeDir(dir); err != nil {
		j.log.Warn("cellrun: cannot merge the ranks' traces", "dir", dir, "err", err)
		return
	}
	j.console.write(j.console.stderr, []byte(fmt.Sprintf("cellrun: timeline of the ranks' last operations in %s and %s\n",
		filepath.Join(dir, timeline.TraceFile), filepath.Join(dir, timeline.PictureFile))))
}
