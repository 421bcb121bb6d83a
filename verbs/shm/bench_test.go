package shm

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/rdmacell/rdmacell/verbs"
)

var benchSizes = []struct {
	name string
	size int
}{{"4KiB", 4 << 10}, {"1MiB", 1 << 20}, {"64MiB", 64 << 20}}

// window is how many WRITEs each QP keeps in flight: enough that the
// engine never waits for the benchmark, few for large sizes.
func window(size int) int { return max(2, min(64, (8<<20)/size)) }

// BenchmarkWrite measures WRITE bandwidth between two devices of this
// process, with one QP and with four posting at once; compare with
// BenchmarkMemcpy of the same size in the same run.
func BenchmarkWrite(b *testing.B) {
	for _, sz := range benchSizes {
		for _, nqp := range []int{1, 4} {
			b.Run(fmt.Sprintf("%s/qps=%d", sz.name, nqp), func(b *testing.B) { benchWrite(b, sz.size, nqp) })
		}
	}
}

func benchWrite(b *testing.B, size, nqp int) {
	da, db := openDevice(b), openDevice(b)
	src := newNode(b, da, size, rw, verbs.QPConfig{})
	cq := src.cq
	qps := make([]verbs.QP, nqp)
	wrs := make([]*verbs.SendWR, nqp)
	for i := range qps {
		a := src
		if i > 0 {
			qp, err := src.pd.CreateQP(verbs.QPConfig{SendCQ: cq, RecvCQ: cq})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = qp.Close() })
			if err := qp.Modify(verbs.StateInit, nil); err != nil {
				b.Fatal(err)
			}
			a = &node{qp: qp}
		}
		dst := newNode(b, db, size, rw, verbs.QPConfig{})
		connect(b, a, dst)
		qps[i] = a.qp
		wrs[i] = write(uint64(i), src.mr, 0, dst.mr, 0, size)
	}
	fill(src.mem.Bytes(), 1)
	win := window(size)
	wc := make([]verbs.WC, 64)
	ctx := context.Background()
	// Map the targets before timing: the first WRITE into a region
	// fetches and maps its memory file.
	for i, wr := range wrs {
		if _, err := qps[i].PostSend(wr); err != nil {
			b.Fatal(err)
		}
	}
	for n := 0; n < nqp; {
		n += reap(b, ctx, cq, wc)
	}
	b.SetBytes(int64(size * nqp))
	b.ReportAllocs()
	b.ResetTimer()
	outstanding := 0
	for i := 0; i < b.N; i++ {
		for _, wr := range wrs {
			for outstanding >= win*nqp {
				outstanding -= reap(b, ctx, cq, wc)
			}
			if _, err := qps[int(wr.ID)].PostSend(wr); err != nil {
				b.Fatal(err)
			}
			outstanding++
		}
	}
	for outstanding > 0 {
		outstanding -= reap(b, ctx, cq, wc)
	}
}

func reap(b *testing.B, ctx context.Context, cq verbs.CQ, wc []verbs.WC) int {
	n, err := cq.Wait(ctx, wc)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range wc[:n] {
		if c.Status != verbs.StatusSuccess {
			b.Fatalf("completion %+v", c)
		}
	}
	return n
}

// BenchmarkMemcpy is the reference for BenchmarkWrite: copy() between
// allocations of the same size, by one goroutine and by four at once
// (each its own pair, like four QPs).
func BenchmarkMemcpy(b *testing.B) {
	for _, sz := range benchSizes {
		for _, n := range []int{1, 4} {
			b.Run(fmt.Sprintf("%s/threads=%d", sz.name, n), func(b *testing.B) { benchMemcpy(b, sz.size, n) })
		}
	}
}

func benchMemcpy(b *testing.B, size, n int) {
	src, err := verbs.Alloc(size)
	if err != nil {
		b.Fatal(err)
	}
	defer src.Free()
	fill(src.Bytes(), 1)
	dsts := make([]*verbs.Memory, n)
	for i := range dsts {
		if dsts[i], err = verbs.Alloc(size); err != nil {
			b.Fatal(err)
		}
		defer dsts[i].Free()
	}
	b.SetBytes(int64(size * n))
	b.ResetTimer()
	var wg sync.WaitGroup
	for _, dst := range dsts {
		wg.Go(func() {
			for i := 0; i < b.N; i++ {
				copy(dst.Bytes(), src.Bytes())
			}
		})
	}
	wg.Wait()
}

