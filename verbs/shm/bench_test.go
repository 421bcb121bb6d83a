package shm

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

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

// BenchmarkRoundTripWait is BenchmarkRoundTrip with each side blocking in
// CQ.Wait, as a completion-driven progress loop does, instead of spinning
// on Poll: it shows how fast a parked waiter learns of a completion.
func BenchmarkRoundTripWait(b *testing.B) {
	a, p := pair(b, 4096, verbs.QPConfig{})
	ping := writeImm(1, a.mr, 0, p.mr, 0, 8, 1)
	pong := writeImm(2, p.mr, 0, a.mr, 0, 8, 2)
	ping.Flags, pong.Flags = 0, 0
	recvA, recvP := &verbs.RecvWR{ID: 1}, &verbs.RecvWR{ID: 2}
	for range 2 {
		if _, err := a.qp.PostRecv(recvA); err != nil {
			b.Fatal(err)
		}
		if _, err := p.qp.PostRecv(recvP); err != nil {
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	wait := func(n *node, recv *verbs.RecvWR, wc []verbs.WC) error {
		if _, err := n.cq.Wait(ctx, wc); err != nil {
			return err
		}
		if wc[0].Status != verbs.StatusSuccess {
			return &verbs.WCError{WC: wc[0]}
		}
		_, err := n.qp.PostRecv(recv)
		return err
	}
	done := make(chan error, 1)
	b.ReportAllocs()
	b.ResetTimer()
	go func() {
		wc := make([]verbs.WC, 1)
		for i := 0; i < b.N; i++ {
			if err := wait(p, recvP, wc); err != nil {
				done <- err
				return
			}
			if _, err := p.qp.PostSend(pong); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	wc := make([]verbs.WC, 1)
	for i := 0; i < b.N; i++ {
		if _, err := a.qp.PostSend(ping); err != nil {
			b.Fatal(err)
		}
		if err := wait(a, recvA, wc); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkImmStream measures a stream of 8-byte WRITE_WITH_IMMs, each
// signaled, with up to 64 in flight; the receiver blocks in CQ.Wait and
// reposts receives. One op is one message: a provider that waits for each
// acknowledgement before the next request pays a responder round per op.
func BenchmarkImmStream(b *testing.B) {
	const inflight = 64
	a, p := pair(b, 4096, verbs.QPConfig{RNRRetry: 7})
	wr := writeImm(1, a.mr, 0, p.mr, 0, 8, 1)
	recv := &verbs.RecvWR{ID: 2}
	for range 4 * inflight {
		if _, err := p.qp.PostRecv(recv); err != nil {
			b.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		wc := make([]verbs.WC, 16)
		for got := 0; got < b.N; {
			n, err := p.cq.Wait(ctx, wc)
			if err != nil {
				done <- err
				return
			}
			for _, c := range wc[:n] {
				if c.Status != verbs.StatusSuccess {
					done <- &verbs.WCError{WC: c}
					return
				}
				if _, err := p.qp.PostRecv(recv); err != nil {
					done <- err
					return
				}
			}
			got += n
		}
		done <- nil
	}()
	wc := make([]verbs.WC, 16)
	b.ReportAllocs()
	b.ResetTimer()
	outstanding := 0
	for i := 0; i < b.N; i++ {
		for outstanding >= inflight {
			outstanding -= reap(b, ctx, a.cq, wc)
		}
		if _, err := a.qp.PostSend(wr); err != nil {
			b.Fatal(err)
		}
		outstanding++
	}
	for outstanding > 0 {
		outstanding -= reap(b, ctx, a.cq, wc)
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkChain measures the flowcell pattern: a chain [WRITE of a cell,
// WRITE_WITH_IMM of 8 bytes] posted in one call, up to 16 chains in
// flight, the receiver blocking in CQ.Wait, for cells of 64 KiB, 256 KiB
// (cell's initial size) and 1 MiB. Compare its bandwidth with
// BenchmarkMemcpy/1MiB: chains that wait for each acknowledgement cannot
// keep the copy busy.
func BenchmarkChain(b *testing.B) {
	for _, size := range []int{64 << 10, 256 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) { benchChain(b, size) })
	}
}

func benchChain(b *testing.B, size int) {
	const inflight = 16
	a, p := pair(b, 2*size, verbs.QPConfig{RNRRetry: 7})
	fill(a.mem.Bytes(), 3)
	body := write(1, a.mr, 0, p.mr, 0, size)
	body.Flags = 0
	tail := writeImm(2, a.mr, size, p.mr, size, 8, 7)
	body.Next = tail
	recv := &verbs.RecvWR{ID: 3}
	for range 4 * inflight {
		if _, err := p.qp.PostRecv(recv); err != nil {
			b.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		wc := make([]verbs.WC, 16)
		for got := 0; got < b.N; {
			n, err := p.cq.Wait(ctx, wc)
			if err != nil {
				done <- err
				return
			}
			for _, c := range wc[:n] {
				if c.Status != verbs.StatusSuccess {
					done <- &verbs.WCError{WC: c}
					return
				}
				if _, err := p.qp.PostRecv(recv); err != nil {
					done <- err
					return
				}
			}
			got += n
		}
		done <- nil
	}()
	wc := make([]verbs.WC, 16)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	outstanding := 0
	for i := 0; i < b.N; i++ {
		for outstanding >= inflight {
			outstanding -= reap(b, ctx, a.cq, wc)
		}
		if _, err := a.qp.PostSend(body); err != nil {
			b.Fatal(err)
		}
		outstanding++
	}
	for outstanding > 0 {
		outstanding -= reap(b, ctx, a.cq, wc)
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkIdleCPU measures the CPU this process uses while two connected
// QPs have nothing to do, for two seconds, with each side's consumer in
// one of two shapes: parked in CQ.Wait without a deadline, or looping on
// CQ.Wait with a 1 ms deadline as a progress loop that also polls memory
// does. The metric is CPU time over wall time (1 = one core busy).
func BenchmarkIdleCPU(b *testing.B) {
	for _, tc := range []struct {
		name string
		tick time.Duration
	}{{"parked", 0}, {"tick=1ms", time.Millisecond}} {
		b.Run(tc.name, func(b *testing.B) {
			a, p := pair(b, 4096, verbs.QPConfig{})
			// One exchange first, so both engines have run and mapped.
			wr := write(1, a.mr, 0, p.mr, 0, 8)
			if _, err := a.qp.PostSend(wr); err != nil {
				b.Fatal(err)
			}
			reap(b, context.Background(), a.cq, make([]verbs.WC, 1))
			const window = 2 * time.Second
			var cpu, wall time.Duration
			for i := 0; i < b.N; i++ {
				ctx, cancel := context.WithTimeout(context.Background(), window)
				var wg sync.WaitGroup
				start, t0 := cpuTime(b), time.Now()
				for _, n := range []*node{a, p} {
					wg.Go(func() { idleConsumer(ctx, n.cq, tc.tick) })
				}
				wg.Wait()
				cancel()
				cpu += cpuTime(b) - start
				wall += time.Since(t0)
			}
			b.ReportMetric(float64(cpu)/float64(wall), "cpu/wall")
		})
	}
}

// idleConsumer waits on cq until ctx ends, in waits of tick (0: one wait).
func idleConsumer(ctx context.Context, cq verbs.CQ, tick time.Duration) {
	wc := make([]verbs.WC, 4)
	for ctx.Err() == nil {
		wctx, cancel := ctx, context.CancelFunc(func() {})
		if tick > 0 {
			wctx, cancel = context.WithTimeout(ctx, tick)
		}
		_, _ = cq.Wait(wctx, wc)
		cancel()
	}
}

// cpuTime is the user plus system CPU time this process has used.
func cpuTime(b *testing.B) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
