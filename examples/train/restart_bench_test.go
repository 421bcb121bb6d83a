package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/comm"
	"github.com/rdmacell/rdmacell/internal/syncbuf"
	"github.com/rdmacell/rdmacell/launcher"
)

// stamped is an output that notes when a line starting with marker first
// arrives (the launcher writes whole lines).
type stamped struct {
	marker []byte
	mu     sync.Mutex
	at     time.Time
	seen   chan struct{}
}

func newStamped(marker string) *stamped {
	return &stamped{marker: []byte(marker), seen: make(chan struct{})}
}

func (s *stamped) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.at.IsZero() && bytes.HasPrefix(p, s.marker) {
		s.at = time.Now()
		close(s.seen)
	}
	return len(p), nil
}

// BenchmarkRestartOverhead measures what a restart costs the training
// example on one node of 4 ranks ("one-node") and on two launcher nodes
// of 2 ranks each on this machine, talking tcp across ("two-nodes"): from
// the SIGKILL of a rank of generation 0 to the moment generation 1's rank
// 0 prints that training starts, which it does once its first collective
// (the broadcast of the checkpoint's weights) is done, so once every rank
// has entered it. It reports the median, fastest and slowest of b.N
// restarts, and the median of the part before cellrun has seen every
// rank of generation 0 exit and says it restarts (stop-ms; on the killed
// rank's node).
func BenchmarkRestartOverhead(b *testing.B) {
	for _, nodes := range []int{1, 2} {
		name := map[int]string{1: "one-node", 2: "two-nodes"}[nodes]
		b.Run(name, func(b *testing.B) {
			var took, stops []time.Duration
			for range b.N {
				r := restartOnce(b, nodes, 0)
				took, stops = append(took, r.took), append(stops, r.stop)
			}
			slices.Sort(took)
			slices.Sort(stops)
			b.ReportMetric(float64(stops[len(stops)/2].Microseconds())/1e3, "stop-ms")
			b.ReportMetric(float64(took[len(took)/2].Microseconds())/1e3, "median-ms")
			b.ReportMetric(float64(took[0].Microseconds())/1e3, "min-ms")
			b.ReportMetric(float64(took[len(took)-1].Microseconds())/1e3, "max-ms")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// restarted is what restartOnce saw.
type restarted struct {
	took   time.Duration // from the kill to generation 1 training
	stop   time.Duration // from the kill to cellrun announcing the restart
	stdout string        // node 0's
}

// restartOnce runs the example with a checkpoint directory under
// --max-restarts 1 on nodes launcher nodes (4 ranks in all), kills the
// last rank, on the last node, killAfter after training started, and
// waits for the job to succeed.
func restartOnce(tb testing.TB, nodes int, killAfter time.Duration) restarted {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const ranks = 4
	procs := ranks / nodes
	started, again := newStamped("[0] training on"), newStamped("[g1 0] training on")
	announced := newStamped("cellrun: ")
	var addr string
	if nodes > 1 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(tb, err)
		addr = l.Addr().String()
		require.NoError(tb, l.Close())
	}
	token := launcher.NewToken()
	job := fmt.Sprint("restart-", os.Getpid(), "-", time.Now().UnixNano())
	args := append([]string{"-checkpoint-dir", tb.TempDir()}, restartArgs...)
	var wg sync.WaitGroup
	codes := make([]int, nodes)
	errs := make([]error, nodes)
	stdouts, stderrs := make([]syncbuf.Buffer, nodes), make([]syncbuf.Buffer, nodes)
	for node := range nodes {
		cfg := launcher.Config{
			Program: trainBin, Args: args, ProcsPerNode: procs, Nodes: nodes, NodeRank: node,
			MaxRestarts: 1, Env: os.Environ(),
		}
		if nodes > 1 {
			cfg.Job, cfg.JoinToken, cfg.NodeTimeout = job, token, 5*time.Second
			cfg.Env = append(cfg.Env, fmt.Sprintf("%s=node-%d", comm.EnvHost, node))
			if node == 0 {
				cfg.EtcdServe = addr
			} else {
				cfg.EtcdEndpoints = []string{addr}
			}
		}
		stdout, stderr := io.Writer(&stdouts[node]), io.Writer(&stderrs[node])
		if node == 0 {
			stdout = io.MultiWriter(stdout, started, again)
		}
		if node == nodes-1 {
			stderr = io.MultiWriter(stderr, announced)
		}
		wg.Go(func() { codes[node], errs[node] = launcher.Run(ctx, cfg, stdout, stderr) })
	}
	out := func() string {
		var b strings.Builder
		for node := range nodes {
			fmt.Fprintf(&b, "node %d stdout:\n%s\nnode %d stderr:\n%s\n", node, stdouts[node].String(), node, stderrs[node].String())
		}
		return b.String()
	}
	select {
	case <-started.seen:
	case <-ctx.Done():
		require.FailNow(tb, "generation 0 did not start", out())
	}
	time.Sleep(killAfter)
	pid := findRank(tb, ranks-1, 0)
	killed := time.Now()
	require.NoError(tb, syscall.Kill(pid, syscall.SIGKILL))
	select {
	case <-again.seen:
	case <-ctx.Done():
		require.FailNow(tb, "generation 1 did not start", out())
	}
	r := restarted{took: again.at.Sub(killed), stop: announced.at.Sub(killed)}
	wg.Wait()
	for node := range nodes {
		require.NoError(tb, errs[node], out())
		require.Zero(tb, codes[node], "node %d\n%s", node, out())
	}
	r.stdout = stdouts[0].String()
	return r
}

// findRank waits, briefly, for rank of generation gen to run, and returns
// its pid.
func findRank(tb testing.TB, rank, gen int) int {
	tb.Helper()
	for range 1000 {
		if pid, ok := lookupRank(rank, gen); ok {
			return pid
		}
		time.Sleep(time.Millisecond)
	}
	require.FailNow(tb, "no such rank running", "rank %d of generation %d", rank, gen)
	return 0
}
