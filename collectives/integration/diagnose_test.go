package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/collectives"
	"github.com/rdmacell/rdmacell/comm"
	"github.com/rdmacell/rdmacell/flight"
	"github.com/rdmacell/rdmacell/flight/timeline"
	"github.com/rdmacell/rdmacell/internal/syncbuf"
	"github.com/rdmacell/rdmacell/launcher"
)

// roleStall makes the last rank sleep past the watchdog's bound before
// an AllReduce the others wait in (see TestWatchdogAndStallReport).
const roleStall = "stall"

// stallSleep is how long the last rank sleeps: past stallTimeout, which
// is past stallReport.
const (
	stallReport  = 500 * time.Millisecond
	stallTimeout = 3 * time.Second
	stallSleep   = 5 * time.Second
)

// TestWatchdogAndStallReport: three ranks in real processes over tcp, of
// which rank 2 sleeps before an AllReduce that ranks 0 and 1 call with
// no deadline. cellrun prints a stall report that names rank 2, the
// watchdog ends the waits of ranks 0 and 1 with an error that names it
// too (though rank 1 waits on rank 0 in the ring), and the traces they
// write hold the failed AllReduce.
func TestWatchdogAndStallReport(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var so, se syncbuf.Buffer
	code, err := launcher.Run(ctx, launcher.Config{
		Program:      os.Args[0],
		ProcsPerNode: 3,
		Nodes:        1,
		Transport:    string(comm.TransportTCP),
		Paths:        2,
		Timeout:      stallTimeout,
		StallReport:  stallReport,
		TraceDir:     dir,
		Env:          append(os.Environ(), envRole+"="+roleStall, "RDMACELL_ALGO=ring"),
	}, &so, &se)
	out := "stdout:\n" + so.String() + "\nstderr:\n" + se.String()
	require.NoError(t, err, out)
	require.Zero(t, code, out)
	stdout, stderr := so.String(), se.String()
	require.Contains(t, stderr, "cellrun: stall report 1:", out)
	require.Contains(t, stderr, "rank 2 has not entered AllReduce #1; ranks 0, 1 have waited in it for", out)
	for r := range 2 {
		require.Contains(t, stdout, fmt.Sprintf("[%d] ok: watchdog: ", r), out)
		require.Regexp(t, fmt.Sprintf(`\[%d\] ok: watchdog: .*stall report: rank 2 has not entered AllReduce #1`, r), stdout, out)
		d, err := flight.ReadFile(filepath.Join(dir, flight.FileName(r)))
		require.NoError(t, err, out)
		var failed bool
		for _, op := range d.Ops {
			failed = failed || op.Name == "AllReduce" && op.Seq == 1 && op.State == flight.Failed
		}
		require.True(t, failed, "rank %d's trace has the failed AllReduce: %+v", r, d.Ops)
	}
	require.Contains(t, stdout, "[2] ok: late", out)
	dumps, err := timeline.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, dumps, 3, "every rank wrote its trace when it closed")
	checkTimeline(t, dir, dumps)
	st, err := os.Stat(filepath.Join(dir, timeline.PictureFile))
	require.NoError(t, err, "cellrun drew the timeline")
	require.NotZero(t, st.Size())
}

// checkTimeline checks that the job's merged trace is trace-event JSON
// with a process per rank and a span named for each recorded operation.
func checkTimeline(t *testing.T, dir string, dumps []*flight.Dump) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, timeline.TraceFile))
	require.NoError(t, err, "cellrun merged the traces")
	var tf struct {
		TraceEvents []struct {
			Name string `json:"name"`
			Ph   string `json:"ph"`
			Pid  int    `json:"pid"`
		} `json:"traceEvents"`
	}
	require.NoError(t, json.Unmarshal(b, &tf))
	procs := map[int]bool{}
	spans := map[int]map[string]int{} // pid: span name: count
	for _, e := range tf.TraceEvents {
		switch e.Ph {
		case "M":
			if e.Name == "process_name" {
				procs[e.Pid] = true
			}
		case "X":
			if spans[e.Pid] == nil {
				spans[e.Pid] = map[string]int{}
			}
			spans[e.Pid][e.Name]++
		}
	}
	require.Len(t, procs, len(dumps), "one process per rank")
	for _, d := range dumps {
		for _, op := range d.Ops {
			name := fmt.Sprintf("%s #%d", op.Name, op.Seq)
			found := 0
			for n, c := range spans[d.Rank+1] {
				if strings.HasPrefix(n, name) {
					found += c
				}
			}
			require.NotZero(t, found, "rank %d's %s is on the timeline", d.Rank, name)
		}
	}
}

