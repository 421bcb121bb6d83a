// Command cellbench measures RDMACell's collectives the way nccl-tests
// measures NCCL's, and prints the same table. Run it under cellrun:
//
//	cellrun -n 2 cellbench allreduce -b 8 -e 64M -f 4 -c 1
//
// The first argument is the collective: allreduce, allgather, alltoall,
// reducescatter, broadcast, reduce, scatter, gather or sendrecv. See
// cellbench --help.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/rdmacell/rdmacell/bench/cellbench/internal/bench"
	"github.com/rdmacell/rdmacell/collectives"
)

const usage = `usage: cellrun -n N cellbench COLLECTIVE [flags]

COLLECTIVE is allreduce, allgather, alltoall, reducescatter, broadcast,
reduce, scatter, gather or sendrecv. Sizes take K, M and G suffixes
(powers of 1024).

Flags:
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg, err := parse(os.Args[1:])
	if errors.Is(err, pflag.ErrHelp) {
		return
	}
	if err == nil {
		err = bench.Run(ctx, cfg, os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "cellbench:", err)
		os.Exit(1)
	}
}

func parse(args []string) (bench.Config, error) {
	var cfg bench.Config
	var minB, maxB, step, algo, chunk string
	var check int
	fs := pflag.NewFlagSet("cellbench", pflag.ContinueOnError)
	fs.SortFlags = false
	fs.Usage = func() { fmt.Fprint(os.Stderr, usage+fs.FlagUsages()) }
	fs.StringVarP(&minB, "minbytes", "b", "32M", "smallest message `SIZE`")
	fs.StringVarP(&maxB, "maxbytes", "e", "32M", "largest message `SIZE`")
	fs.StringVarP(&step, "stepbytes", "i", "1M", "`SIZE` added at each step when -f is not given")
	fs.Float64VarP(&cfg.Factor, "stepfactor", "f", 1, "multiply the size by `F` at each step")
	fs.IntVarP(&cfg.Iters, "iters", "n", 20, "`N` timed calls per repetition (the least, with --rep-time)")
	fs.IntVarP(&cfg.Warmup, "warmup_iters", "w", 5, "`N` untimed calls before timing")
	fs.IntVarP(&check, "check", "c", 1, "check the results: 1 yes, 0 no")
	fs.StringVarP(&cfg.Type, "datatype", "d", "float", "element `TYPE`: float, double, int32, int64, uint8, half, bfloat16")
	fs.StringVarP(&cfg.Op, "op", "o", "sum", "reduction `OP`: sum, prod, min, max, avg")
	fs.IntVarP(&cfg.Root, "root", "r", 0, "`RANK` of the root of broadcast, reduce, scatter and gather")
	fs.IntVar(&cfg.Reps, "reps", 5, "`N` timed repetitions; rows show their median")
	fs.DurationVar(&cfg.RepTime, "rep-time", 0, "raise -n per size so a repetition lasts about `D` (e.g. 40ms)")
	fs.StringVar(&algo, "algo", "", "force the collective `ALGORITHM`: ring, recursive-doubling, halving-doubling, pairwise, chain, tree, linear, shared, hierarchical")
	fs.BoolVar(&cfg.Reproducible, "reproducible", false, "reduce every element in rank order (the same bits whatever the algorithm and transport)")
	fs.BoolVar(&cfg.Exact, "exact", false, "correctly rounded float sums")
	fs.StringVar(&chunk, "chunk", "0", "pipelining unit `SIZE` of the ring, chain and shared algorithms (0: the library's)")
	fs.StringVar(&cfg.Policy, "policy", "", "path scheduling `POLICY`: adaptive, ecmp or spray")
	fs.IntVar(&cfg.Paths, "paths", 0, "`N` paths (QPs) per peer")
	fs.StringVar(&cfg.JSONFile, "json", "", "write the rows as JSON to `FILE`")
	fs.StringVar(&cfg.CSVFile, "csv", "", "append the out-of-place rows to `FILE` in the reference benchmarks' columns")
	fs.StringVar(&cfg.Label, "label", "cellbench", "configuration `NAME` in the CSV")
	fs.IntVar(&cfg.Run, "run", 1, "run index `N` in the CSV")
	fs.StringVar(&cfg.CPUProfile, "cpuprofile", "", "write each rank's CPU profile to `FILE`.RANK")
	fs.DurationVar(&cfg.Idle, "idle", 0, "after the sizes, measure the CPU an idle communicator uses over `D`")
	fs.BoolVar(&cfg.PathsReport, "paths-report", false, "at the end, print every rank's cells, bytes, RTT, T_soft, give-ups and resets per peer and path")
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fs.Usage()
		if len(args) == 0 {
			return cfg, errors.New("want a collective as the first argument")
		}
		return cfg, pflag.ErrHelp
	}
	cfg.Collective = args[0]
	if err := fs.Parse(args[1:]); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	var err error
	if cfg.MinBytes, err = bench.ParseSize(minB); err != nil {
		return cfg, fmt.Errorf("-b: %w", err)
	}
	if cfg.MaxBytes, err = bench.ParseSize(maxB); err != nil {
		return cfg, fmt.Errorf("-e: %w", err)
	}
	if cfg.Step, err = bench.ParseSize(step); err != nil {
		return cfg, fmt.Errorf("-i: %w", err)
	}
	c, err := bench.ParseSize(chunk)
	if err != nil {
		return cfg, fmt.Errorf("--chunk: %w", err)
	}
	cfg.Chunk = int(c)
	if cfg.Algorithm, err = collectives.ParseAlgorithm(algo); err != nil {
		return cfg, fmt.Errorf("--algo: %w", err)
	}
	cfg.Check = check != 0
	return cfg, nil
}
