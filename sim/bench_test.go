package sim

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestEventHeapOrder(t *testing.T) {
	var q eventHeap
	r := newRNG(7)
	for i := range 1000 {
		q.push(int64(r.intn(50)), evTick, int32(i), 0)
	}
	last := event{at: -1}
	for q.len() > 0 {
		e := q.pop()
		assert.False(t, e.before(&last), "popped %+v after %+v", e, last)
		last = e
	}
}

// BenchmarkRun measures the simulator on a K=4 fat-tree at 80 % load of
// AliStorage: events per second, and allocations (per run: they come
// from flow and connection setup, not from packets).
func BenchmarkRun(b *testing.B) {
	w := aliWorkload(b)
	for _, sc := range []string{"ecmp", "conweave", "rdmacell"} {
		b.Run(sc, func(b *testing.B) {
			b.ReportAllocs()
			var ev uint64
			var pk uint64
			for b.Loop() {
				cfg := k4(sc)
				cfg.Workload, cfg.Load, cfg.Duration = w, 0.8, 500_000
				s := run(b, cfg)
				ev += s.Stats().Events
				pk += s.Stats().DataPkts
			}
			b.ReportMetric(float64(ev)/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric(float64(pk)/float64(b.N), "pkts/op")
		})
	}
}
