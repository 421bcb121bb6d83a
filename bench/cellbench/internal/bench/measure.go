package bench

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/rdmacell/rdmacell/collectives"
)

// maxIters bounds the calibrated number of calls per repetition.
const maxIters = 1 << 22

// measure checks (with -c) and times one form of a call.
func (b *bencher) measure(bytes int64, call func(context.Context) error, check func(context.Context) (int64, error)) (Result, error) {
	ctx := b.ctx
	res := Result{Wrong: -1, Reps: b.cfg.Reps}
	if b.cfg.Check {
		w, err := check(ctx)
		if err != nil {
			return res, fmt.Errorf("check: %w", err)
		}
		if res.Wrong, err = b.sumOverRanks(w); err != nil {
			return res, err
		}
	}
	for range b.cfg.Warmup {
		if err := call(ctx); err != nil {
			return res, fmt.Errorf("warm-up: %w", err)
		}
	}
	iters := b.cfg.Iters
	if b.cfg.RepTime > 0 {
		t, err := b.timeCalls(call, iters)
		if err != nil {
			return res, err
		}
		// Every rank derives the same count from the same maximum.
		iters = min(max(iters, int(b.cfg.RepTime.Seconds()/max(t, 1e-9))), maxIters)
	}
	res.Iters = iters
	times := make([]float64, b.cfg.Reps)
	for i := range times {
		t, err := b.timeCalls(call, iters)
		if err != nil {
			return res, err
		}
		times[i] = t
	}
	slices.Sort(times)
	med := times[len(times)/2]
	if len(times)%2 == 0 {
		med = (times[len(times)/2-1] + med) / 2
	}
	res.TimeUS, res.TimeMinUS, res.TimeMaxUS = med*1e6, times[0]*1e6, times[len(times)-1]*1e6
	res.AlgBW = float64(bytes) / med / 1e9
	res.BusBW = res.AlgBW * b.coll.busFactor(float64(b.n))
	return res, nil
}

// timeCalls returns the per-call time of iters back-to-back calls after a
// barrier, in seconds: the maximum over the ranks.
func (b *bencher) timeCalls(call func(context.Context) error, iters int) (float64, error) {
	if err := collectives.Barrier(b.ctx, b.group); err != nil {
		return 0, fmt.Errorf("barrier: %w", err)
	}
	t0 := time.Now()
	for range iters {
		if err := call(b.ctx); err != nil {
			return 0, err
		}
	}
	per := time.Since(t0).Seconds() / float64(iters)
	b.f64[0] = per
	if err := b.collMax(); err != nil {
		return 0, fmt.Errorf("maximum of the times: %w", err)
	}
	return b.f64[0], nil
}

// collMax replaces b.f64[0] with its maximum over the ranks.
func (b *bencher) collMax() error {
	return collectives.AllReduce(b.ctx, b.group, b.f64, b.f64, collectives.Max)
}

func (b *bencher) sumOverRanks(v int64) (int64, error) {
	b.i64[0] = v
	if err := collectives.AllReduce(b.ctx, b.group, b.i64, b.i64, collectives.Sum); err != nil {
		return 0, fmt.Errorf("sum of the wrong values: %w", err)
	}
	return b.i64[0], nil
}
