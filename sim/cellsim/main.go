// Command cellsim runs the packet-level simulator of package sim: a sweep
// of schemes × workloads × loads × seeds, in parallel, writing a CSV of
// FCT slowdowns and, with --plot, Figure-5-style PNGs. With --collective
// it runs collectives (ring AllReduce, pairwise AllToAll) instead, every
// scheme on the same schedule, and writes collective.csv with each
// one's completion time against the ideal, and collective.png.
//
// Its flags are GNU-style, as every command of the module's: long flags
// take two dashes (--schemes ecmp,rdmacell), -k and -j one.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/rdmacell/rdmacell/sim"
)

const usage = `Usage: cellsim --workloads FILE[,FILE...] [flags]
       cellsim --collective allreduce,alltoall [flags]

Simulates every scheme on every workload, load and seed (or on every
collective and placement) and writes results.csv (collective.csv) and
plots to --out.

Flags:
`

func main() {
	o, err := parse(os.Args[1:], os.Stderr)
	if errors.Is(err, pflag.ErrHelp) {
		return
	}
	if err == nil {
		err = run(o, os.Stderr)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "cellsim:", err)
		os.Exit(1)
	}
}

// options are what the command line asks for.
type options struct {
	// base is the fabric and the engine of every simulation.
	base sim.Config
	// schemes are the load-balancing schemes compared.
	schemes []string
	// workloads are flow-size CDF files; loads the offered loads; each
	// point runs seeds seeds from firstSeed on.
	workloads        []string
	loads            []float64
	seeds, firstSeed int
	// collectives, when set, are run instead of workloads, each with
	// every placement, ranks ranks and collBytes bytes per rank.
	collectives []string
	placements  []string
	ranks       int
	collBytes   int64
	// jobs simulations run at once; results go to out, with plots if plot.
	jobs       int
	out        string
	plot       bool
	cpuProfile string
}

