package timeline

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/rdmacell/rdmacell/flight"
)

// Merge writes the dumps of one job, one per rank, to w as one Chrome
// trace-event file: a process per rank, with a track of its operations
// and a track per peer it waited on (see the package doc). The output
// depends on the dumps only, not on their order in the slice. It fails if
// the dumps are not of one job, or two are of one rank.
func Merge(w io.Writer, dumps []*flight.Dump) error {
	j, err := newJob(dumps)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	ew := &eventWriter{w: bw, enc: json.NewEncoder(bw)}
	bw.WriteString("{\"traceEvents\":[\n")
	for i := range j.ranks {
		ew.rank(&j.ranks[i], j.t0)
	}
	if ew.err != nil {
		return ew.err
	}
	other, err := json.Marshal(otherData{Job: j.id, Start: j.t0.UTC().Format(time.RFC3339Nano), Ranks: len(j.ranks)})
	if err != nil {
		return err
	}
	fmt.Fprintf(bw, "],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":%s}\n", other)
	return bw.Flush()
}

// otherData is what the trace says of the job as a whole: Start is the
// wall-clock time its timestamps count from.
type otherData struct {
	Job   string `json:"job"`
	Start string `json:"start"`
	Ranks int    `json:"ranks"`
}

// The events of the trace-event format this package writes: metadata
// ("M"), complete ("X", a span with its duration) and instant ("i").
// Times are in microseconds. Trace pids and tids start at 1, since the
// viewers treat 0 as the kernel's idle task.
type (
	metaEvent struct {
		Name string   `json:"name"`
		Ph   string   `json:"ph"`
		Pid  int      `json:"pid"`
		Tid  int      `json:"tid"`
		Args metaArgs `json:"args"`
	}
	metaArgs struct {
		Name      string `json:"name,omitempty"`
		SortIndex *int   `json:"sort_index,omitempty"`
	}
	spanEvent struct {
		Name string  `json:"name"`
		Cat  string  `json:"cat"`
		Ph   string  `json:"ph"`
		Ts   float64 `json:"ts"`
		Dur  float64 `json:"dur"`
		Pid  int     `json:"pid"`
		Tid  int     `json:"tid"`
		Args any     `json:"args"`
	}
	instantEvent struct {
		Name string  `json:"name"`
		Cat  string  `json:"cat"`
		Ph   string  `json:"ph"`
		S    string  `json:"s"` // scope: "t" the track, "p" the process
		Ts   float64 `json:"ts"`
		Pid  int     `json:"pid"`
		Tid  int     `json:"tid"`
		Args any     `json:"args"`
	}
)

// opArgs are the details of an operation's span on its rank's
// operations track.
type opArgs struct {
	ID        uint64     `json:"id"`
	Comm      uint64     `json:"comm"`
	Seq       uint64     `json:"seq"`
	Algorithm string     `json:"algorithm,omitempty"`
	DType     string     `json:"dtype,omitempty"`
	Count     int64      `json:"count"`
	Bytes     int64      `json:"bytes"`
	State     string     `json:"state"`
	Err       string     `json:"err,omitempty"`
	Wait      *waitArgs  `json:"wait,omitempty"`
	Paths     []pathArgs `json:"paths,omitempty"`
	Reposts   uint64     `json:"reposts"`
	GiveUps   uint64     `json:"give_ups"`
	Resets    uint64     `json:"resets"`
}

// waitArgs are an operation's last wait: the one it is in if it still
// runs.
type waitArgs struct {
	Step int    `json:"step"`
	Peer int    `json:"peer"`
	Dir  string `json:"dir,omitempty"`
}

// pathArgs are the cells and bytes the process posted on one path while
// an operation ran.
type pathArgs struct {
	Path  int    `json:"path"`
	Cells uint64 `json:"cells"`
	Bytes uint64 `json:"bytes"`
}

// peerArgs are the details of an operation's span on a peer's track;
// LastWait says the operation's last wait was for this peer.
type peerArgs struct {
	Peer     int        `json:"peer"`
	LastWait bool       `json:"last_wait,omitempty"`
	Paths    []pathArgs `json:"paths,omitempty"`
}

type resetArgs struct {
	GiveUps uint64 `json:"give_ups"`
	Resets  uint64 `json:"resets"`
	Reposts uint64 `json:"reposts"`
}

type dumpArgs struct {
	Reason string `json:"reason"`
	Time   string `json:"time"`
}

// eventWriter writes the events of a trace one a line, keeping the first
// error.
type eventWriter struct {
	w   *bufio.Writer
	enc *json.Encoder // on w
	n   int
	err error
}

func (e *eventWriter) add(ev any) {
	if e.err != nil {
		return
	}
	if e.n > 0 {
		e.w.WriteByte(',')
	}
	e.err = e.enc.Encode(ev)
	e.n++
}

