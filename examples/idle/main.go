// Command idle joins a job, synchronizes once, then leaves the
// communicator idle for a while before closing it: the workload for
// measuring what an idle rank costs (its CPU time, its wake-ups).
//
//	go run ./launcher/cellrun -n 4 ./examples/idle -idle 20s
//
// With -trace DIR each rank records a runtime trace of its idle window
// (after the barrier, before Close) into DIR/rank-N.trace, for go tool
// trace.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime/trace"
	"time"

	"github.com/rdmacell/rdmacell/collectives"
)

func main() {
	idle := flag.Duration("idle", 20*time.Second, "how long to stay idle between the two barriers")
	traceDir := flag.String("trace", "", "record a runtime trace of the idle window into this directory")
	timeout := flag.Duration("timeout", 2*time.Minute, "give up after this long")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := run(ctx, *idle, *traceDir); err != nil {
		fmt.Fprintln(os.Stderr, "idle:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, idle time.Duration, traceDir string) (err error) {
	g, err := collectives.Open(ctx, collectives.Options{})
	if err != nil {
		return err
	}
	defer func() {
		if gerr := g.Close(); gerr != nil && err == nil {
			err = gerr
		}
	}()
	if err := collectives.Barrier(ctx, g); err != nil {
		return err
	}
	fmt.Printf("pid %d idle for %v\n", os.Getpid(), idle)
	stopTrace := func() {}
	if traceDir != "" {
		f, err := os.Create(filepath.Join(traceDir, fmt.Sprintf("rank-%d.trace", g.Rank())))
		if err != nil {
			return err
		}
		defer f.Close()
		if err := trace.Start(f); err != nil {
			return err
		}
		stopTrace = trace.Stop
	}
	time.Sleep(idle)
	stopTrace()
	// A second barrier: every rank is still there after the idle window.
	return collectives.Barrier(ctx, g)
}