// parse reads the command line; for --help it writes the usage to w and
// returns pflag.ErrHelp.
func parse(args []string, w io.Writer) (options, error) {
	var o options
	var (
		topo                              string
		k, leaves, spines, hpl            int
		schemes, workloads, loads, colls  string
		placements, collBytes             string
		duration, warmup, drain           time.Duration
		paths, backoff                    int
		cellBDP                           float64
		qpReset, recvLead, softFloor, rto time.Duration
		tokenPrio, noDCQCN, pfc, keepTgt  bool
		conn                              string
	)
	fs := pflag.NewFlagSet("cellsim", pflag.ContinueOnError)
	fs.SortFlags = false
	fs.SetOutput(io.Discard) // errors are returned, the usage printed below
	fs.StringVar(&topo, "topo", "fattree", "the `TOPOLOGY`: fattree or leafspine")
	fs.IntVarP(&k, "k", "k", 8, "fat-tree `K`")
	fs.IntVar(&leaves, "leaves", 8, "leaf-spine: `N` leaves")
	fs.IntVar(&spines, "spines", 8, "leaf-spine: `N` spines")
	fs.IntVar(&hpl, "hosts-per-leaf", 8, "leaf-spine: `N` hosts per leaf")
	fs.StringVar(&schemes, "schemes", strings.Join(sim.Schemes, ","), "comma-separated `SCHEMES`")
	fs.StringVar(&workloads, "workloads", "", "comma-separated workload CDF `FILES` (size bytes, cumulative percent)")
	fs.StringVar(&loads, "loads", "0.2,0.4,0.6,0.8", "comma-separated `LOADS` in (0,1]")
	fs.IntVar(&o.seeds, "seeds", 1, "`N` seeds per point (first-seed..first-seed+N-1)")
	fs.IntVar(&o.firstSeed, "first-seed", 1, "the first `SEED`: one long run per seed can go alone")
	fs.DurationVar(&duration, "duration", 20*time.Millisecond, "arrivals window (simulated)")
	fs.DurationVar(&warmup, "warmup", 5*time.Millisecond, "flows starting earlier are not counted")
	fs.DurationVar(&drain, "drain", 50*time.Millisecond, "simulated time after the arrivals for the last flows to finish")
	fs.IntVarP(&o.jobs, "j", "j", runtime.NumCPU(), "`N` simulations run in parallel")
	fs.StringVar(&o.out, "out", ".", "`DIR` for results.csv and plots")
	fs.BoolVar(&o.plot, "plot", true, "write fig5-*.png (collective.png)")
	fs.IntVar(&paths, "paths", 4, "RDMACell: `N` QPs per connection")
	fs.Float64Var(&cellBDP, "cell-bdp", 1.5, "RDMACell: flowcell size in BDPs (0: the engine's adaptive sizing)")
	fs.DurationVar(&qpReset, "qp-reset", 100*time.Microsecond, "RDMACell: QP reset latency")
	fs.DurationVar(&recvLead, "recv-lead", time.Millisecond, "RDMACell: how long before a flow its receiver posts the range")
	fs.DurationVar(&softFloor, "soft-floor", 0, "RDMACell: the floor of the engine's soft timeout (0: 1ms, or with --pfc the lossless bound derived from the fabric)")
	fs.IntVar(&backoff, "soft-backoff", 64, "RDMACell: most the engine stretches its soft timeout after soft timeouts (1: no back-off)")
	fs.StringVar(&conn, "conn", "", "the `MODEL` of connections for a workload: pair (one long-lived connection per host pair, as ranks keep; a baseline's is one QP) or flow (a fresh one per flow); empty: pair for RDMACell, flow for the baselines")
	fs.BoolVar(&tokenPrio, "token-prio", true, "RDMACell: receiver-end QPs (tokens) in the ACKs' priority class")
	fs.BoolVar(&noDCQCN, "no-dcqcn", false, "disable DCQCN")
	fs.BoolVar(&keepTgt, "dcqcn-keep-target", false, "DCQCN keeps its target rate through a burst of cuts (CLAMP_TARGET_RATE 0), instead of clamping it at every cut")
	fs.BoolVar(&pfc, "pfc", false, "lossless fabric: PFC pauses per ingress port instead of drops")
	fs.DurationVar(&rto, "rto", 0, "Go-Back-N retransmission timeout (0: 500µs, or 4ms with --pfc)")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile to `FILE`")
	fs.StringVar(&colls, "collective", "", "comma-separated `COLLECTIVES` to run instead of workloads: allreduce (ring), alltoall (pairwise)")
	fs.IntVar(&o.ranks, "ranks", 0, "collective: `N` ranks, one per host (0: every host)")
	fs.StringVar(&collBytes, "coll-bytes", "4MiB", "collective: `BYTES` per rank (AllReduce vector, AllToAll send buffer); suffixes KiB, MiB, GiB")
	fs.StringVar(&placements, "placement", "linear", "collective: comma-separated rank `PLACEMENTS`: linear (rank r on host r), random")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fmt.Fprint(w, usage+fs.FlagUsages())
			return o, err
		}
		return o, dashHint(fs, args, err)
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q (every input is a flag: see --help)", fs.Arg(0))
	}
	if workloads == "" && colls == "" {
		return o, errors.New("--workloads or --collective is required")
	}
	o.base = sim.Config{
		Topology: sim.Topology{Kind: topo, K: k, Leaves: leaves, Spines: spines, HostsPerLeaf: hpl},
		Duration: duration.Nanoseconds(), Warmup: warmup.Nanoseconds(), Drain: drain.Nanoseconds(),
		Paths: paths, CellBDP: cellBDP, QPReset: qpReset.Nanoseconds(), RecvLead: recvLead.Nanoseconds(), NoDCQCN: noDCQCN, DCQCNKeepTarget: keepTgt, TokenPrio: tokenPrio,
		PFC: pfc, RTO: rto.Nanoseconds(), SoftBackoff: backoff, MinSoftTimeout: softFloor.Nanoseconds(), Conn: conn,
	}
	if conn != "" && !slices.Contains(sim.ConnModels, conn) {
		return o, fmt.Errorf("--conn %q, want one of %v", conn, sim.ConnModels)
	}
	if conn == "flow" && colls != "" {
		return o, errors.New("--conn flow: a collective runs on pair connections")
	}
	if cellBDP == 0 {
		o.base.CellBDP = -1
	}
	o.schemes = strings.Split(schemes, ",")
	if colls != "" {
		n, err := parseBytes(collBytes)
		if err != nil {
			return o, fmt.Errorf("--coll-bytes: %w", err)
		}
		o.collectives, o.placements, o.collBytes = strings.Split(colls, ","), strings.Split(placements, ","), n
		return o, nil
	}
	o.workloads = strings.Split(workloads, ",")
	for _, s := range strings.Split(loads, ",") {
		l, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return o, fmt.Errorf("--loads: %q: %w", s, err)
		}
		o.loads = append(o.loads, l)
	}
	return o, nil
}

