package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
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
// (the broadcast of the weights) is done, so once every rank has entered
// it. It reports the median, fastest and slowest of b.N restarts, and
// the median of the part before cellrun has seen every rank of generation
// 0 exit and says it restarts (stop-ms; on the killed rank's node).
func BenchmarkRestartOverhead(b *testing.B) {
	for _, nodes := range []int{1, 2} {
		name := map[int]string{1: "one-node", 2: "two-nodes"}[nodes]
		b.Run(name, func(b *testing.B) {
			var took, stops []time.Duration
			for range b.N {
				total, stop := restartOnce(b, nodes)
				took, stops = append(took, total), append(stops, stop)
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

// restartOnce runs the example under --max-restarts 1 on nodes launcher
// nodes, kills the last rank once training runs, and returns how long
// until generation 1 trains, and until cellrun announced the restart.
func restartOnce(b *testing.B, nodes int) (time.Duration, time.Duration) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const ranks = 4
	procs := ranks / nodes
	started, restarted := newStamped("[0] training on"), newStamped("[g1 0] training on")
	announced := newStamped("cellrun: ")
	var addr string
	if nodes > 1 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(b, err)
		addr = l.Addr().String()
		require.NoError(b, l.Close())
	}
	token := launcher.NewToken()
	job := fmt.Sprint("restart-bench-", os.Getpid(), "-", time.Now().UnixNano())
	var wg sync.WaitGroup
	codes := make([]int, nodes)
	errs := make([]error, nodes)
	stderrs := make([]*syncbuf.Buffer, nodes)
	for node := range nodes {
		cfg := launcher.Config{
			Program: trainBin, Args: restartArgs, ProcsPerNode: procs, Nodes: nodes, NodeRank: node,
			MaxRestarts: 1, Env: os.Environ(),
		}
		stdout, stderr := multiWriter{started, restarted}, &syncbuf.Buffer{}
		stderrs[node] = stderr
		if nodes > 1 {
			cfg.Job, cfg.JoinToken, cfg.NodeTimeout = job, token, 5*time.Second
			cfg.Env = append(cfg.Env, fmt.Sprintf("%s=node-%d", comm.EnvHost, node))
			if node == 0 {
				cfg.EtcdServe = addr
			} else {
				cfg.EtcdEndpoints = []string{addr}
			}
		}
		if node > 0 {
			stdout = multiWriter{}
		}
		var errOut io.Writer = stderr
		if node == nodes-1 {
			errOut = io.MultiWriter(stderr, announced)
		}
		wg.Go(func() { codes[node], errs[node] = launcher.Run(ctx, cfg, stdout, errOut) })
	}
	select {
	case <-started.seen:
	case <-ctx.Done():
		b.Fatal("generation 0 did not start")
	}
	// The last rank is on the last node: across nodes, the failure has to
	// travel.
	pid := findRank(b, ranks-1, 0)
	killed := time.Now()
	require.NoError(b, syscall.Kill(pid, syscall.SIGKILL))
	select {
	case <-restarted.seen:
	case <-ctx.Done():
		b.Fatal("generation 1 did not start")
	}
	took, stop := restarted.at.Sub(killed), announced.at.Sub(killed)
	wg.Wait()
	for node := range nodes {
		require.NoError(b, errs[node])
		require.Zero(b, codes[node], "node %d: %s", node, stderrs[node])
	}
	return took, stop
}

// findRank is rankPID for a benchmark, waiting for the rank to be there.
func findRank(b *testing.B, rank, gen int) int {
	b.Helper()
	for range 1000 {
		if pid, ok := lookupRank(rank, gen); ok {
			return pid
		}
		time.Sleep(time.Millisecond)
	}
	b.Fatalf("rank %d of generation %d is not running", rank, gen)
	return 0
}

// multiWriter writes to each of its writers.
type multiWriter []*stamped

func (m multiWriter) Write(p []byte) (int, error) {
	for _, w := range m {
		_, _ = w.Write(p)
	}
	return len(p), nil
}
