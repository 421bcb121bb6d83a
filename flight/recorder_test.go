package flight

import (
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRecorderKeepsTheLastOperations(t *testing.T) {
	r := New(4, nil)
	var hs []Handle
	for i := range 6 {
		hs = append(hs, r.Begin(&Op{Comm: 1, Seq: uint64(i), Name: "AllReduce", Bytes: 8}))
	}
	// The first two were overwritten while running: ending them is a no-op.
	r.End(hs[0], nil)
	r.Wait(hs[1], 3, 2, Recv)
	r.Wait(hs[5], 1, 3, Send)
	r.Wait(hs[5], 2, 1, Recv)
	r.Wait(hs[5], 3, 3, Recv)
	r.End(hs[2], nil)
	r.End(hs[3], errors.New("boom"))

	ops := r.Ops()
	require.Len(t, ops, 4)
	require.Equal(t, uint64(2), ops[0].Seq)
	require.Equal(t, Done, ops[0].State)
	require.Equal(t, Failed, ops[1].State)
	require.Equal(t, "boom", ops[1].Err)

	open := r.Open(nil)
	require.Len(t, open, 2)
	require.Equal(t, []uint64{4, 5}, []uint64{open[0].Seq, open[1].Seq})
	require.Equal(t, []int{3, 1}, open[1].Peers())
	require.Equal(t, 3, open[1].Step)
	require.Equal(t, Recv, open[1].Dir)
	require.Equal(t, 3, open[1].Peer)

	last, ok := r.Last(1)
	require.True(t, ok)
	require.Equal(t, uint64(5), last.Seq)
	_, ok = r.Last(2)
	require.False(t, ok)

	var count, failed uint64
	h := r.Histograms()
	h.Each(func(name string, class int, h *Histogram) {
		require.Equal(t, "AllReduce", name)
		require.Equal(t, 0, class)
		count, failed = h.Count, h.Failed
	})
	require.Equal(t, uint64(2), count)
	require.Equal(t, uint64(1), failed)
}

func TestRecorderCountsTrafficDuringAnOperation(t *testing.T) {
	var now Traffic
	r := New(8, func() Traffic { return now })
	now.Cells[1], now.Bytes[1], now.Resets = 10, 1000, 1
	h := r.Begin(&Op{Name: "Barrier"})
	now.Cells[1], now.Bytes[1], now.Cells[3], now.Resets = 15, 1500, 2, 3
	r.End(h, nil)
	op := r.Ops()[0]
	require.Equal(t, uint64(5), op.Traffic.Cells[1])
	require.Equal(t, uint64(500), op.Traffic.Bytes[1])
	require.Equal(t, uint64(2), op.Traffic.Cells[3])
	require.Equal(t, uint64(2), op.Traffic.Resets)
}

func TestRecordingAllocatesNothing(t *testing.T) {
	var tr Traffic
	r := New(16, func() Traffic { return tr })
	op := &Op{Comm: 1, Name: "AllReduce", Algorithm: "ring", DType: "float32", Count: 2, Bytes: 8}
	allocs := testing.AllocsPerRun(1000, func() {
		h := r.Begin(op)
		r.Wait(h, 0, 1, Recv)
		r.End(h, nil)
	})
	require.Zero(t, allocs)
}

func TestBuckets(t *testing.T) {
	for _, c := range []struct {
		d time.Duration
		b int
	}{
		{0, 0}, {time.Microsecond, 0}, {1500 * time.Nanosecond, 1}, {2 * time.Microsecond, 1},
		{3 * time.Microsecond, 2}, {1024 * time.Microsecond, 10}, {1025 * time.Microsecond, 11},
		{100 * time.Hour, NumBuckets - 1},
	} {
		require.Equal(t, c.b, bucket(c.d), "%v", c.d)
		if c.b < NumBuckets-1 {
			require.LessOrEqual(t, c.d, BucketBound(c.b))
		}
	}
	require.Equal(t, "le1KiB", SizeClassName(0))
	require.Equal(t, "gt16MiB", SizeClassName(NumSizeClasses-1))
	require.Equal(t, 1, sizeClass(1025))
}

func TestDumpRoundTrip(t *testing.T) {
	var tr Traffic
	r := New(8, func() Traffic { return tr })
	h := r.Begin(&Op{Comm: 3, Seq: 7, Name: "AllGather", Algorithm: "ring", DType: "int32", Count: 4, Bytes: 16})
	r.Wait(h, 2, 1, Recv)
	tr.Cells[2], tr.Bytes[2] = 4, 64
	r.End(h, errors.New("peer 1 died"))
	r.Begin(&Op{Comm: 3, Seq: 8, Name: "Barrier"})

	dir := t.TempDir()
	d := &Dump{Job: "j", Rank: 2, Host: "h", PID: 9, Reason: "requested", Time: time.Now(), Ops: r.Ops()}
	require.NoError(t, d.WriteFile(dir))
	got, err := ReadFile(filepath.Join(dir, FileName(2)))
	require.NoError(t, err)
	require.Len(t, got.Ops, 2)
	for i := range got.Ops {
		want := d.Ops[i]
		require.True(t, want.Start.Equal(got.Ops[i].Start))
		require.True(t, want.End.Equal(got.Ops[i].End))
		want.Start, want.End = got.Ops[i].Start, got.Ops[i].End
		require.Equal(t, want, got.Ops[i])
	}
	require.Equal(t, Failed, got.Ops[0].State)
	require.Equal(t, Running, got.Ops[1].State)
}

// What recording costs an operation: Begin, two waits and End, with the
// transport's counters read at both ends as comm reads them (four paths).
func BenchmarkRecordOperation(b *testing.B) {
	var counters [8]atomic.Uint64
	r := New(0, func() Traffic {
		var t Traffic
		for i := range 4 {
			t.Cells[i] = counters[2*i].Load()
			t.Bytes[i] = counters[2*i+1].Load()
		}
		return t
	})
	op := &Op{Comm: 1, Name: "AllReduce", Algorithm: "ring", DType: "float32", Count: 2, Bytes: 8}
	b.ReportAllocs()
	for b.Loop() {
		h := r.Begin(op)
		r.Wait(h, 0, 1, Recv)
		r.Wait(h, 1, 2, Send)
		r.End(h, nil)
	}
}

// A trace file is read from disk, perhaps another version's or damaged:
// any input decodes to an operation or an error, never a panic, and what
// decodes encodes again to the same operation.
func FuzzOpJSON(f *testing.F) {
	r := New(4, nil)
	h := r.Begin(&Op{Comm: 1, Seq: 2, Name: "AllReduce", Count: 3, Bytes: 12})
	r.Wait(h, 1, 2, Memory)
	r.End(h, errors.New("x"))
	seed, err := r.Ops()[0].MarshalJSON()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte(`{"state":"running","peers":[1,2,3,4,5,6,7,8,9,10],"path_cells":[1,2,3,4,5,6,7,8,9]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var o Op
		if o.UnmarshalJSON(b) != nil {
			return
		}
		out, err := o.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		var back Op
		if err := back.UnmarshalJSON(out); err != nil {
			t.Fatalf("%s does not decode again: %v", out, err)
		}
		if !back.Start.Equal(o.Start) || !back.End.Equal(o.End) {
			t.Fatalf("times changed: %s", out)
		}
		back.Start, back.End = o.Start, o.End
		if back != o {
			t.Fatalf("%+v became %+v", o, back)
		}
	})
}
