// Command labprog is the traffic of the lab's experiments: started by
// cellrun on every lab host, it runs AllReduce and AllToAll over large
// buffers, checks every result and prints per-iteration timings (see
// package traffic). SIGQUIT makes it print every goroutine's stack on
// standard error and carry on.
//
//	cellrun ... labprog --ops allreduce,alltoall --bytes 64MiB --iters 5 --warmup 1
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rdmacell/rdmacell/bench/netlab/traffic"
)

func main() {
	var cfg traffic.Config
	ops := flag.String("ops", "allreduce,alltoall", "collectives to run, in order: allreduce, alltoall")
	size := flag.String("bytes", "64MiB", "buffer size per rank, with an optional KiB, MiB or GiB")
	flag.IntVar(&cfg.Iters, "iters", 5, "measured iterations of each collective")
	flag.IntVar(&cfg.Warmup, "warmup", 1, "warm-up iterations of each collective")
	flag.DurationVar(&cfg.Timeout, "timeout", 10*time.Minute, "bound on the whole run")
	flag.DurationVar(&cfg.Recheck, "recheck", time.Second, "after a wrong result, wait this long and check it again (0: never)")
	flag.Parse()
	for _, op := range strings.Split(*ops, ",") {
		cfg.Ops = append(cfg.Ops, traffic.Op(strings.TrimSpace(op)))
	}
	n, err := parseSize(*size)
	if err != nil {
		fmt.Fprintln(os.Stderr, "labprog:", err)
		os.Exit(2)
	}
	cfg.Bytes = n
	// SIGQUIT prints every goroutine and carries on, so that the runner
	// can take a hung rank's stacks and still stop it with SIGTERM, which
	// makes the collective say where it was.
	quit := make(chan os.Signal, 1)
	signal.Notify(quit, syscall.SIGQUIT)
	go func() {
		for range quit {
			fmt.Fprintf(os.Stderr, "GOROUTINES pid=%d at=%s\n", os.Getpid(), time.Now().Format(time.RFC3339Nano))
			_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 2)
			fmt.Fprintln(os.Stderr, "END GOROUTINES")
		}
	}()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := traffic.Run(ctx, cfg, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "labprog:", err)
		os.Exit(1)
	}
}

// parseSize reads a byte count such as 4096, 64KiB, 64MiB or 1GiB.
func parseSize(s string) (int, error) {
	mult := 1
	for _, u := range []struct {
		suffix string
		mult   int
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 || n > (1<<40)/mult {
		return 0, fmt.Errorf("size %q: want a positive byte count such as 65536 or 64MiB", s)
	}
	return n * mult, nil
}
