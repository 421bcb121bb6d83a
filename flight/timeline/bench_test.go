package timeline

import (
	"io"
	"testing"

	"github.com/rdmacell/rdmacell/flight"
)

// fullJob is 64 ranks whose recorders are full (flight.DefaultSize
// operations each), every rank waiting on two peers.
func fullJob(b *testing.B) []*flight.Dump {
	const ranks = 64
	dumps := make([]*flight.Dump, ranks)
	for r := range dumps {
		specs := make([]opSpec, flight.DefaultSize)
		for i := range specs {
			start := float64(i) * 0.2
			specs[i] = opSpec{comm: 1, seq: uint64(i), name: "AllReduce", start: start + float64(r%7)*0.01, end: start + 0.15,
				state: flight.Done, peers: []int{(r + 1) % ranks, (r + ranks - 1) % ranks}, dir: flight.Recv,
				paths: []uint64{1 << 20, 1 << 20, 1 << 20, 1 << 20}}
		}
		dumps[r] = mkDump(b, "full", r, 201, "close", specs...)
	}
	return dumps
}

// countingWriter counts what is written to it.
type countingWriter int64

func (c *countingWriter) Write(p []byte) (int, error) {
	*c += countingWriter(len(p))
	return len(p), nil
}

// benchWrite measures write on a full job and reports the size it writes.
func benchWrite(b *testing.B, write func(io.Writer, []*flight.Dump) error) {
	dumps := fullJob(b)
	var n countingWriter
	for b.Loop() {
		n = 0
		if err := write(&n, dumps); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)/(1<<10), "KiB")
}

func BenchmarkMerge(b *testing.B)     { benchWrite(b, Merge) }
func BenchmarkRenderSVG(b *testing.B) { benchWrite(b, RenderSVG) }
