package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strconv"
	"unsafe"

	"github.com/rdmacell/rdmacell/collectives"
	"github.com/rdmacell/rdmacell/comm"
)

// bencher holds what one run shares across sizes.
type bencher struct {
	ctx     context.Context
	cfg     Config
	coll    *collective
	typ     elemType
	op      collectives.Op
	sizes   []int64
	comm    *comm.Comm
	group   *collectives.Group
	rank, n int
	out     io.Writer // nil on every rank but 0
	rows    []Row
	// Registered one-element buffers for the maximum of the times and the
	// sum of the wrong values.
	f64 []float64
	i64 []int64
}

// Run joins the job described by the launcher's environment, measures
// cfg's collective and writes the table to out on rank 0. It returns an
// error if the run failed or any value was wrong.
func Run(ctx context.Context, cfg Config, out io.Writer) (err error) {
	if err := cfg.validate(); err != nil {
		return err
	}
	b := &bencher{ctx: ctx, cfg: cfg, coll: collectiveByName(cfg.Collective)}
	b.typ, _ = typeByName(cfg.Type)
	b.op, _ = opByName(cfg.Op)
	b.sizes = Sizes(cfg.MinBytes, cfg.MaxBytes, cfg.Factor, cfg.Step)

	b.group, err = collectives.Open(ctx, collectives.Options{
		Comm:         comm.Options{Policy: comm.Policy(cfg.Policy), Paths: cfg.Paths},
		Algorithm:    cfg.Algorithm,
		ChunkBytes:   cfg.Chunk,
		Reproducible: cfg.Reproducible,
		Exact:        cfg.Exact,
	})
	if err != nil {
		return fmt.Errorf("join the job: %w", err)
	}
	defer func() { err = errors.Join(err, b.group.Close()) }()
	b.comm = b.group.Comm()
	b.rank, b.n = b.comm.Rank(), b.comm.Size()
	if cfg.Root < 0 || cfg.Root >= b.n {
		return fmt.Errorf("root %d: want 0 <= -r < %d ranks", cfg.Root, b.n)
	}
	if b.f64, b.i64, err = scalars(b.comm); err != nil {
		return err
	}
	if b.rank == 0 {
		b.out = out
	}
	if cfg.CPUProfile != "" {
		stop, err := startProfile(cfg.CPUProfile + "." + strconv.Itoa(b.rank))
		if err != nil {
			return err
		}
		defer stop()
	}
	b.printPreamble()
	if err := b.typ.run(b); err != nil {
		return err
	}
	if b.out != nil {
		printFooter(b.out, b.rows)
	}
	if cfg.Idle > 0 {
		if err := b.measureIdle(cfg.Idle); err != nil {
			return err
		}
	}
	if cfg.PathsReport {
		if err := b.pathsReport(); err != nil {
			return err
		}
	}
	return b.finish()
}

// scalars allocates the registered one-element buffers.
func scalars(c *comm.Comm) ([]float64, []int64, error) {
	raw, err := c.Alloc(16)
	if err != nil {
		return nil, nil, fmt.Errorf("allocate registered memory: %w", err)
	}
	p := unsafe.Pointer(unsafe.SliceData(raw))
	return unsafe.Slice((*float64)(p), 1), unsafe.Slice((*int64)(unsafe.Add(p, 8)), 1), nil
}

func startProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

func (b *bencher) printPreamble() {
	if b.out == nil {
		return
	}
	transport := b.comm.Transport((b.rank + 1) % b.n)
	policy, paths := b.cfg.Policy, "default"
	if policy == "" {
		policy = "default"
	}
	if b.cfg.Paths > 0 {
		paths = strconv.Itoa(b.cfg.Paths)
	}
	fmt.Fprintf(b.out, "# cellbench %s: %d ranks, transport %s, algorithm %s, policy %s, paths %s\n",
		b.coll.name, b.n, transport, b.cfg.Algorithm, policy, paths)
	fmt.Fprintf(b.out, "# iters %d, warm-up %d, repetitions %d, check %v\n#\n",
		b.cfg.Iters, b.cfg.Warmup, b.cfg.Reps, b.cfg.Check)
	printHeader(b.out)
}

// emit prints a finished row on rank 0 and keeps it for the files.
func (b *bencher) emit(r Row) {
	b.rows = append(b.rows, r)
	if b.out != nil {
		printRow(b.out, r)
	}
}

// finish writes the files and reports wrong values as an error, so that
// the exit status says whether the run was correct.
func (b *bencher) finish() error {
	if b.out != nil && b.cfg.JSONFile != "" {
		if err := writeJSON(b.cfg.JSONFile, b.rows); err != nil {
			return err
		}
	}
	if b.out != nil && b.cfg.CSVFile != "" {
		label := b.cfg.Label
		if label == "" {
			label = "cellbench"
		}
		if err := writeCSV(b.cfg.CSVFile, label, b.cfg.Run, b.coll, b.rows); err != nil {
			return err
		}
	}
	var wrong int64
	for _, r := range b.rows {
		wrong += max(r.OutOfPlace.Wrong, 0) + max(r.InPlace.Wrong, 0)
	}
	if wrong > 0 {
		return fmt.Errorf("%d wrong values", wrong)
	}
	return nil
}
