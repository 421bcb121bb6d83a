package sim

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"
)

// Job is one point of a sweep: a scheme on a workload at a load, or on
// a collective (Workload and Load then unused).
type Job struct {
	Scheme     string
	Workload   *Workload
	Load       float64
	Collective *Collective
	Seed       uint64
}

// Name says what the job runs: the workload, or the collective with its
// placement.
func (j *Job) Name() string {
	if c := j.Collective; c != nil {
		p := c.Placement
		if p == "" {
			p = "linear"
		}
		return c.Kind + "-" + p
	}
	return j.Workload.Name
}

// Row is a finished job with its result (Coll for a collective).
type Row struct {
	Job
	// Conn is the connection model the job ran on (Config.Conn).
	Conn string
	Result
	Coll CollectiveResult
	Err  error
}

// Sweep runs every job on base (with the job's scheme, workload, load and
// seed), parallel at a time, and returns the rows in job order. Progress,
// if not nil, gets a one-line progress bar redrawn as jobs finish.
func Sweep(base Config, jobs []Job, parallel int, progress io.Writer) []Row {
	rows := make([]Row, len(jobs))
	next := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	done, t0 := 0, time.Now()
	for range max(1, parallel) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				j := jobs[i]
				cfg := base
				cfg.Scheme, cfg.Workload, cfg.Load, cfg.Seed = j.Scheme, j.Workload, j.Load, j.Seed
				if j.Collective != nil {
					cfg.Collective, cfg.Workload = j.Collective, nil
				}
				rows[i] = Row{Job: j}
				s, err := New(cfg)
				if err == nil {
					rows[i].Conn = s.cfg.Conn
				}
				switch {
				case err != nil:
					rows[i].Err = err
				case j.Collective != nil:
					s.Run()
					rows[i].Coll = s.CollectiveResult()
				default:
					s.Run()
					rows[i].Result = s.Result()
				}
				mu.Lock()
				done++
				if progress != nil {
					bar(progress, done, len(jobs), time.Since(t0), j)
				}
				mu.Unlock()
			}
		}()
	}
	for i := range jobs {
		next <- i
	}
	close(next)
	wg.Wait()
	if progress != nil {
		fmt.Fprintln(progress)
	}
	return rows
}

// bar draws "[#####.....] done/total elapsed, ETA, last job".
func bar(w io.Writer, done, total int, el time.Duration, j Job) {
	const width = 30
	n := done * width / total
	b := make([]byte, width)
	for i := range b {
		b[i] = '.'
		if i < n {
			b[i] = '#'
		}
	}
	eta := time.Duration(float64(el) / float64(done) * float64(total-done))
	what := fmt.Sprintf("%s %.0f%%", j.Name(), 100*j.Load)
	if j.Collective != nil {
		what = j.Name()
	}
	fmt.Fprintf(w, "\r[%s] %d/%d %s elapsed, ETA %s (%s %s)   ", b, done, total,
		el.Round(time.Second), eta.Round(time.Second), j.Scheme, what)
}

// CSVHeader names the columns WriteCSV writes.
var CSVHeader = []string{"scheme", "workload", "load", "seed", "flows", "unfinished",
	"avg", "p50", "p95", "p99", "p999", "small_avg", "small_p99", "large_avg", "large_p99",
	"goodput_gbps", "drops", "pauses", "timeouts", "nacks", "reordered", "path_resets", "cells_reposted",
	"max_queue_bytes", "events", "wall_s", "events_per_s", "conn", "error"}

// WriteCSV writes rows as CSV with a header. Its conn column is the
// connection model of the row's run (Config.Conn).
func WriteCSV(w io.Writer, rows []Row) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(CSVHeader); err != nil {
		return fmt.Errorf("csv: %w", err)
	}
	f := func(x float64) string { return strconv.FormatFloat(x, 'f', 4, 64) }
	for _, r := range rows {
		st := r.Stats
		eps := 0.0
		if st.Wall > 0 {
			eps = float64(st.Events) / st.Wall.Seconds()
		}
		errs := ""
		if r.Err != nil {
			errs = r.Err.Error()
		}
		rec := []string{r.Scheme, r.Workload.Name, f(r.Load), strconv.FormatUint(r.Seed, 10),
			strconv.Itoa(r.All.Flows), strconv.Itoa(r.Unfinished),
			f(r.All.Avg), f(r.All.P50), f(r.All.P95), f(r.All.P99), f(r.All.P999),
			f(r.Small.Avg), f(r.Small.P99), f(r.Large.Avg), f(r.Large.P99), f(r.Goodput),
			strconv.FormatUint(st.Drops, 10), strconv.FormatUint(st.Pauses, 10), strconv.FormatUint(st.Timeouts, 10), strconv.FormatUint(st.Nacks, 10),
			strconv.FormatUint(st.Reordered, 10), strconv.FormatUint(st.PathResets, 10), strconv.FormatUint(st.CellsReposted, 10),
			strconv.FormatInt(st.MaxQueue, 10), strconv.FormatUint(st.Events, 10), f(st.Wall.Seconds()), f(eps), r.Conn, errs}
		if err := cw.Write(rec); err != nil {
			return fmt.Errorf("csv: %w", err)
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("csv: %w", err)
	}
	return nil
}

// CollectiveCSVHeader names the columns WriteCollectiveCSV writes.
var CollectiveCSVHeader = []string{"scheme", "collective", "placement", "ranks", "bytes_per_rank", "seed",
	"messages", "unfinished", "time_us", "ideal_us", "slowdown", "msg_avg", "msg_p99",
	"drops", "pauses", "timeouts", "nacks", "path_resets", "cells_reposted", "events", "wall_s", "events_per_s", "error"}

// WriteCollectiveCSV writes the rows of collective jobs as CSV with a
// header.
func WriteCollectiveCSV(w io.Writer, rows []Row) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(CollectiveCSVHeader); err != nil {
		return fmt.Errorf("csv: %w", err)
	}
	f := func(x float64) string { return strconv.FormatFloat(x, 'f', 4, 64) }
	u := func(x uint64) string { return strconv.FormatUint(x, 10) }
	for _, r := range rows {
		if r.Collective == nil {
			continue
		}
		res := r.Coll
		c := &res.Op
		if r.Err != nil {
			c = r.Collective
		}
		st := res.Stats
		eps := 0.0
		if st.Wall > 0 {
			eps = float64(st.Events) / st.Wall.Seconds()
		}
		errs := ""
		if r.Err != nil {
			errs = r.Err.Error()
		}
		rec := []string{r.Scheme, c.Kind, c.Placement, strconv.Itoa(c.Ranks), strconv.FormatInt(c.Bytes, 10), u(r.Seed),
			strconv.Itoa(res.Messages), strconv.Itoa(res.Unfinished),
			f(float64(res.Time) / 1e3), f(float64(res.Ideal) / 1e3), f(res.Slowdown), f(res.MsgSlowdown.Avg), f(res.MsgSlowdown.P99),
			u(st.Drops), u(st.Pauses), u(st.Timeouts), u(st.Nacks), u(st.PathResets), u(st.CellsReposted),
			u(st.Events), f(st.Wall.Seconds()), f(eps), errs}
		if err := cw.Write(rec); err != nil {
			return fmt.Errorf("csv: %w", err)
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("csv: %w", err)
	}
	return nil
}
