package timeline

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rdmacell/rdmacell/flight"
	"github.com/stretchr/testify/require"
)

// traceFile is the trace-event file as a viewer reads it.
type traceFile struct {
	TraceEvents     []traceEvent   `json:"traceEvents"`
	DisplayTimeUnit string         `json:"displayTimeUnit"`
	OtherData       map[string]any `json:"otherData"`
}

type traceEvent struct {
	Name string          `json:"name"`
	Cat  string          `json:"cat"`
	Ph   string          `json:"ph"`
	S    string          `json:"s"`
	Ts   *float64        `json:"ts"`
	Dur  *float64        `json:"dur"`
	Pid  int             `json:"pid"`
	Tid  int             `json:"tid"`
	Args json.RawMessage `json:"args"`
}

func merge(t *testing.T, dumps []*flight.Dump) (traceFile, []byte) {
	var buf bytes.Buffer
	require.NoError(t, Merge(&buf, dumps))
	var tf traceFile
	require.NoError(t, json.Unmarshal(buf.Bytes(), &tf), buf.String())
	return tf, buf.Bytes()
}

func TestMergeHasAProcessPerRankAndASpanPerOperation(t *testing.T) {
	dumps := threeRanks(t)
	tf, _ := merge(t, dumps)
	require.Equal(t, "ms", tf.DisplayTimeUnit)
	require.Equal(t, "job-7", tf.OtherData["job"])

	procs := map[int]string{}             // pid: name
	threads := map[[2]int]string{}        // pid, tid: name
	spans := map[[2]int][]traceEvent{}    // pid, tid: the X events on that track
	instants := map[string][]traceEvent{} // name: events
	for _, e := range tf.TraceEvents {
		require.NotZero(t, e.Pid, "pid 0 is the kernel's to the viewers: %+v", e)
		switch e.Ph {
		case "M":
			var a struct{ Name string }
			require.NoError(t, json.Unmarshal(e.Args, &a))
			switch e.Name {
			case "process_name":
				procs[e.Pid] = a.Name
			case "thread_name":
				require.NotZero(t, e.Tid)
				threads[[2]int{e.Pid, e.Tid}] = a.Name
			}
		case "X":
			require.NotNil(t, e.Ts)
			require.NotNil(t, e.Dur)
			require.GreaterOrEqual(t, *e.Ts, 0.0)
			require.GreaterOrEqual(t, *e.Dur, 0.0)
			spans[[2]int{e.Pid, e.Tid}] = append(spans[[2]int{e.Pid, e.Tid}], e)
		case "i":
			instants[e.Name] = append(instants[e.Name], e)
		default:
			t.Fatalf("unexpected event %+v", e)
		}
	}
	require.Equal(t, map[int]string{
		1: "rank 0 (node-a, pid 4000)", 2: "rank 1 (node-a, pid 4001)", 3: "rank 2 (node-b, pid 4002)",
	}, procs)

	// The tracks of each rank: its operations (rank 0's overlap, on two
	// communicators, so they take two lanes, and so do its waits on peer 1),
	// then the peers it waited on.
	tracks := func(pid int) []string {
		var ns []string
		for tid := 1; threads[[2]int{pid, tid}] != ""; tid++ {
			ns = append(ns, threads[[2]int{pid, tid}])
		}
		return ns
	}
	require.Equal(t, []string{"operations", "operations (2)", "peer 1", "peer 1 (2)", "peer 2"}, tracks(1))
	require.Equal(t, []string{"operations", "peer 0", "peer 2"}, tracks(2))
	require.Equal(t, []string{"operations", "peer 0", "peer 1"}, tracks(3))
	require.Len(t, threads, 11)

	for _, d := range dumps {
		pid := d.Rank + 1
		// Every operation is one span on an operations track, and one on
		// the track of each peer it waited on.
		var got []string
		for tid := 1; threads[[2]int{pid, tid}] != ""; tid++ {
			name := threads[[2]int{pid, tid}]
			var prevEnd float64
			for _, e := range spans[[2]int{pid, tid}] {
				// A track shows one span at a time: they do not overlap.
				require.GreaterOrEqual(t, *e.Ts, prevEnd, "%s of rank %d: %s", name, d.Rank, e.Name)
				prevEnd = *e.Ts + *e.Dur
				if strings.HasPrefix(name, "operations") {
					require.Equal(t, "op", e.Cat)
					got = append(got, e.Name)
					continue
				}
				require.Equal(t, "wait", e.Cat)
				peer, _, _ := strings.Cut(name, " (") // a lane of the peer's
				got = append(got, e.Name+" on "+peer)
			}
		}
		var want []string
		for _, o := range d.Ops {
			want = append(want, label(&o))
			for _, p := range o.Peers() {
				want = append(want, fmt.Sprintf("%s on peer %d", label(&o), p))
			}
		}
		slices.Sort(got)
		slices.Sort(want)
		require.Equal(t, want, got, "rank %d", d.Rank)
	}

	// The details of an operation, a running one spanning to its dump.
	byName := func(pid int, name string) (traceEvent, map[string]any) {
		for k, es := range spans {
			for _, e := range es {
				if k[0] == pid && e.Name == name && e.Cat == "op" {
					var a map[string]any
					require.NoError(t, json.Unmarshal(e.Args, &a))
					return e, a
				}
			}
		}
		t.Fatalf("no span %q on rank %d", name, pid-1)
		return traceEvent{}, nil
	}
	e, a := byName(1, "AllReduce #3 (running)")
	require.InDelta(t, 20000, *e.Ts, 1e-6)
	require.InDelta(t, 80000, *e.Dur, 1e-6) // to the dump at 100 ms
	require.Equal(t, "running", a["state"])
	require.Equal(t, map[string]any{"step": 2.0, "peer": 2.0, "dir": "recv"}, a["wait"])

	e, a = byName(2, "AllReduce #1")
	require.InDelta(t, 500, *e.Ts, 1e-6)
	require.InDelta(t, 9500, *e.Dur, 1e-6)
	require.Equal(t, map[string]any{"id": 1.0, "comm": 1.0, "seq": 1.0, "algorithm": "ring", "dtype": "float32",
		"count": float64(1 << 20), "bytes": float64(4 << 20), "state": "done",
		"wait":    map[string]any{"step": 4.0, "peer": 2.0, "dir": "recv"},
		"paths":   []any{path(0, 1<<20), path(1, 1<<20), path(3, 512<<10)},
		"reposts": 3.0, "give_ups": 1.0, "resets": 1.0}, a)

	_, a = byName(3, "AllReduce #3 (failed)")
	require.Equal(t, "failed", a["state"])
	require.Equal(t, "peer 0: path 1 reset failed", a["err"])

	// The peers' spans carry the traffic and say which was the last wait.
	var peerArgs []string
	for _, e := range spans[[2]int{2, 2}] { // rank 1, peer 0
		peerArgs = append(peerArgs, e.Name+" "+string(e.Args))
	}
	require.Equal(t, []string{
		`AllReduce #1 {"peer":0,"paths":[{"path":0,"cells":256,"bytes":1048576},{"path":1,"cells":256,"bytes":1048576},{"path":3,"cells":128,"bytes":524288}]}`,
		`Broadcast #2 {"peer":0,"last_wait":true}`,
		`AllReduce #3 (running) {"peer":0}`,
	}, peerArgs)

	// A path reset is an instant at the end of the operation it happened
	// in, on its track; a dump is one per rank.
	var resets []string
	for _, e := range instants["path reset"] {
		require.Equal(t, "t", e.S)
		resets = append(resets, fmt.Sprintf("rank %d at %.0f µs: %s", e.Pid-1, *e.Ts, e.Args))
	}
	require.Equal(t, []string{
		`rank 1 at 10000 µs: {"give_ups":1,"resets":1,"reposts":3}`,
		`rank 2 at 30000 µs: {"give_ups":2,"resets":0,"reposts":6}`,
	}, resets)
	require.Len(t, instants["dump"], 3)
	require.Contains(t, string(instants["dump"][2].Args), "path 1 reset failed")
}