// BenchmarkRoundTrip measures a WRITE_WITH_IMM ping-pong of 8 bytes
// between two QPs, each side served by its own goroutine polling its CQ:
// one op is one round trip.
func BenchmarkRoundTrip(b *testing.B) {
	a, p := pair(b, 4096, verbs.QPConfig{})
	ping := writeImm(1, a.mr, 0, p.mr, 0, 8, 1)
	pong := writeImm(2, p.mr, 0, a.mr, 0, 8, 2)
	ping.Flags, pong.Flags = 0, 0
	recvA := &verbs.RecvWR{ID: 1}
	recvP := &verbs.RecvWR{ID: 2}
	for range 2 {
		if _, err := a.qp.PostRecv(recvA); err != nil {
			b.Fatal(err)
		}
		if _, err := p.qp.PostRecv(recvP); err != nil {
			b.Fatal(err)
		}
	}
	// wait polls cq for one receive completion and reposts a receive.
	wait := func(n *node, recv *verbs.RecvWR, wc []verbs.WC) {
		for n.cq.Poll(wc) == 0 {
			runtime.Gosched()
		}
		if wc[0].Status != verbs.StatusSuccess {
			panic(fmt.Sprintf("completion %+v", wc[0]))
		}
		if _, err := n.qp.PostRecv(recv); err != nil {
			panic(err)
		}
	}
	done := make(chan struct{})
	b.ReportAllocs()
	b.ResetTimer()
	go func() {
		defer close(done)
		wc := make([]verbs.WC, 1)
		for i := 0; i < b.N; i++ {
			wait(p, recvP, wc)
			if _, err := p.qp.PostSend(pong); err != nil {
				panic(err)
			}
		}
	}()
	wc := make([]verbs.WC, 1)
	for i := 0; i < b.N; i++ {
		if _, err := a.qp.PostSend(ping); err != nil {
			b.Fatal(err)
		}
		wait(a, recvA, wc)
	}
	<-done
}

// BenchmarkPostWrite8 measures posting an 8-byte signaled WRITE and
// polling its completion, which a poster executes itself.
func BenchmarkPostWrite8(b *testing.B) {
	a, p := pair(b, 4096, verbs.QPConfig{})
	wr := write(1, a.mr, 0, p.mr, 0, 8)
	wc := make([]verbs.WC, 1)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := a.qp.PostSend(wr); err != nil {
			b.Fatal(err)
		}
		for a.cq.Poll(wc) == 0 {
			runtime.Gosched()
		}
	}
}

// BenchmarkRoundTripOneGoroutine is BenchmarkRoundTrip driven by a single
// goroutine that posts and polls for both sides: with no hand-off between
// goroutines it shows what the provider itself costs per round trip.
func BenchmarkRoundTripOneGoroutine(b *testing.B) {
	a, p := pair(b, 4096, verbs.QPConfig{})
	ping := writeImm(1, a.mr, 0, p.mr, 0, 8, 1)
	pong := writeImm(2, p.mr, 0, a.mr, 0, 8, 2)
	ping.Flags, pong.Flags = 0, 0
	recvA, recvP := &verbs.RecvWR{ID: 1}, &verbs.RecvWR{ID: 2}
	if _, err := a.qp.PostRecv(recvA); err != nil {
		b.Fatal(err)
	}
	if _, err := p.qp.PostRecv(recvP); err != nil {
		b.Fatal(err)
	}
	wc := make([]verbs.WC, 1)
	step := func(from *node, wr *verbs.SendWR, to *node, recv *verbs.RecvWR) {
		if _, err := from.qp.PostSend(wr); err != nil {
			b.Fatal(err)
		}
		for to.cq.Poll(wc) == 0 {
			runtime.Gosched()
		}
		if wc[0].Status != verbs.StatusSuccess {
			b.Fatalf("completion %+v", wc[0])
		}
		if _, err := to.qp.PostRecv(recv); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		step(a, ping, p, recvP)
		step(p, pong, a, recvA)
	}
}
