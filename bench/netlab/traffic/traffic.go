// Package traffic is the load the lab's experiments put on the fabric: a
// rank of an RDMACell job (started by cellrun) that runs AllReduce and
// AllToAll over large float32 buffers, checks every element of every
// result, and prints one line per iteration for the experiment runner.
//
// Rank 0 prints, for each operation in turn:
//
//	BEGIN op=allreduce bytes=67108864 iter=0 at_ns=...
//	ITER op=allreduce bytes=67108864 iter=0 start_ns=... end_ns=... algbw=... busbw=...
//	...
//	SUMMARY op=allreduce bytes=67108864 iters=5 wrong=0 seconds=... algbw=... busbw=... demotions=... promotions=... giveups=... resets=...
//
// Warm-up iterations have negative iter numbers. wrong counts the
// elements, over every rank and iteration, that did not hold the
// expected value; a rank that finds any makes the program fail once the
// summary is out. Each rank also reports every wrong result it gets on
// standard error, as a WRONG line naming the first wrong element, the
// iteration whose value it holds, and the first runs of wrong elements as
// byte ranges of the buffer; and, with Config.Recheck, a RECHECK line
// saying how many are still wrong a while later.
// Bandwidths are in bytes per second, busbw with the factors of
// nccl-tests (2(n-1)/n for AllReduce, (n-1)/n for AllToAll). demotions,
// promotions, giveups and resets add up, over every rank's paths, what
// the job's paths went through so far (see comm.PathStats).
package traffic

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/rdmacell/rdmacell/collectives"
	"github.com/rdmacell/rdmacell/comm"
)

// Op names a collective the program runs.
type Op string

// The collectives.
const (
	AllReduce Op = "allreduce"
	AllToAll  Op = "alltoall"
)

// Config says what to run.
type Config struct {
	// Ops run one after the other, each for Warmup+Iters iterations.
	Ops []Op
	// Bytes is the size of each rank's buffer; for AllToAll it is cut into
	// one block per rank. Rounded down to whole elements (and blocks).
	Bytes int
	// Iters are measured and printed; Warmup iterations come first.
	Iters, Warmup int
	// Timeout bounds the whole run, start-up included.
	Timeout time.Duration
	// Recheck, if positive, is how long a rank that got a wrong result
	// waits before it checks that result again, to tell data that landed
	// late from data that never landed.
	Recheck time.Duration
}

// ErrWrong says that some result held an unexpected value.
var ErrWrong = errors.New("traffic: wrong results")

// Run joins the job from the launcher's environment and runs cfg,
// printing results on out (rank 0 only) and wrong elements on errs (every
// rank).
func Run(ctx context.Context, cfg Config, out, errs io.Writer) (err error) {
	if len(cfg.Ops) == 0 || cfg.Bytes < 4 || cfg.Iters < 1 || cfg.Warmup < 0 || cfg.Timeout <= 0 {
		return fmt.Errorf("traffic: config %+v: want ops, at least 4 bytes, 1 iteration and a timeout", cfg)
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	g, err := collectives.Open(ctx, collectives.Options{})
	if err != nil {
		return fmt.Errorf("traffic: open: %w", err)
	}
	defer func() {
		if cerr := g.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("traffic: close: %w", cerr)
		}
	}()
	c := g.Comm()
	r := &runner{c: c, g: g, cfg: cfg, out: out, errs: errs}
	if c.Rank() != 0 {
		r.out = io.Discard
	}
	var wrong int64
	for _, op := range cfg.Ops {
		n, err := r.run(ctx, op)
		if err != nil {
			return err
		}
		wrong += n
	}
	if wrong > 0 {
		return fmt.Errorf("%w: %d elements", ErrWrong, wrong)
	}
	return nil
}

// runner runs the operations of one rank.
type runner struct {
	c    *comm.Comm
	g    *collectives.Group
	cfg  Config
	out  io.Writer
	errs io.Writer
}