func path(p int, bytes uint64) map[string]any {
	return map[string]any{"path": float64(p), "cells": float64(bytes / 4096), "bytes": float64(bytes)}
}

func TestMergeIsDeterministic(t *testing.T) {
	dumps := threeRanks(t)
	_, want := merge(t, dumps)
	slices.Reverse(dumps)
	_, got := merge(t, dumps)
	require.Equal(t, string(want), string(got))
	require.Equal(t, 2, dumps[0].Rank, "Merge changes not its argument")
}

func TestMergeRefusesDumpsThatAreNotOneJob(t *testing.T) {
	dumps := threeRanks(t)
	dumps[1].Job = "job-8"
	require.ErrorContains(t, Merge(new(bytes.Buffer), dumps), `rank 1 is of job "job-8", rank 0 of job "job-7"`)

	dumps = threeRanks(t)
	dumps[2].Rank = 1
	require.ErrorContains(t, Merge(new(bytes.Buffer), dumps), "two dumps of rank 1")

	dumps = threeRanks(t)
	dumps[1].Ops[1].Start = time.Time{}
	require.ErrorContains(t, Merge(new(bytes.Buffer), dumps), "rank 1: operation 2 has no start time")

	dumps = threeRanks(t)
	dumps[0].Rank = -1
	require.ErrorContains(t, Merge(new(bytes.Buffer), dumps), "a dump of rank -1")
	require.ErrorContains(t, RenderSVG(new(bytes.Buffer), []*flight.Dump{nil}), "a nil dump")
	require.ErrorContains(t, Merge(new(bytes.Buffer), nil), "no dumps")
}