// stallMain is a rank of TestWatchdogAndStallReport.
func stallMain() int {
	ctx := context.Background() // no deadline: the watchdog is the bound
	c, g, code := join(ctx)
	if c == nil {
		return code
	}
	defer g.Close()
	buf := []float32{float32(c.Rank())}
	if err := collectives.AllReduce(ctx, g, buf, buf, collectives.Sum); err != nil {
		fmt.Fprintln(os.Stderr, "first AllReduce:", err)
		return 1
	}
	if c.Rank() == c.Size()-1 {
		time.Sleep(stallSleep)
		// The others have given up: this one fails, within its own bound.
		err := collectives.AllReduce(ctx, g, buf, buf, collectives.Sum)
		if err == nil {
			fmt.Fprintln(os.Stderr, "the late AllReduce succeeded")
			return 1
		}
		fmt.Println("ok: late")
		return 0
	}
	err := collectives.AllReduce(ctx, g, buf, buf, collectives.Sum)
	var te *comm.TimeoutError
	if !errors.As(err, &te) {
		fmt.Fprintln(os.Stderr, "want a watchdog timeout, got:", err)
		return 1
	}
	fmt.Println("ok:", te.Error()[len("comm: rank 0: "):])
	return 0
}

// roleTrace makes every rank run a few collectives and wait for the
// trace SIGUSR1 to cellrun asks for (see TestTraceOnDemand).
const roleTrace = "trace"

// TestTraceOnDemand: SIGUSR1 to cellrun makes every rank write its
// flight recorder while the job runs, and cellrun merges the traces.
func TestTraceOnDemand(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var so, se syncbuf.Buffer
	signals := make(chan os.Signal, 1)
	go func() {
		for ctx.Err() == nil && strings.Count(so.String(), "ready") < 3 {
			time.Sleep(10 * time.Millisecond)
		}
		signals <- syscall.SIGUSR1
	}()
	code, err := launcher.Run(ctx, launcher.Config{
		Program:      os.Args[0],
		ProcsPerNode: 3,
		Nodes:        1,
		Transport:    string(comm.TransportShm),
		TraceDir:     dir,
		Signals:      signals,
		Env:          append(os.Environ(), envRole+"="+roleTrace),
	}, &so, &se)
	out := "stdout:\n" + so.String() + "\nstderr:\n" + se.String()
	require.NoError(t, err, out)
	require.Zero(t, code, out)
	for r := range 3 {
		require.Contains(t, so.String(), fmt.Sprintf("[%d] ok: traced 3 operations", r), out)
	}
	require.Contains(t, se.String(), "cellrun: timeline of the ranks' last operations in "+filepath.Join(dir, timeline.TraceFile), out)
	_, err = os.Stat(filepath.Join(dir, timeline.PictureFile))
	require.NoError(t, err)
}

// traceMain is a rank of TestTraceOnDemand.
func traceMain() int {
	ctx, cancel := context.WithTimeout(context.Background(), rankTimeout)
	defer cancel()
	c, g, code := join(ctx)
	if c == nil {
		return code
	}
	defer g.Close()
	buf := make([]float64, 100)
	for range 3 {
		if err := collectives.AllReduce(ctx, g, buf, buf, collectives.Sum); err != nil {
			fmt.Fprintln(os.Stderr, "AllReduce:", err)
			return 1
		}
	}
	fmt.Println("ready")
	name := filepath.Join(os.Getenv(comm.EnvTraceDir), flight.FileName(c.Rank()))
	for ctx.Err() == nil {
		if d, err := flight.ReadFile(name); err == nil && d.Reason == "requested" {
			fmt.Printf("ok: traced %d operations\n", len(d.Ops))
			return 0
		}
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Fprintln(os.Stderr, "no trace was asked for")
	return 1
}
