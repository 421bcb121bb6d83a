package tcp_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rdmacell/rdmacell/verbs"
	"github.com/rdmacell/rdmacell/verbs/tcp"
)

// The WRITE benchmarks and the raw TCP stream benchmarks beside them move
// the same sizes over loopback in one run, so their ratio is the
// provider's overhead:
//
//	go test -run '^$' -bench 'Write|RawTCP|PingPong|Lone' ./verbs/tcp/

var benchSizes = []struct {
	name string
	n    int
}{{"4KiB", 4 << 10}, {"64KiB", 64 << 10}, {"1MiB", 1 << 20}, {"64MiB", 64 << 20}}

// rawChunk is the size of one write of the raw stream benchmark.
const rawChunk = 1 << 20

// benchPair is a connected pair of QPs with their CQs.
type benchPair struct {
	dst          verbs.MR // the pair's own target, so pairs share no cache lines
	a, b         verbs.QP
	aSend, bRecv verbs.CQ
	aRecv, bSend verbs.CQ
}

type benchEnv struct {
	devs     [2]*tcp.Device
	pds      [2]verbs.PD
	mems     []*verbs.Memory
	src, dst verbs.MR
}

func newBenchEnv(b *testing.B, size int) *benchEnv {
	e := &benchEnv{}
	b.Cleanup(func() {
		for _, d := range e.devs {
			if d != nil {
				d.Close()
			}
		}
		for _, m := range e.mems {
			m.Free()
		}
	})
	for i := range e.devs {
		// Closing the devices at the end may fail a QP whose last request
		// waits for a lazy acknowledgement; that is no news here.
		d, err := tcp.Open(tcp.Options{Secret: testSecret, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		e.devs[i] = d
		if e.pds[i], err = d.AllocPD(); err != nil {
			b.Fatal(err)
		}
	}
	e.src = e.region(b, 0, size, verbs.AccessLocalWrite)
	e.dst = e.region(b, 1, size, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	return e
}

func (e *benchEnv) region(b *testing.B, side, size int, access verbs.Access) verbs.MR {
	m, err := verbs.Alloc(size)
	if err != nil {
		b.Fatal(err)
	}
	e.mems = append(e.mems, m)
	mr, err := e.pds[side].RegMR(m.Bytes(), access)
	if err != nil {
		b.Fatal(err)
	}
	return mr
}

// pair connects a QP of each device. With shared set, each side's sends
// and receives complete into one CQ, as the cell driver's do (aSend is
// aRecv, bSend is bRecv).
func (e *benchEnv) pair(b *testing.B, shared bool) *benchPair {
	p := &benchPair{}
	mk := func(side int) (verbs.QP, verbs.CQ, verbs.CQ) {
		s, err := e.devs[side].CreateCQ(1024)
		if err != nil {
			b.Fatal(err)
		}
		r := s
		if !shared {
			if r, err = e.devs[side].CreateCQ(1024); err != nil {
				b.Fatal(err)
			}
		}
		q, err := e.pds[side].CreateQP(verbs.QPConfig{SendCQ: s, RecvCQ: r, RNRRetry: 7})
		if err != nil {
			b.Fatal(err)
		}
		if err := q.Modify(verbs.StateInit, nil); err != nil {
			b.Fatal(err)
		}
		return q, s, r
	}
	p.a, p.aSend, p.aRecv = mk(0)
	p.b, p.bSend, p.bRecv = mk(1)
	ea, eb := p.a.Endpoint(), p.b.Endpoint()
	for _, s := range []struct {
		q  verbs.QP
		ep *verbs.Endpoint
	}{{p.a, &eb}, {p.b, &ea}} {
		if err := s.q.Modify(verbs.StateRTR, s.ep); err != nil {
			b.Fatal(err)
		}
		if err := s.q.Modify(verbs.StateRTS, nil); err != nil {
			b.Fatal(err)
		}
	}
	return p
}

// writes posts n WRITEs of size bytes on p and waits until the last is
// acknowledged, keeping a window of requests in flight and asking for a
// completion every sigEvery requests.
func (p *benchPair) writes(ctx context.Context, src verbs.MR, size, n int) error {
	dst := p.dst
	window := min(256, max(2, (4<<20)/size))
	sigEvery := max(1, window/4)
	wr := verbs.SendWR{Opcode: verbs.OpWrite, SGL: []verbs.SGE{{Addr: src.Addr(), Length: uint32(size), LKey: src.LKey()}},
		RemoteAddr: dst.Addr(), RKey: dst.RKey()}
	wc := make([]verbs.WC, 16)
	posted, done := 0, 0
	for done < n {
		for posted < n && posted-done < window {
			wr.ID = uint64(posted)
			wr.Flags = 0
			if (posted+1)%sigEvery == 0 || posted+1 == n {
				wr.Flags = verbs.Signaled
			}
			if _, err := p.a.PostSend(&wr); err != nil {
				return err
			}
			posted++
		}
		k, err := p.aSend.Wait(ctx, wc)
		if err != nil {
			return err
		}
		for _, c := range wc[:k] {
			if c.Status != verbs.StatusSuccess {
				return &verbs.WCError{WC: c}
			}
			done = int(c.ID) + 1
		}
	}
	return nil
}

func BenchmarkWrite(b *testing.B) {
	for _, qps := range []int{1, 4} {
		for _, sz := range benchSizes {
			b.Run(fmt.Sprintf("qps=%d/%s", qps, sz.name), func(b *testing.B) {
				e := newBenchEnv(b, sz.n)
				pairs := make([]*benchPair, qps)
				for i := range pairs {
					pairs[i] = e.pair(b, false)
					pairs[i].dst = e.dst
					if i > 0 {
						pairs[i].dst = e.region(b, 1, sz.n, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
					}
					// Warm up: the connection comes up and the first writev
					// sizes its buffers.
					if err := pairs[i].writes(context.Background(), e.src, min(sz.n, 4096), 4); err != nil {
						b.Fatal(err)
					}
				}
				b.SetBytes(int64(sz.n))
				b.ResetTimer()
				var wg sync.WaitGroup
				errs := make(chan error, qps)
				for i, p := range pairs {
					n := b.N / qps
					if i < b.N%qps {
						n++
					}
					wg.Go(func() {
						if n > 0 {
							errs <- p.writes(context.Background(), e.src, sz.n, n)
						}
					})
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					if err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkRawTCP moves the same messages over plain loopback TCP
// connections: each message is written in writes of at most rawChunk
// bytes from a source of the message's size and read, in reads of at most
// rawChunk bytes, into a destination of the message's size, all memory
// from verbs.Alloc. It is the reference for BenchmarkWrite, which places
// each message into a region of its size too.
func BenchmarkRawTCP(b *testing.B) {
	for _, streams := range []int{1, 4} {
		for _, sz := range benchSizes {
			b.Run(fmt.Sprintf("streams=%d/%s", streams, sz.name), func(b *testing.B) {
				src, err := verbs.Alloc(sz.n)
				if err != nil {
					b.Fatal(err)
				}
				defer src.Free()
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					b.Fatal(err)
				}
				defer ln.Close()
				type stream struct {
					w   net.Conn
					r   net.Conn
					buf *verbs.Memory
				}
				ss := make([]stream, streams)
				for i := range ss {
					w, err := net.Dial("tcp", ln.Addr().String())
					if err != nil {
						b.Fatal(err)
					}
					r, err := ln.Accept()
					if err != nil {
						b.Fatal(err)
					}
					buf, err := verbs.Alloc(sz.n)
					if err != nil {
						b.Fatal(err)
					}
					ss[i] = stream{w, r, buf}
					defer func() { w.Close(); r.Close(); buf.Free() }()
				}
				b.SetBytes(int64(sz.n))
				b.ResetTimer()
				var wg sync.WaitGroup
				errs := make(chan error, 2*streams)
				for i, s := range ss {
					n := b.N / streams
					if i < b.N%streams {
						n++
					}
					wg.Go(func() {
						dst := s.buf.Bytes()
						for range n {
							for off := 0; off < len(dst); {
								k, err := s.r.Read(dst[off:min(off+rawChunk, len(dst))])
								if err != nil {
									errs <- err
									return
								}
								off += k
							}
						}
					})
					wg.Go(func() {
						for range n {
							for off := 0; off < sz.n; off += rawChunk {
								if _, err := s.w.Write(src.Bytes()[off:min(off+rawChunk, sz.n)]); err != nil {
									errs <- err
									return
								}
							}
						}
					})
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					b.Fatal(err)
				}
			})
		}
	}
}

// BenchmarkPingPong measures the round trip of an 8-byte WRITE_WITH_IMM
// answered by another: the time one op takes is one round trip.
func BenchmarkPingPong(b *testing.B) {
	e := newBenchEnv(b, 4096)
	p := e.pair(b, false)
	src := e.region(b, 1, 4096, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	ping := verbs.SendWR{Opcode: verbs.OpWriteImm, SGL: []verbs.SGE{{Addr: e.src.Addr(), Length: 8, LKey: e.src.LKey()}},
		RemoteAddr: e.dst.Addr(), RKey: e.dst.RKey()}
	pong := verbs.SendWR{Opcode: verbs.OpWriteImm, SGL: []verbs.SGE{{Addr: src.Addr(), Length: 8, LKey: src.LKey()}},
		RemoteAddr: e.src.Addr(), RKey: 0}
	// The pong writes back into the pinger's source region, which needs
	// remote write access there.
	back := e.region(b, 0, 4096, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	pong.RemoteAddr, pong.RKey = back.Addr(), back.RKey()
	recv := verbs.RecvWR{}
	ctx := context.Background()
	done := make(chan error, 1)
	go func() {
		wc := make([]verbs.WC, 1)
		for range b.N {
			if _, err := p.b.PostRecv(&recv); err != nil {
				done <- err
				return
			}
			if _, err := p.bRecv.Wait(ctx, wc); err != nil {
				done <- err
				return
			}
			if _, err := p.b.PostSend(&pong); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	wc := make([]verbs.WC, 1)
	b.ResetTimer()
	for range b.N {
		if _, err := p.a.PostRecv(&recv); err != nil {
			b.Fatal(err)
		}
		if _, err := p.a.PostSend(&ping); err != nil {
			b.Fatal(err)
		}
		waitOK(ctx, b, p.aRecv, wc)
	}
	b.StopTimer()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkPingPongSignaled is BenchmarkPingPong as the cell engine
// does it: every request signaled, and each side's sends and receives
// completing into one CQ, which the side waits on until its receive
// completes. The time one op takes is one round trip; the
// acknowledgements of both requests are part of it.
func BenchmarkPingPongSignaled(b *testing.B) {
	e := newBenchEnv(b, 4096)
	p := e.pair(b, true)
	back := e.region(b, 0, 4096, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	src := e.region(b, 1, 4096, verbs.AccessLocalWrite)
	ping := verbs.SendWR{Opcode: verbs.OpWriteImm, Flags: verbs.Signaled,
		SGL:        []verbs.SGE{{Addr: e.src.Addr(), Length: 8, LKey: e.src.LKey()}},
		RemoteAddr: e.dst.Addr(), RKey: e.dst.RKey()}
	pong := verbs.SendWR{Opcode: verbs.OpWriteImm, Flags: verbs.Signaled,
		SGL:        []verbs.SGE{{Addr: src.Addr(), Length: 8, LKey: src.LKey()}},
		RemoteAddr: back.Addr(), RKey: back.RKey()}
	ctx := context.Background()
	done := make(chan error, 1)
	go func() {
		w := &waiter{q: p.b, cq: p.bSend}
		for range b.N {
			if err := w.recv(ctx); err != nil {
				done <- err
				return
			}
			if _, err := p.b.PostSend(&pong); err != nil {
				done <- err
				return
			}
			w.sends++
		}
		done <- w.drain(ctx)
	}()
	w := &waiter{q: p.a, cq: p.aSend}
	b.ResetTimer()
	for range b.N {
		if _, err := p.a.PostRecv(&verbs.RecvWR{}); err != nil {
			b.Fatal(err)
		}
		if _, err := p.a.PostSend(&ping); err != nil {
			b.Fatal(err)
		}
		w.sends++
		w.posted = true
		if err := w.recv(ctx); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.drain(ctx); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkLoneSignaled measures the completion of a signaled 8-byte
// request nobody answers: post, wait for its completion, repeat. The
// responder's consumer waits in its CQ for the receive each
// WRITE_WITH_IMM consumes (op=writeimm), or has nothing to do (op=write).
// The time one op takes is the acknowledgement's round trip.
func BenchmarkLoneSignaled(b *testing.B) {
	for _, op := range []verbs.Opcode{verbs.OpWrite, verbs.OpWriteImm} {
		name := "write"
		if op == verbs.OpWriteImm {
			name = "writeimm"
		}
		b.Run("op="+name, func(b *testing.B) {
			e := newBenchEnv(b, 4096)
			p := e.pair(b, true)
			wr := verbs.SendWR{Opcode: op, Flags: verbs.Signaled,
				SGL:        []verbs.SGE{{Addr: e.src.Addr(), Length: 8, LKey: e.src.LKey()}},
				RemoteAddr: e.dst.Addr(), RKey: e.dst.RKey()}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			if op == verbs.OpWriteImm {
				for range 64 {
					if _, err := p.b.PostRecv(&verbs.RecvWR{}); err != nil {
						b.Fatal(err)
					}
				}
				go func() {
					wc := make([]verbs.WC, 16)
					for {
						n, err := p.bSend.Wait(ctx, wc)
						if err != nil {
							done <- nil
							return
						}
						for range n {
							if _, err := p.b.PostRecv(&verbs.RecvWR{}); err != nil {
								done <- err
								return
							}
						}
					}
				}()
			} else {
				close(done)
			}
			wc := make([]verbs.WC, 1)
			b.ResetTimer()
			for range b.N {
				if _, err := p.a.PostSend(&wr); err != nil {
					b.Fatal(err)
				}
				waitOK(ctx, b, p.aSend, wc)
			}
			b.StopTimer()
			cancel()
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		})
	}
}

// waitOK waits for one completion into wc[0] and fails b unless it
// succeeded.
func waitOK(ctx context.Context, b *testing.B, cq verbs.CQ, wc []verbs.WC) {
	if _, err := cq.Wait(ctx, wc[:1]); err != nil {
		b.Fatal(err)
	}
	if wc[0].Status != verbs.StatusSuccess {
		b.Fatal(&verbs.WCError{WC: wc[0]})
	}
}

// waiter reaps one side's shared CQ: send completions, which it counts
// down, and the receive it waits for.
type waiter struct {
	q      verbs.QP
	cq     verbs.CQ
	wc     [8]verbs.WC
	sends  int  // send completions still to come
	posted bool // a receive is posted (the pinger posts its own)
}

// recv waits for the next receive completion, posting the receive first
// unless the caller did.
func (w *waiter) recv(ctx context.Context) error {
	if !w.posted {
		if _, err := w.q.PostRecv(&verbs.RecvWR{}); err != nil {
			return err
		}
	}
	w.posted = false
	for {
		n, err := w.cq.Wait(ctx, w.wc[:])
		if err != nil {
			return err
		}
		got := false
		for _, c := range w.wc[:n] {
			if c.Status != verbs.StatusSuccess {
				return &verbs.WCError{WC: c}
			}
			if c.Opcode == verbs.OpRecvWriteImm {
				got = true
			} else {
				w.sends--
			}
		}
		if got {
			return nil
		}
	}
}

// drain waits for the send completions still to come.
func (w *waiter) drain(ctx context.Context) error {
	for w.sends > 0 {
		n, err := w.cq.Wait(ctx, w.wc[:])
		if err != nil {
			return err
		}
		for _, c := range w.wc[:n] {
			if c.Status != verbs.StatusSuccess {
				return &verbs.WCError{WC: c}
			}
			w.sends--
		}
	}
	return nil
}

// BenchmarkRawTCPPingPong is the same round trip with 8-byte messages on a
// plain loopback TCP connection.
func BenchmarkRawTCPPingPong(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	s, err := ln.Accept()
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	go func() {
		var m [8]byte
		for {
			if _, err := io.ReadFull(s, m[:]); err != nil {
				return
			}
			if _, err := s.Write(m[:]); err != nil {
				return
			}
		}
	}()
	var m [8]byte
	b.ResetTimer()
	for range b.N {
		if _, err := c.Write(m[:]); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c, m[:]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkIdleCPU measures the CPU this process uses while a connected
// pair of QPs has nothing to do, for two seconds, each side's consumer
// parked in CQ.Wait, or looping on CQ.Wait with a 1 ms deadline as a
// progress loop that also polls memory does. The metric is CPU time over
// wall time (1 = one core busy).
func BenchmarkIdleCPU(b *testing.B) {
	for _, tc := range []struct {
		name string
		tick time.Duration
	}{{"parked", 0}, {"tick=1ms", time.Millisecond}} {
		b.Run(tc.name, func(b *testing.B) {
			e := newBenchEnv(b, 4096)
			p := e.pair(b, false)
			var cpu, wall time.Duration
			for i := 0; i < b.N; i++ {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				var wg sync.WaitGroup
				start, t0 := cpuTime(b), time.Now()
				for _, cq := range []verbs.CQ{p.aSend, p.aRecv, p.bSend, p.bRecv} {
					wg.Go(func() { idleConsumer(ctx, cq, tc.tick) })
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