func TestOverlappingOperationsTakeLanes(t *testing.T) {
	d := mkDump(t, "j", 0, 50, "close",
		opSpec{comm: 1, seq: 1, name: "AllReduce", start: 0, end: 10, state: flight.Done},
		opSpec{comm: 2, seq: 1, name: "AllReduce", start: 2, end: 4, state: flight.Done},
		opSpec{comm: 3, seq: 1, name: "AllReduce", start: 3, end: 12, state: flight.Done},
		opSpec{comm: 2, seq: 2, name: "AllReduce", start: 4, end: 6, state: flight.Done},
		opSpec{comm: 1, seq: 2, name: "AllReduce", start: 10, end: 11, state: flight.Done})
	j, err := newJob([]*flight.Dump{d})
	require.NoError(t, err)
	r := j.ranks[0]
	require.Equal(t, 3, r.lanes)
	var got []string
	for _, s := range r.ops {
		got = append(got, fmt.Sprintf("%d/%d:%d", s.op.Comm, s.op.Seq, s.lane))
	}
	require.Equal(t, []string{"1/1:0", "2/1:1", "3/1:2", "2/2:1", "1/2:0"}, got)
}

func TestMergeDumpsWithoutOperations(t *testing.T) {
	dumps := []*flight.Dump{mkDump(t, "j", 0, 5, "requested"), mkDump(t, "j", 1, 7, "requested")}
	tf, _ := merge(t, dumps)
	var got []string
	for _, e := range tf.TraceEvents {
		if e.Ph != "M" {
			got = append(got, fmt.Sprintf("%s %s rank %d at %.0f", e.Ph, e.Name, e.Pid-1, *e.Ts))
		}
	}
	require.Equal(t, []string{"i dump rank 0 at 0", "i dump rank 1 at 2000"}, got)
	require.Equal(t, "2026-01-02T03:04:05.005Z", tf.OtherData["start"])
	els := parseSVG(t, render(t, dumps))
	require.Empty(t, withClass(els, "op"))
	require.Contains(t, texts(els), "Job j: 2 ranks, 0 operations")
}