// track is one thread of a rank's process in the trace: a lane of its
// operations (peer -1) or of the operations that waited on one peer.
type track struct {
	name  string
	peer  int
	spans []span
}

// lanes returns the tracks of spans laid on n lanes, named name, "name
// (2)", ...
func lanes(name string, peer int, spans []span, n int) []track {
	ts := make([]track, n)
	for l := range ts {
		ts[l].name, ts[l].peer = name, peer
		if l > 0 {
			ts[l].name = fmt.Sprintf("%s (%d)", name, l+1)
		}
	}
	for _, s := range spans {
		ts[s.lane].spans = append(ts[s.lane].spans, s)
	}
	return ts
}

// tracks returns r's tracks: the lanes of its operations, then those of
// each peer, in increasing order.
func (r *rank) tracks() []track {
	ts := lanes("operations", -1, r.ops, r.lanes)
	for _, p := range r.peers() {
		var ps []span
		for _, s := range r.ops {
			if slices.Contains(s.op.Peers(), p) {
				ps = append(ps, s)
			}
		}
		ts = append(ts, lanes(fmt.Sprintf("peer %d", p), p, ps, assignLanes(ps))...)
	}
	return ts
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// rank writes the events of one rank: its process and tracks, then the
// spans on each track, then the time it was dumped.
func (e *eventWriter) rank(r *rank, t0 time.Time) {
	pid := r.d.Rank + 1
	rankIdx := r.d.Rank
	e.add(metaEvent{Name: "process_name", Ph: "M", Pid: pid,
		Args: metaArgs{Name: fmt.Sprintf("rank %d (%s, pid %d)", r.d.Rank, r.d.Host, r.d.PID)}})
	e.add(metaEvent{Name: "process_sort_index", Ph: "M", Pid: pid, Args: metaArgs{SortIndex: &rankIdx}})
	tracks := r.tracks()
	for i, t := range tracks {
		idx := i
		e.add(metaEvent{Name: "thread_name", Ph: "M", Pid: pid, Tid: i + 1, Args: metaArgs{Name: t.name}})
		e.add(metaEvent{Name: "thread_sort_index", Ph: "M", Pid: pid, Tid: i + 1, Args: metaArgs{SortIndex: &idx}})
	}
	for i, t := range tracks {
		tid := i + 1
		for _, s := range t.spans {
			o := s.op
			ev := spanEvent{Name: label(o), Cat: "op", Ph: "X", Ts: us(s.start), Dur: us(s.end - s.start), Pid: pid, Tid: tid}
			if t.peer >= 0 {
				ev.Cat, ev.Args = "wait", peerArgs{Peer: t.peer, LastWait: o.Peer == t.peer, Paths: paths(&o.Traffic)}
				e.add(ev)
				continue
			}
			ev.Args = newOpArgs(s)
			e.add(ev)
			if resets(o) {
				e.add(instantEvent{Name: "path reset", Cat: "path", Ph: "i", S: "t", Ts: us(s.end), Pid: pid, Tid: tid,
					Args: resetArgs{GiveUps: o.Traffic.GiveUps, Resets: o.Traffic.Resets, Reposts: o.Traffic.Reposts}})
			}
		}
	}
	if !r.d.Time.IsZero() {
		e.add(instantEvent{Name: "dump", Cat: "dump", Ph: "i", S: "p", Ts: us(max(r.d.Time.Sub(t0), 0)), Pid: pid, Tid: 1,
			Args: dumpArgs{Reason: r.d.Reason, Time: r.d.Time.UTC().Format(time.RFC3339Nano)}})
	}
}

// newOpArgs returns the details of s.
func newOpArgs(s span) opArgs {
	o := s.op
	a := opArgs{ID: o.ID, Comm: o.Comm, Seq: o.Seq, Algorithm: o.Algorithm, DType: o.DType, Count: o.Count, Bytes: o.Bytes,
		State: o.State.String(), Err: o.Err, Paths: paths(&o.Traffic),
		Reposts: o.Traffic.Reposts, GiveUps: o.Traffic.GiveUps, Resets: o.Traffic.Resets}
	if o.Peer >= 0 {
		a.Wait = &waitArgs{Step: o.Step, Peer: o.Peer, Dir: o.Dir.String()}
	}
	return a
}

// paths returns the paths t posted anything on.
func paths(t *flight.Traffic) []pathArgs {
	var ps []pathArgs
	for i := range t.Cells {
		if t.Cells[i] != 0 || t.Bytes[i] != 0 {
			ps = append(ps, pathArgs{Path: i, Cells: t.Cells[i], Bytes: t.Bytes[i]})
		}
	}
	return ps
}
