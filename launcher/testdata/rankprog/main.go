// Command rankprog is a rank for the launcher's tests. It prints the
// environment cellrun gave it, rendezvous with the other ranks through
// bootstrap, passes a barrier, and then does what its flags say: fail,
// kill itself, or block in a barrier that never completes until a signal
// arrives.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/rdmacell/rdmacell/bootstrap"
)

var knobs = []string{
	"RDMACELL_TRANSPORT", "RDMACELL_PATHS", "RDMACELL_CELL_SIZE", "RDMACELL_POLICY",
	"RDMACELL_DEBUG", "RDMACELL_RENDEZVOUS_TIMEOUT",
	"RDMACELL_ETCD_CA", "RDMACELL_ETCD_CERT", "RDMACELL_ETCD_KEY", "RDMACELL_ETCD_USER", "RDMACELL_ETCD_PASSWORD",
}

func main() {
	failRank := flag.Int("fail-rank", -1, "this rank exits with -code after the start barrier")
	code := flag.Int("code", 1, "exit code of -fail-rank")
	killRank := flag.Int("kill-rank", -1, "this rank kills itself with SIGKILL after the start barrier")
	block := flag.Bool("block", false, "after the start barrier, block in a barrier until a signal arrives")
	ignoreTerm := flag.Bool("ignore-term", false, "report SIGTERM but carry on")
	dieWithPeer := flag.Bool("die-with-peer", false, "with -block: exit 1 when another rank leaves or dies, as a real program would")
	spawn := flag.Bool("spawn", false, "start a child process that sleeps, in this rank's process group")
	sleep := flag.Duration("sleep", 0, "only sleep this long and exit (the mode of -spawn's child)")
	failGens := flag.Int("fail-generations", -1, "-fail-rank and -kill-rank only act in the first N generations (RDMACELL_RESTART_COUNT < N); -1 for all")
	flag.Parse()
	if n, _ := strconv.Atoi(os.Getenv("RDMACELL_RESTART_COUNT")); *failGens >= 0 && n >= *failGens {
		*failRank, *killRank = -1, -1
	}
	if *sleep > 0 {
		time.Sleep(*sleep)
		return
	}

	// Set up signals first: cellrun may forward one at any time.
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	if err := run(*failRank, *code, *killRank, *block, *spawn, *ignoreTerm, *dieWithPeer, signals); err != nil {
		fmt.Fprintln(os.Stderr, "rankprog:", err)
		os.Exit(1)
	}
}

func run(failRank, code, killRank int, block, spawn, ignoreTerm, dieWithPeer bool, signals <-chan os.Signal) error {
	env := func(name string) string { return os.Getenv(name) }
	fmt.Printf("env rank=%s world=%s local=%s localworld=%s job=%s endpoints=%s\n",
		env("RDMACELL_RANK"), env("RDMACELL_WORLD_SIZE"), env("RDMACELL_LOCAL_RANK"),
		env("RDMACELL_LOCAL_WORLD_SIZE"), env("RDMACELL_JOB"), env("RDMACELL_ETCD_ENDPOINTS"))
	fmt.Printf("restart count=%s\n", env("RDMACELL_RESTART_COUNT"))
	for _, k := range knobs {
		if v, ok := os.LookupEnv(k); ok {
			fmt.Printf("knob %s=%s\n", k, v)
		} else {
			fmt.Printf("knob %s unset\n", k)
		}
	}
	fmt.Printf("pid=%d\n", os.Getpid())
	// The secret itself is never printed: its hash tells the tests whether
	// ranks share it.
	var secret []byte
	if v := env("RDMACELL_SECRET"); v != "" {
		b, err := hex.DecodeString(v)
		if err != nil {
			return fmt.Errorf("RDMACELL_SECRET: %w", err)
		}
		secret = b
		fmt.Printf("secret-hash=%x\n", sha256.Sum256(b))
	} else {
		fmt.Println("secret unset")
	}

	rank, err := strconv.Atoi(env("RDMACELL_RANK"))
	if err != nil {
		return fmt.Errorf("RDMACELL_RANK %q: %w", env("RDMACELL_RANK"), err)
	}
	fmt.Fprintf(os.Stderr, "stderr line from rank %d\n", rank)
	world, err := strconv.Atoi(env("RDMACELL_WORLD_SIZE"))
	if err != nil {
		return fmt.Errorf("RDMACELL_WORLD_SIZE %q: %w", env("RDMACELL_WORLD_SIZE"), err)
	}
	endpoints, err := bootstrap.ParseEndpoints(env("RDMACELL_ETCD_ENDPOINTS"))
	if err != nil {
		return err
	}
	if spawn {
		child := exec.Command(os.Args[0], "-sleep", "10m")
		child.Stdout = os.Stdout
		if err := child.Start(); err != nil {
			return fmt.Errorf("spawn: %w", err)
		}
		fmt.Printf("grandchild=%d\n", child.Process.Pid)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := bootstrap.ClientConfig{Endpoints: endpoints}
	if ca := env("RDMACELL_ETCD_CA"); ca != "" {
		client.TLS = &bootstrap.TLSFiles{CAFile: ca, CertFile: env("RDMACELL_ETCD_CERT"), KeyFile: env("RDMACELL_ETCD_KEY")}
	}
	job, err := bootstrap.Join(ctx, bootstrap.Config{
		Client:    client,
		Secret:    secret,
		Job:       env("RDMACELL_JOB"),
		Rank:      rank,
		WorldSize: world,
		Logger:    slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return err
	}
	if _, err := job.WaitWorld(ctx); err != nil {
		return err
	}
	if err := job.Barrier(ctx, "start"); err != nil {
		return err
	}
	fmt.Println("passed barrier")

	switch {
	case rank == failRank:
		fmt.Printf("failing with code %d\n", code)
		os.Exit(code)
	case rank == killRank:
		fmt.Println("killing myself")
		return syscall.Kill(os.Getpid(), syscall.SIGKILL)
	case block:
		fmt.Println("blocked")
		// The barrier never completes: some rank is failing, or the test
		// signals cellrun. Its failure is printed but changes nothing: only
		// a signal ends this rank.
		if dieWithPeer {
			go func() {
				err := <-job.Departures()
				fmt.Fprintln(os.Stderr, "rankprog: a rank left:", err)
				os.Exit(1)
			}()
		} else {
			go func() { fmt.Println("barrier end:", job.Barrier(ctx, "end")) }()
		}
		for sig := range signals {
			if ignoreTerm && sig == syscall.SIGTERM {
				fmt.Printf("ignoring signal %v\n", sig)
				continue
			}
			fmt.Printf("got signal %v\n", sig)
			os.Exit(128 + int(sig.(syscall.Signal)))
		}
	}
	return job.Close(ctx)
}
