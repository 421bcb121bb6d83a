// Command cellsim runs the packet-level simulator of package sim: a sweep
// of schemes × workloads × loads × seeds, in parallel, writing a CSV of
// FCT slowdowns and, with -plot, Figure-5-style PNGs. With -collective
// it runs collectives (ring AllReduce, pairwise AllToAll) instead, every
// scheme on the same schedule, and writes collective.csv with each
// one's completion time against the ideal, and collective.png.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/rdmacell/rdmacell/sim"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "cellsim:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		topo      = flag.String("topo", "fattree", "fattree or leafspine")
		k         = flag.Int("k", 8, "fat-tree K")
		leaves    = flag.Int("leaves", 8, "leaf-spine: leaves")
		spines    = flag.Int("spines", 8, "leaf-spine: spines")
		hpl       = flag.Int("hosts-per-leaf", 8, "leaf-spine: hosts per leaf")
		schemes   = flag.String("schemes", strings.Join(sim.Schemes, ","), "comma-separated schemes")
		workloads = flag.String("workloads", "", "comma-separated workload CDF files (size bytes, cumulative percent)")
		loads     = flag.String("loads", "0.2,0.4,0.6,0.8", "comma-separated loads in (0,1]")
		seeds     = flag.Int("seeds", 1, "seeds per point (first-seed..first-seed+n-1)")
		firstSeed = flag.Int("first-seed", 1, "the first seed: one long run per seed can go alone")
		duration  = flag.Duration("duration", 20*time.Millisecond, "arrivals window (simulated)")
		warmup    = flag.Duration("warmup", 5*time.Millisecond, "flows starting earlier are not counted")
		drain     = flag.Duration("drain", 50*time.Millisecond, "simulated time after the arrivals for the last flows to finish")
		jobs      = flag.Int("j", runtime.NumCPU(), "simulations run in parallel")
		out       = flag.String("out", ".", "directory for results.csv and plots")
		doPlot    = flag.Bool("plot", true, "write fig5-*.png")
		paths     = flag.Int("paths", 4, "RDMACell: QPs per connection")
		cellBDP   = flag.Float64("cell-bdp", 1.5, "RDMACell: flowcell size in BDPs (0: the engine's adaptive sizing)")
		qpReset   = flag.Duration("qp-reset", 100*time.Microsecond, "RDMACell: QP reset latency")
		recvLead  = flag.Duration("recv-lead", time.Millisecond, "RDMACell: how long before a flow its receiver posts the range")
		softFloor = flag.Duration("soft-floor", 0, "RDMACell: the floor of the engine's soft timeout (0: 1ms, or with -pfc the lossless bound derived from the fabric)")
		backoff   = flag.Int("soft-backoff", 64, "RDMACell: most the engine stretches its soft timeout after soft timeouts (1: no back-off)")
		tokenPrio = flag.Bool("token-prio", true, "RDMACell: receiver-end QPs (tokens) in the ACKs' priority class")
		noDCQCN   = flag.Bool("no-dcqcn", false, "disable DCQCN")
		pfc       = flag.Bool("pfc", false, "lossless fabric: PFC pauses per ingress port instead of drops")
		rto       = flag.Duration("rto", 0, "Go-Back-N retransmission timeout (0: 500µs, or 4ms with -pfc)")
		cpuprof   = flag.String("cpuprofile", "", "write a CPU profile here")
		colls     = flag.String("collective", "", "comma-separated collectives to run instead of workloads: allreduce (ring), alltoall (pairwise)")
		ranks     = flag.Int("ranks", 0, "collective: ranks, one per host (0: every host)")
		collBytes = flag.String("coll-bytes", "4MiB", "collective: bytes per rank (AllReduce vector, AllToAll send buffer); suffixes KiB, MiB, GiB")
		placement = flag.String("placement", "linear", "collective: comma-separated rank placements: linear (rank r on host r), random")
	)
	flag.Parse()
	if *workloads == "" && *colls == "" {
		return fmt.Errorf("-workloads or -collective is required")
	}
	if *cpuprof != "" {
		f, err := os.Create(*cpuprof)
		if err != nil {
			return fmt.Errorf("cpuprofile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("cpuprofile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	base := sim.Config{
		Topology: sim.Topology{Kind: *topo, K: *k, Leaves: *leaves, Spines: *spines, HostsPerLeaf: *hpl},
		Duration: duration.Nanoseconds(), Warmup: warmup.Nanoseconds(), Drain: drain.Nanoseconds(),
		Paths: *paths, CellBDP: *cellBDP, QPReset: qpReset.Nanoseconds(), RecvLead: recvLead.Nanoseconds(), NoDCQCN: *noDCQCN, TokenPrio: *tokenPrio,
		PFC: *pfc, RTO: rto.Nanoseconds(), SoftBackoff: *backoff, MinSoftTimeout: softFloor.Nanoseconds(),
	}
	if *cellBDP == 0 {
		base.CellBDP = -1
	}
	if *colls != "" {
		return runCollectives(base, *colls, *placement, *collBytes, *ranks, *schemes, *seeds, *jobs, *out, *doPlot)
	}
	var wls []*sim.Workload
	for _, p := range strings.Split(*workloads, ",") {
		w, err := sim.LoadWorkload(p)
		if err != nil {
			return err
		}
		wls = append(wls, w)
	}
	var ls []float64
	for _, s := range strings.Split(*loads, ",") {
		l, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return fmt.Errorf("-loads: %q: %w", s, err)
		}
		ls = append(ls, l)
	}
	var js []sim.Job
	for _, w := range wls {
		for _, l := range ls {
			for _, sc := range strings.Split(*schemes, ",") {
				for seed := *firstSeed; seed < *firstSeed+*seeds; seed++ {
					js = append(js, sim.Job{Scheme: sc, Workload: w, Load: l, Seed: uint64(seed)})
				}
			}
		}
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return fmt.Errorf("-out: %w", err)
	}
	rows := sim.Sweep(base, js, *jobs, os.Stderr)
	f, err := os.Create(filepath.Join(*out, "results.csv"))
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
			fmt.Fprintf(os.Stderr, "%s %s %.2f: %v\n", r.Scheme, r.Workload.Name, r.Load, r.Err)
		}
	}
	if *doPlot {
		if _, err := sim.PlotFig5(rows, *out); err != nil {
			return err
		}
	}
	return nil
}

// runCollectives runs every scheme on every collective and placement.
func runCollectives(base sim.Config, colls, placements, bytes string, ranks int, schemes string, seeds, jobs int, out string, doPlot bool) error {
	n, err := parseBytes(bytes)
	if err != nil {
		return fmt.Errorf("-coll-bytes: %w", err)
	}
	var js []sim.Job
	for _, kind := range strings.Split(colls, ",") {
		for _, pl := range strings.Split(placements, ",") {
			c := &sim.Collective{Kind: kind, Ranks: ranks, Bytes: n, Placement: pl}
			for _, sc := range strings.Split(schemes, ",") {
				for seed := 1; seed <= seeds; seed++ {
					js = append(js, sim.Job{Scheme: sc, Collective: c, Seed: uint64(seed)})
				}
			}
		}
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fmt.Errorf("-out: %w", err)
	}
	rows := sim.Sweep(base, js, jobs, os.Stderr)
	f, err := os.Create(filepath.Join(out, "collective.csv"))
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
			fmt.Fprintf(os.Stderr, "%s %s: %v\n", r.Scheme, r.Name(), r.Err)
		}
	}
	if doPlot {
		if _, err := sim.PlotCollectives(rows, out); err != nil {
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
