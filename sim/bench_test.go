package sim

import (
	"unsafe"

	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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

// The wheel pops exactly what one heap would: events pushed near and
// far, at shared instants, and with reserved sequence numbers come out
// in (at, seq) order.
func TestEventQueueMatchesHeap(t *testing.T) {
	var q eventQueue
	var ref eventHeap
	r := newRNG(3)
	now := int64(0)
	push := func(at int64) {
		q.push(at, evTick, 0, 0)
		ref.pushEvent(event{at: at, seq: q.seq, kind: evTick})
	}
	var reserved []event
	for i := range 20000 {
		for range r.intn(3) {
			switch r.intn(4) {
			case 0:
				push(now + int64(r.intn(3*wheelSize))) // some beyond the wheel
			case 1:
				push(now) // the same instant
			default:
				push(now + int64(r.intn(100)))
			}
		}
		if i%100 == 0 {
			// Sequence numbers set aside now, used later.
			first := q.reserve(2)
			reserved = append(reserved, event{seq: first, kind: evTick}, event{seq: first + 1, kind: evTick})
		}
		if len(reserved) > 0 && r.intn(10) == 0 {
			e := reserved[0]
			reserved = reserved[1:]
			e.at = now + int64(r.intn(2*wheelSize))
			q.pushSeq(e)
			ref.pushEvent(e)
		}
		if q.len() == 0 {
			continue
		}
		require.Equal(t, ref.len(), q.len())
		want, got := ref.pop(), q.pop()
		require.Equal(t, want, got, "pop %d", i)
		now = got.at
	}
}

// A packet is one cache line, and an event half of one: both are read
// once per hop, usually from memory.
func TestHotStructSizes(t *testing.T) {
	assert.Equal(t, uintptr(64), unsafe.Sizeof(packet{}))
	assert.LessOrEqual(t, unsafe.Sizeof(event{}), uintptr(32))
}