// run runs op for the warm-up and measured iterations and returns the
// number of wrong elements over every rank.
func (r *runner) run(ctx context.Context, op Op) (int64, error) {
	n := r.c.Size()
	count := r.cfg.Bytes / 4
	factor := 2 * float64(n-1) / float64(n)
	if op == AllToAll {
		count -= count % n
		factor = float64(n-1) / float64(n)
	} else if op != AllReduce {
		return 0, fmt.Errorf("traffic: unknown op %q: want allreduce or alltoall", op)
	}
	if count == 0 {
		return 0, fmt.Errorf("traffic: %d bytes hold no element per rank for %s over %d ranks", r.cfg.Bytes, op, n)
	}
	send, err := r.alloc(count)
	if err != nil {
		return 0, err
	}
	defer r.c.Free(asBytes(send))
	recv, err := r.alloc(count)
	if err != nil {
		return 0, err
	}
	defer r.c.Free(asBytes(recv))

	bytes := count * 4
	var wrong int64
	var total time.Duration
	for it := -r.cfg.Warmup; it < r.cfg.Iters; it++ {
		fill(op, send, r.c.Rank(), n, it)
		start := time.Now()
		fmt.Fprintf(r.out, "BEGIN op=%s bytes=%d iter=%d at_ns=%d\n", op, bytes, it, start.UnixNano())
		if op == AllReduce {
			err = collectives.AllReduce(ctx, r.g, send, recv, collectives.Sum)
		} else {
			err = collectives.AllToAll(ctx, r.g, send, recv)
		}
		end := time.Now()
		if err != nil {
			return 0, fmt.Errorf("traffic: %s of %d bytes, iteration %d: %w", op, bytes, it, err)
		}
		bad, first := check(op, recv, r.c.Rank(), n, it)
		if bad > 0 {
			// Every rank says so, on stderr: the evidence for whoever
			// looks into it.
			fmt.Fprintf(r.errs, "WRONG op=%s bytes=%d iter=%d rank=%d elements=%d first_index=%d got=%g want=%g got_iter=%s runs=%s\n",
				op, bytes, it, r.c.Rank(), bad, first.Index, first.Got, first.Want,
				valueIter(op, first, count/n, r.c.Rank(), n, it), runsText(first.Runs, bad))
			if r.cfg.Recheck > 0 {
				// Data that lands after its range was handed back is right
				// by now; data that never came, or that an older copy
				// overwrote, is still wrong.
				time.Sleep(r.cfg.Recheck)
				again, firstAgain := check(op, recv, r.c.Rank(), n, it)
				fmt.Fprintf(r.errs, "RECHECK op=%s bytes=%d iter=%d rank=%d after=%v elements=%d runs=%s\n",
					op, bytes, it, r.c.Rank(), r.cfg.Recheck, again, runsText(firstAgain.Runs, again))
			}
		}
		wrong += bad
		d := end.Sub(start)
		if it >= 0 {
			total += d
		}
		algbw := float64(bytes) / d.Seconds()
		fmt.Fprintf(r.out, "ITER op=%s bytes=%d iter=%d start_ns=%d end_ns=%d algbw=%.0f busbw=%.0f\n",
			op, bytes, it, start.UnixNano(), end.UnixNano(), algbw, algbw*factor)
	}
	all := append([]int64{wrong}, pathCounts(r.c.Stats())...)
	if err := collectives.AllReduce(ctx, r.g, all, all, collectives.Sum); err != nil {
		return 0, fmt.Errorf("traffic: count wrong elements of %s: %w", op, err)
	}
	algbw := float64(bytes) * float64(r.cfg.Iters) / total.Seconds()
	fmt.Fprintf(r.out, "SUMMARY op=%s bytes=%d iters=%d wrong=%d seconds=%.6f algbw=%.0f busbw=%.0f demotions=%d promotions=%d giveups=%d resets=%d\n",
		op, bytes, r.cfg.Iters, all[0], total.Seconds(), algbw, algbw*factor, all[1], all[2], all[3], all[4])
	return all[0], nil
}

// pathCounts sums, over every path of every link of s, the times a path
// was demoted (soft timeouts), promoted, given up and reset.
func pathCounts(s comm.Stats) []int64 {
	var n [4]int64
	for _, p := range s.Peers {
		for _, l := range p.Links {
			for _, q := range l.Paths {
				n[0] += int64(q.SoftTimeouts)
				n[1] += int64(q.Promotions)
				n[2] += int64(q.GiveUps)
				n[3] += int64(q.Resets)
			}
		}
	}
	return n[:]
}

// valueIter names the iteration, this one or one of the seven before
// it, whose value the mismatch's element holds ("-2", "none"), "init" for
// the zero of a fresh buffer.
func valueIter(op Op, m Mismatch, blk, r, n, it int) string {
	if m.Got == 0 {
		return "init"
	}
	for k := 1; k < 8; k++ {
		if want := expected(op, m.Index, blk, r, n, it-k); want == m.Got {
			return strconv.Itoa(it - k)
		}
	}
	return "none"
}

// runsText lists runs of wrong elements as byte ranges of the buffer,
// start+length ("4194304+262144"), with "..." when more elements were
// wrong than the runs hold.
func runsText(runs []Span, wrong int64) string {
	var b strings.Builder
	var listed int64
	for i, run := range runs {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%d+%d", run.Start*4, (run.End-run.Start)*4)
		listed += int64(run.End - run.Start)
	}
	if listed < wrong {
		b.WriteString(",...")
	}
	return b.String()
}

// alloc returns count float32 in registered memory, which the
// collectives move without a copy.
func (r *runner) alloc(count int) ([]float32, error) {
	b, err := r.c.Alloc(count * 4)
	if err != nil {
		return nil, fmt.Errorf("traffic: allocate %d bytes: %w", count*4, err)
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(b))), count), nil
}

func asBytes(f []float32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(f))), len(f)*4)
}
