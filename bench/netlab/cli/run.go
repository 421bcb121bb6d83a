package cli

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rdmacell/rdmacell/bench/netlab"
	"github.com/rdmacell/rdmacell/bench/netlab/experiment"
)

// runFlags are the flags of `netlab run`.
type runFlags struct {
	lab              netlab.Config
	experiments      string
	plan             experiment.Plan
	bytes, cellSize  string
	paths            int
	cellrun, program string
	csvPath, logPath string
	env              []string
	ops, policies    string
}

func cmdRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flagSet("run", stderr)
	var f runFlags
	labFlags(fs, &f.lab, "exp")
	fs.StringVar(&f.experiments, "experiments", "1,2,3,4,5", "experiments to run, a comma-separated list of 1..5")
	fs.IntVar(&f.plan.Trials, "trials", 5, "`N` trials of each policy in each scenario")
	fs.StringVar(&f.bytes, "bytes", "32MiB", "buffer `SIZE` per rank (experiment 3 uses twice as much)")
	fs.IntVar(&f.plan.Iters, "iters", 5, "measured iterations per job")
	fs.IntVar(&f.plan.Warmup, "warmup", 1, "warm-up iterations per job")
	fs.IntVar(&f.plan.RanksPerHost, "ranks-per-host", 4, "ranks per host in experiment 5 (hash collisions)")
	fs.DurationVar(&f.plan.Timeout, "timeout", 5*time.Minute, "bound on each job; past it its ranks get SIGQUIT (labprog prints its goroutines), then it is stopped")
	fs.IntVar(&f.paths, "paths", 8, "cellrun --paths: QPs per peer")
	fs.StringVar(&f.cellSize, "cell-size", "", "cellrun --cell-size (empty: sized from the measured BDP)")
	fs.StringVar(&f.cellrun, "cellrun", "cellrun", "the cellrun `PROGRAM`")
	fs.StringVar(&f.program, "program", "labprog", "the traffic `PROGRAM` (bench/netlab/cmd/labprog)")
	fs.StringVar(&f.csvPath, "csv", "", "write one row per trial to `FILE`")
	fs.StringVar(&f.logPath, "log", "", "write every line the nodes print to `FILE`")
	fs.StringArrayVar(&f.env, "env", nil, "`VAR=VALUE` for every node (repeatable)")
	fs.StringVar(&f.ops, "ops", "", "only the scenarios of these collectives, a comma-separated list of allreduce, alltoall (empty: all)")
	fs.StringVar(&f.policies, "policies", "", "only these policies, a comma-separated list of adaptive, ecmp, spray (empty: all)")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	exps, err := parseList(f.experiments)
	if err != nil {
		return err
	}
	if f.plan.Bytes, err = parseBytes(f.bytes); err != nil {
		return err
	}
	cellSize := 0
	if f.cellSize != "" {
		if cellSize, err = parseBytes(f.cellSize); err != nil {
			return err
		}
	}
	cellrun, err := exec.LookPath(f.cellrun)
	if err != nil {
		return fmt.Errorf("%w: --cellrun: %w", errUsage, err)
	}
	program, err := exec.LookPath(f.program)
	if err != nil {
		return fmt.Errorf("%w: --program: %w", errUsage, err)
	}
	if f.plan.Ops, err = parseNames(f.ops, "op", "allreduce", "alltoall"); err != nil {
		return err
	}
	if f.plan.Policies, err = parseNames(f.policies, "policy", experiment.Policies...); err != nil {
		return err
	}
	scenarios, err := experiment.Scenarios(exps, f.plan)
	if err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}

	stop := netlab.HandleSignals()
	defer stop()
	l, err := netlab.Up(ctx, f.lab)
	if err != nil {
		return err
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := l.Down(ctx); err != nil {
			fmt.Fprintln(stderr, "netlab run:", err)
		}
	}()
	fmt.Fprint(stdout, l.Describe())

	setup := &experiment.Setup{Lab: l, Cellrun: cellrun, Program: program, Paths: f.paths, CellSize: cellSize, Env: f.env}
	if f.logPath != "" {
		logFile, err := os.Create(f.logPath)
		if err != nil {
			return err
		}
		defer logFile.Close()
		logw := bufio.NewWriter(logFile)
		defer logw.Flush()
		var mu sync.Mutex
		setup.Log = func(host int, line string) {
			mu.Lock()
			defer mu.Unlock()
			fmt.Fprintf(logw, "%s host%d %s\n", time.Now().Format("15:04:05.000"), host, line)
		}
	}
	var rows *experiment.CSVWriter
	if f.csvPath != "" {
		file, err := os.Create(f.csvPath)
		if err != nil {
			return err
		}
		defer file.Close()
		if rows, err = experiment.NewCSVWriter(file); err != nil {
			return err
		}
	}

	trials := experiment.Trials(scenarios, f.plan, 2)
	var results []experiment.Result
	for i, t := range trials {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if setup.Log != nil {
			setup.Log(-1, fmt.Sprintf("=== trial %d/%d: %s %s %s #%d", i+1, len(trials), t.Scenario, t.Op, t.Policy, t.Index))
		}
		r := setup.Run(ctx, t)
		results = append(results, r)
		status := fmt.Sprintf("%.1f MB/s busbw", r.BusBW/1e6)
		switch {
		case !r.Completed():
			status = "FAILED: " + cmp.Or(experiment.ErrorText(r.Err), "no summary")
		case !r.Correct():
			status = fmt.Sprintf("WRONG (%d elements)", r.Wrong)
		}
		fmt.Fprintf(stdout, "[%d/%d] %s %s %s #%d: %s\n", i+1, len(trials), t.Scenario, t.Op, t.Policy, t.Index, status)
		if rows != nil {
			if err := rows.Write(r); err != nil {
				return err
			}
		}
	}
	capacity := float64(f.lab.Spines) * f.lab.SpineRate.BytesPerSecond()
	fmt.Fprintf(stdout, "\nfabric: %d spines × %v each way = %.1f MB/s; %d paths per peer\n",
		f.lab.Spines, f.lab.SpineRate, capacity/1e6, f.paths)
	experiment.Summary(stdout, results, capacity)
	return nil
}

// parseList reads a comma-separated list of integers.
func parseList(s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil {
			return nil, fmt.Errorf("%w: experiment %q: want a number 1..5", errUsage, part)
		}
		out = append(out, n)
	}
	return out, nil
}

// parseNames reads a comma-separated list of names, each one of valid;
// empty is none.
func parseNames(s, what string, valid ...string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	var out []string
	for _, part := range strings.Split(s, ",") {
		name := strings.TrimSpace(part)
		if !slices.Contains(valid, name) {
			return nil, fmt.Errorf("%w: %s %q: want one of %s", errUsage, what, name, strings.Join(valid, ", "))
		}
		out = append(out, name)
	}
	return out, nil
}

// parseBytes reads a size such as 65536, 64KiB or 32MiB.
func parseBytes(s string) (int, error) {
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
		return 0, fmt.Errorf("%w: size %q: want a byte count such as 65536 or 32MiB", errUsage, s)
	}
	return n * mult, nil
}