// dashHint explains a failed parse caused by a long flag given with one
// dash, the standard flag package's spelling, which pflag reads as a
// cluster of shorthands ("-pfc": unknown shorthand flag 'p').
func dashHint(fs *pflag.FlagSet, args []string, err error) error {
	for _, a := range args {
		if a == "--" {
			break
		}
		flag, ok := strings.CutPrefix(a, "-")
		if !ok || strings.HasPrefix(flag, "-") {
			continue
		}
		if name, _, _ := strings.Cut(flag, "="); len(name) > 1 && fs.Lookup(name) != nil {
			return fmt.Errorf("%s: a long flag takes two dashes: -%s", a, a)
		}
	}
	return err
}

// run runs the simulations o asks for, reporting progress and the errors
// of single simulations on stderr.
func run(o options, stderr io.Writer) error {
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return fmt.Errorf("cpuprofile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("cpuprofile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	if len(o.collectives) > 0 {
		return runCollectives(o, stderr)
	}
	var wls []*sim.Workload
	for _, p := range o.workloads {
		w, err := sim.LoadWorkload(p)
		if err != nil {
			return err
		}
		wls = append(wls, w)
	}
	var js []sim.Job
	for _, w := range wls {
		for _, l := range o.loads {
			for _, sc := range o.schemes {
				for seed := o.firstSeed; seed < o.firstSeed+o.seeds; seed++ {
					js = append(js, sim.Job{Scheme: sc, Workload: w, Load: l, Seed: uint64(seed)})
				}
			}
		}
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	rows := sim.Sweep(o.base, js, o.jobs, stderr)
	f, err := os.Create(filepath.Join(o.out, "results.csv"))
	if err != nil {
		return fmt.Errorf("results: %w", err)
	}
	if err := sim.WriteCSV(f, rows); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("results: %w", err)
	}
	for _, r := range rows {
		if r.Err != nil {
			fmt.Fprintf(stderr, "%s %s %.2f: %v\n", r.Scheme, r.Workload.Name, r.Load, r.Err)
		}
	}
	if o.plot {
		if _, err := sim.PlotFig5(rows, o.out); err != nil {
			return err
		}
	}
	return nil
}

// runCollectives runs every scheme on every collective and placement.
func runCollectives(o options, stderr io.Writer) error {
	var js []sim.Job
	for _, kind := range o.collectives {
		for _, pl := range o.placements {
			c := &sim.Collective{Kind: kind, Ranks: o.ranks, Bytes: o.collBytes, Placement: pl}
			for _, sc := range o.schemes {
				for seed := 1; seed <= o.seeds; seed++ {
					js = append(js, sim.Job{Scheme: sc, Collective: c, Seed: uint64(seed)})
				}
			}
		}
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	rows := sim.Sweep(o.base, js, o.jobs, stderr)
	f, err := os.Create(filepath.Join(o.out, "collective.csv"))
	if err != nil {
		return fmt.Errorf("results: %w", err)
	}
	if err := sim.WriteCollectiveCSV(f, rows); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("results: %w", err)
	}
	for _, r := range rows {
		if r.Err != nil {
			fmt.Fprintf(stderr, "%s %s: %v\n", r.Scheme, r.Name(), r.Err)
		}
	}
	if o.plot {
		if _, err := sim.PlotCollectives(rows, o.out); err != nil {
			return err
		}
	}
	return nil
}

// parseBytes reads a byte count with an optional KiB, MiB or GiB suffix.
func parseBytes(s string) (int64, error) {
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		m      int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSuffix(s, u.suffix), u.m
			break
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 1 {
		return 0, fmt.Errorf("%q: want a positive byte count, e.g. 4MiB", s)
	}
	return v * mult, nil
}
