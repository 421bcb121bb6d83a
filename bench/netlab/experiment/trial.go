package experiment

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rdmacell/rdmacell/bench/netlab"
)

// Setup is what every trial runs on: a lab, cellrun, and the traffic
// program (cmd/labprog, or anything that prints its records).
type Setup struct {
	Lab     *netlab.Lab
	Cellrun string
	Program string
	// Paths and CellSize are cellrun's --paths and --cell-size for every
	// trial (zero: cellrun's defaults).
	Paths, CellSize int
	// Env is added to every node's environment.
	Env []string
	// Log, if set, sees every line the nodes print.
	Log func(host int, line string)
}

// Trial is one job: the collective Op over Bytes per rank, Warmup and
// Iters iterations, under Policy, with Fault.
type Trial struct {
	Scenario     string
	Policy       string
	Index        int
	Op           string
	Bytes        int
	Iters        int
	Warmup       int
	RanksPerHost int
	Hosts        int
	Fault        Fault
	Timeout      time.Duration
}

// Iteration is one measured iteration, as rank 0 timed it.
type Iteration struct {
	Start, End time.Time
}

// Duration is how long the iteration took.
func (it Iteration) Duration() time.Duration { return it.End.Sub(it.Start) }

// Result is what a trial gave.
type Result struct {
	Trial Trial
	// Err is why the job failed, nil if every node exited cleanly.
	Err error
	// Iterations are the measured ones, in order.
	Iterations []Iteration
	// BusBW is the summary's bus bandwidth in bytes per second, 0 if the
	// summary never came.
	BusBW float64
	// Wrong is the number of wrong elements the summary reported, -1
	// without a summary.
	Wrong int64
	// FaultLink is the link the fault hit, FaultAt when it first failed
	// (zero if it did not).
	FaultLink netlab.SpineLink
	FaultAt   time.Time
	// Elapsed is the job's wall time, start-up included.
	Elapsed time.Duration
	// QPFailures counts the queue pairs the ranks saw fail (the tcp
	// provider's warnings): each path the engine gives up and resets
	// shows up there, at both ends.
	QPFailures int
	// Demotions, Promotions, GiveUps and Resets are the summary's sums
	// over every rank's paths (see comm.PathStats), -1 without a summary
	// that has them.
	Demotions, Promotions, GiveUps, Resets int64
}

// Completed says the job finished with a summary and no error.
func (r Result) Completed() bool { return r.Err == nil && r.Wrong >= 0 }

// Hung says the job ran past its timeout.
func (r Result) Hung() bool { return errors.Is(r.Err, ErrTimeout) }

// Correct says every element of every result was right.
func (r Result) Correct() bool { return r.Wrong == 0 }

// MedianIteration is the median duration of the measured iterations.
func (r Result) MedianIteration() time.Duration {
	if len(r.Iterations) == 0 {
		return 0
	}
	d := make([]time.Duration, len(r.Iterations))
	for i, it := range r.Iterations {
		d[i] = it.Duration()
	}
	slices.Sort(d)
	return d[len(d)/2]
}

// Stall is how much longer than the median the slowest iteration that
// overlapped a LinkDown's outage took: what the failure cost, at the
// resolution of whole iterations. Every iteration the outage overlapped
// counts, not only the one running when the link went down, since the
// link can fail between two iterations (while the results are checked)
// and cost the next one. Zero without such a failure.
func (r Result) Stall() time.Duration {
	if r.FaultAt.IsZero() || r.Trial.Fault.Kind != LinkDown {
		return 0
	}
	end := r.FaultAt.Add(r.Trial.Fault.For)
	var slowest time.Duration
	for _, it := range r.Iterations {
		if it.End.After(r.FaultAt) && it.Start.Before(end) {
			slowest = max(slowest, it.Duration())
		}
	}
	return max(slowest-r.MedianIteration(), 0)
}

// qpFailedLog is what the tcp provider logs when a queue pair fails.
const qpFailedLog = "tcp: QP failed"

// Run runs one trial on s and collects what rank 0 reported. The fabric
// is restored afterwards, whatever happened.
func (s *Setup) Run(ctx context.Context, t Trial) Result {
	res := Result{Trial: t, Wrong: -1, FaultLink: t.Fault.Link, Demotions: -1, Promotions: -1, GiveUps: -1, Resets: -1}
	begun := make(chan struct{})
	var once sync.Once
	var mu sync.Mutex
	var errs []error
	line := func(host int, text string) {
		if s.Log != nil {
			s.Log(host, text)
		}
		if strings.Contains(text, qpFailedLog) {
			mu.Lock()
			res.QPFailures++
			mu.Unlock()
		}
		rec, ok := parseRecord(text)
		if !ok || rec.Rank != 0 {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if err := res.add(rec, func() { once.Do(func() { close(begun) }) }); err != nil {
			errs = append(errs, err)
		}
	}
	job := &Job{
		Lab: s.Lab, Cellrun: s.Cellrun, Program: s.Program,
		Args: []string{"--ops", t.Op, "--bytes", strconv.Itoa(t.Bytes),
			"--iters", strconv.Itoa(t.Iters), "--warmup", strconv.Itoa(t.Warmup)},
		Hosts: t.Hosts, RanksPerHost: t.RanksPerHost,
		Policy: t.Policy, Paths: s.Paths, CellSize: s.CellSize,
		Env: s.Env, Timeout: t.Timeout, Line: line,
	}
	if err := t.Fault.before(ctx, s.Lab); err != nil {
		res.Err = fmt.Errorf("experiment: set up %v: %w", t.Fault, err)
		return res
	}
	faultCtx, stopFault := context.WithCancel(ctx)
	faultDone := make(chan error, 1)
	go func() {
		link, at, err := t.Fault.during(faultCtx, s.Lab, begun)
		mu.Lock()
		res.FaultLink, res.FaultAt = link, at
		mu.Unlock()
		faultDone <- err
	}()
	start := time.Now()
	jobErr := job.Run(ctx)
	res.Elapsed = time.Since(start)
	stopFault()
	faultErr := <-faultDone
	restoreCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	mu.Lock()
	defer mu.Unlock()
	res.Err = errors.Join(append(errs, jobErr, faultErr, t.Fault.after(restoreCtx, s.Lab, res.FaultLink))...)
	return res
}

// add takes in one of rank 0's records; begin is called at the first
// measured iteration's start.
func (r *Result) add(rec Record, begin func()) error {
	switch rec.Kind {
	case "BEGIN":
		if it, err := rec.Int("iter"); err == nil && it >= 0 {
			begin()
		}
	case "ITER":
		it, err := rec.Int("iter")
		if err != nil || it < 0 {
			return err
		}
		start, err1 := rec.Time("start_ns")
		end, err2 := rec.Time("end_ns")
		if err := errors.Join(err1, err2); err != nil {
			return err
		}
		r.Iterations = append(r.Iterations, Iteration{Start: start, End: end})
	case "SUMMARY":
		bw, err1 := rec.Float("busbw")
		wrong, err2 := rec.Int("wrong")
		if err := errors.Join(err1, err2); err != nil {
			return err
		}
		r.BusBW, r.Wrong = bw, wrong
		for k, v := range map[string]*int64{"demotions": &r.Demotions, "promotions": &r.Promotions, "giveups": &r.GiveUps, "resets": &r.Resets} {
			if _, ok := rec.Fields[k]; !ok {
				continue // a traffic program that does not count paths
			}
			n, err := rec.Int(k)
			if err != nil {
				return err
			}
			*v = n
		}
	}
	return nil
}
