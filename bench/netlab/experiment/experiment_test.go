package experiment

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/bench/netlab"
)

// TestMain takes the labs down on SIGINT or SIGTERM and after the tests.
func TestMain(m *testing.M) {
	stop := netlab.HandleSignals()
	code := m.Run()
	stop()
	netlab.DownAll()
	os.Exit(code)
}

// build compiles the module's package pkg into dir and returns the binary.
func build(t *testing.T, dir, pkg string) string {
	t.Helper()
	out := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", out, "github.com/rdmacell/rdmacell/"+pkg)
	msg, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build %s: %s", pkg, msg)
	return out
}

// TestCollectiveSurvivesPathFailure runs AllReduce between two lab hosts
// with cellrun on each (two nodes, etcd served by host 0 over the fabric)
// under the adaptive policy, and takes the spine link that carries the
// most traffic down on the receiving leaf's side in the middle of the
// run: the job completes and every element of every result is right.
func TestCollectiveSurvivesPathFailure(t *testing.T) {
	if err := netlab.Supported(context.Background()); err != nil {
		t.Skipf("the lab needs root and network namespaces (ip netns): %v", err)
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skipf("needs the go command to build cellrun: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bin := t.TempDir()
	cellrun := build(t, bin, "launcher/cellrun")
	program := build(t, bin, "bench/netlab/cmd/labprog")

	l, err := netlab.Up(ctx, netlab.Config{Name: "failover", Hosts: 2, Spines: 4, SpineRate: netlab.Unlimited})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		require.NoError(t, l.Down(ctx))
	})

	const iters = 32
	s := &Setup{Lab: l, Cellrun: cellrun, Program: program, Paths: 4,
		Log: func(host int, line string) { t.Logf("host %d: %s", host, line) }}
	res := s.Run(ctx, Trial{
		Scenario: "test", Policy: "adaptive", Op: "allreduce",
		// Enough iterations to outlast the fault's offset on a fast
		// machine: eight took 0.4 s, and the link went down at 0.45 s.
		Bytes: 32 << 20, Iters: iters, Warmup: 1,
		Fault: Fault{Kind: LinkDown, Busiest: true, Link: netlab.SpineLink{Leaf: 1},
			After: 300 * time.Millisecond, For: 2 * time.Second},
		Timeout: 2 * time.Minute,
	})
	require.NoError(t, res.Err)
	assert.True(t, res.Completed(), "the job completed")
	assert.True(t, res.Correct(), "%d wrong elements", res.Wrong)
	require.Len(t, res.Iterations, iters)
	require.False(t, res.FaultAt.IsZero(), "the link went down")
	assert.True(t, res.FaultAt.After(res.Iterations[0].Start) && res.FaultAt.Before(res.Iterations[iters-1].End),
		"the link went down while the collectives ran")
	t.Logf("%v went down at +%v; median iteration %v, the slowest during the outage %v longer; paths: %d demotions, %d promotions, %d give-ups, %d resets",
		res.FaultLink, res.FaultAt.Sub(res.Iterations[0].Start), res.MedianIteration(), res.Stall(),
		res.Demotions, res.Promotions, res.GiveUps, res.Resets)
	require.GreaterOrEqual(t, res.Demotions, int64(0), "the summary counts the paths' events")
	assert.Positive(t, res.Demotions+res.GiveUps, "the dead link cost some path a demotion or a give-up")
}

// A summary's path counters are read when it has them, and unknown (-1)
// when it does not (an older traffic program).
func TestSummaryPathCounters(t *testing.T) {
	for _, tc := range []struct {
		line string
		want [4]int64
	}{
		{"[0] SUMMARY op=allreduce bytes=8 iters=1 wrong=0 seconds=1 algbw=1 busbw=2 demotions=5 promotions=4 giveups=1 resets=2", [4]int64{5, 4, 1, 2}},
		{"[0] SUMMARY op=allreduce bytes=8 iters=1 wrong=0 seconds=1 algbw=1 busbw=2", [4]int64{-1, -1, -1, -1}},
	} {
		rec, ok := parseRecord(tc.line)
		require.True(t, ok)
		r := Result{Wrong: -1, Demotions: -1, Promotions: -1, GiveUps: -1, Resets: -1}
		require.NoError(t, r.add(rec, func() {}))
		assert.Equal(t, tc.want, [4]int64{r.Demotions, r.Promotions, r.GiveUps, r.Resets}, tc.line)
		assert.Equal(t, 2.0, r.BusBW)
	}
	rec, _ := parseRecord("[0] SUMMARY op=allreduce wrong=0 busbw=2 demotions=x")
	r := Result{}
	require.Error(t, r.add(rec, func() {}), "a malformed counter is an error")
}

// TestStall: the stall is the slowest iteration the outage overlapped,
// over the median, also when the link failed between two iterations.
func TestStall(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	// Iterations of 100ms with 10ms gaps; the fourth took 600ms.
	its := []Iteration{{ms(0), ms(100)}, {ms(110), ms(210)}, {ms(220), ms(320)}, {ms(330), ms(930)}, {ms(940), ms(1040)}}
	down := Fault{Kind: LinkDown, For: 200 * time.Millisecond}
	for _, tt := range []struct {
		name  string
		fault Fault
		at    time.Time
		want  time.Duration
	}{
		{"during the slow iteration", down, ms(400), 500 * time.Millisecond},
		{"in the gap before it", down, ms(325), 500 * time.Millisecond},
		{"over before it", down, ms(20), 0},
		{"no failure", down, time.Time{}, 0},
		{"not a link down", Fault{Kind: Flap}, ms(400), 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := Result{Trial: Trial{Fault: tt.fault}, Iterations: its, FaultAt: tt.at}
			assert.Equal(t, tt.want, r.Stall())
		})
	}
}
