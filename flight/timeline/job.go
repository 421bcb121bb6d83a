package timeline

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/rdmacell/rdmacell/flight"
)

// job is the dumps of one job put on one time axis: the ranks in order,
// each one's operations as spans from the earliest start of the job.
type job struct {
	id    string
	t0    time.Time     // the earliest start of an operation, or dump if none: time 0
	span  time.Duration // from t0 to the last end (or dump time)
	ranks []rank
	ops   int // operations in all
}

// rank is one dump on the job's time axis.
type rank struct {
	d *flight.Dump
	// ops are its operations by start (then ID), each on a lane of the
	// rank's operations track: operations that overlap in time (on two
	// communicators, or non-blocking ones) go on separate lanes, since a
	// track shows one at a time.
	ops   []span
	lanes int
}

// span is an operation from its start to its end, or to the dump's time
// for one still running, relative to the job's t0.
type span struct {
	op         *flight.Op
	start, end time.Duration
	lane       int
}

// newJob checks that dumps are of one job, one per rank, and puts them on
// one time axis. It keeps pointers into dumps' operations, and changes
// nothing in them.
func newJob(dumps []*flight.Dump) (*job, error) {
	if len(dumps) == 0 {
		return nil, fmt.Errorf("timeline: no dumps")
	}
	if slices.Contains(dumps, nil) {
		return nil, fmt.Errorf("timeline: a nil dump")
	}
	ds := slices.Clone(dumps)
	slices.SortFunc(ds, func(a, b *flight.Dump) int { return cmp.Compare(a.Rank, b.Rank) })
	j := &job{id: ds[0].Job, ranks: make([]rank, len(ds))}
	for i, d := range ds {
		if d.Rank < 0 {
			return nil, fmt.Errorf("timeline: a dump of rank %d: ranks count from 0", d.Rank)
		}
		if i > 0 && d.Rank == ds[i-1].Rank {
			return nil, fmt.Errorf("timeline: two dumps of rank %d", d.Rank)
		}
		if d.Job != j.id {
			return nil, fmt.Errorf("timeline: rank %d is of job %q, rank %d of job %q", d.Rank, d.Job, ds[0].Rank, j.id)
		}
		for k := range d.Ops {
			o := &d.Ops[k]
			if o.Start.IsZero() {
				return nil, fmt.Errorf("timeline: rank %d: operation %d has no start time", d.Rank, o.ID)
			}
			if j.t0.IsZero() || o.Start.Before(j.t0) {
				j.t0 = o.Start
			}
		}
	}
	if j.t0.IsZero() { // no operations: the time axis starts at the first dump
		for _, d := range ds {
			if !d.Time.IsZero() && (j.t0.IsZero() || d.Time.Before(j.t0)) {
				j.t0 = d.Time
			}
		}
	}
	for i, d := range ds {
		r := &j.ranks[i]
		r.d = d
		r.ops = make([]span, len(d.Ops))
		for k := range d.Ops {
			o := &d.Ops[k]
			end := o.End
			if o.State == flight.Running {
				end = d.Time
			}
			s := span{op: o, start: o.Start.Sub(j.t0)}
			// A clock stepped back between start and end (the files keep
			// wall clocks only) gives an empty span, not a negative one.
			s.end = max(end.Sub(j.t0), s.start)
			j.span = max(j.span, s.end)
			r.ops[k] = s
		}
		slices.SortFunc(r.ops, func(a, b span) int {
			return cmp.Or(cmp.Compare(a.start, b.start), cmp.Compare(a.op.ID, b.op.ID))
		})
		r.lanes = assignLanes(r.ops)
		j.ops += len(r.ops)
	}
	return j, nil
}

// assignLanes puts each of spans, sorted by start, on the first lane where
// it overlaps no earlier span, and returns how many lanes that takes (at
// least one).
func assignLanes(spans []span) int {
	var ends []time.Duration // the end of the last span on each lane
	for i := range spans {
		s := &spans[i]
		s.lane = len(ends)
		for l, e := range ends {
			if e <= s.start {
				s.lane = l
				break
			}
		}
		if s.lane == len(ends) {
			ends = append(ends, 0)
		}
		ends[s.lane] = s.end
	}
	return max(len(ends), 1)
}

// peers returns the peers r's operations waited on, in increasing order.
func (r *rank) peers() []int {
	var ps []int
	for _, s := range r.ops {
		ps = append(ps, s.op.Peers()...)
	}
	slices.Sort(ps)
	return slices.Compact(ps)
}

// label is the name of an operation's span: its name and sequence number,
// and its state if it did not finish well.
func label(o *flight.Op) string {
	s := fmt.Sprintf("%s #%d", o.Name, o.Seq)
	if o.State != flight.Done {
		s += " (" + o.State.String() + ")"
	}
	return s
}

// resets reports whether the transport reset a path while o ran.
func resets(o *flight.Op) bool { return o.Traffic.GiveUps > 0 || o.Traffic.Resets > 0 }
