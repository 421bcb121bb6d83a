package driver

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/cell"
	"github.com/rdmacell/rdmacell/verbs"
	"github.com/rdmacell/rdmacell/verbs/fault"
)

// benchBytes is what one benchmark operation moves.
const benchBytes = 64 << 20

// Throughput of the driver and engine against raw verbs WRITEs over the
// same kind of QPs, in one run: 64 MiB per operation over 1 and 4 paths of
// each provider, without the fault wrapper. The driver runs with adaptive
// cell sizes and with cells of the raw benchmarks' 1 MiB chunks.
func BenchmarkThroughput(b *testing.B) {
	for _, p := range providers {
		for _, paths := range []int{1, 4} {
			b.Run(fmt.Sprintf("%s/paths=%d/raw", p.name, paths), func(b *testing.B) { benchRaw(b, p, paths, false) })
			b.Run(fmt.Sprintf("%s/paths=%d/rawchain", p.name, paths), func(b *testing.B) { benchRaw(b, p, paths, true) })
			for _, cs := range []int64{0, 1 << 20} {
				name := "driver"
				if cs != 0 {
					name = "driver-cell1MiB" // the raw benchmarks' chunk
				}
				b.Run(fmt.Sprintf("%s/paths=%d/%s", p.name, paths, name), func(b *testing.B) {
					cfg := testConfig()
					cfg.Paths, cfg.CellSize = paths, cs
					benchDriver(b, newPairWith(b, p, cfg, false), nil)
				})
			}
		}
	}
}

// Four paths, one of them delayed by the fault wrapper: the one a static
// hash puts the connection on, as a flow hashed onto a congested link.
// Adaptive placement, ECMP and spraying in one run.
func BenchmarkMultipathDelayed(b *testing.B) {
	const delay = 20 * time.Millisecond
	for _, p := range providers {
		for _, policy := range []string{"adaptive", "ecmp", "spray"} {
			b.Run(fmt.Sprintf("%s/%s", p.name, policy), func(b *testing.B) {
				cfg := testConfig()
				cfg.Policy = policy
				pr := newPairWith(b, p, cfg, true)
				slow := ecmpPath(b, cfg)
				benchDriver(b, pr, func() {
					pr.a.qp(slow).Inject(fault.Fault{Kind: fault.Delay, Delay: delay})
				})
			})
		}
	}
}

// ecmpPath returns the path ECMP puts the connection from A to B on.
func ecmpPath(b testing.TB, cfg Config) int {
	cfg.Peer, cfg.Policy = "B", "ecmp"
	cfg.Device, cfg.PD = struct{ verbs.Device }{}, struct{ verbs.PD }{}
	r, err := cfg.resolve()
	require.NoError(b, err)
	infos := make([]cell.PathInfo, cfg.Paths)
	for i := range infos {
		infos[i] = cell.PathInfo{State: cell.PathUp, Credits: 1}
	}
	return r.eng.Policy.Pick(infos, 1)
}

// benchDriver moves benchBytes from A to B per operation, as one range.
// The first transfer, which maps the memory at both ends, is not timed;
// then setup runs, if given.
func benchDriver(b *testing.B, pr *pair, setup func()) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	src, dst := pr.a.region(benchBytes), pr.b.region(benchBytes)
	fill(src.Bytes(), 1)
	move := func() {
		r, err := pr.b.conn.Recv(dst, 0, benchBytes)
		require.NoError(b, err)
		s, err := pr.a.conn.Send(src, 0, benchBytes)
		require.NoError(b, err)
		_, err = s.Wait(ctx)
		require.NoError(b, err)
		_, err = r.Wait(ctx)
		require.NoError(b, err)
	}
	move()
	if setup != nil {
		setup()
	}
	before := pr.a.conn.Stats()
	b.SetBytes(benchBytes)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		move()
	}
	b.StopTimer()
	after := pr.a.conn.Stats()
	cells := after.Engine.CellsPosted - before.Engine.CellsPosted
	b.ReportMetric(float64(cells)/float64(b.N), "cells/op")
	b.ReportMetric(float64(after.Engine.GiveUps-before.Engine.GiveUps)/float64(b.N), "giveups/op")
	require.Equal(b, -1, firstDiff(src.Bytes(), dst.Bytes()))
}

// benchRaw moves benchBytes per operation with plain signaled WRITEs of
// rawChunk bytes, round robin over the paths, and waits for all of them.
// With chain, each chunk is posted as the engine posts a cell: a WRITE of
// all but the last 4 KiB linked to a signaled WRITE_WITH_IMM, which
// consumes a receive posted at the other end; that isolates what the
// signalling request costs the provider from what the driver adds.
func benchRaw(b *testing.B, p provider, paths int, chain bool) {
	const rawChunk, mtu = 1 << 20, 4096
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	a, z := openEndWith(b, p, "A", false), openEndWith(b, p, "B", false)
	var cqs []verbs.CQ
	var qps []verbs.QP
	b.Cleanup(func() {
		for _, q := range qps {
			_ = q.Close()
		}
		for _, cq := range cqs {
			_ = cq.Close()
		}
		for _, e := range []*end{a, z} {
			for _, mr := range e.mrs {
				_ = mr.Close()
			}
			_ = e.dev.Close()
			for _, m := range e.mems {
				_ = m.Free()
			}
		}
	})
	src, dst := a.region(benchBytes), z.region(benchBytes)
	fill(src.Bytes(), 1)
	cq := func(e *end) verbs.CQ {
		c, err := e.dev.CreateCQ(1024)
		require.NoError(b, err)
		cqs = append(cqs, c)
		return c
	}
	acq, zcq := cq(a), cq(z)
	mk := func(e *end, c verbs.CQ) verbs.QP {
		q, err := e.pd.CreateQP(verbs.QPConfig{SendCQ: c, RecvCQ: c})
		require.NoError(b, err)
		qps = append(qps, q)
		require.NoError(b, q.Modify(verbs.StateInit, nil))
		return q
	}
	var senders, receivers []verbs.QP
	for range paths {
		qa, qz := mk(a, acq), mk(z, zcq)
		ea, ez := qa.Endpoint(), qz.Endpoint()
		require.NoError(b, connectQP(qa, &ez))
		require.NoError(b, connectQP(qz, &ea))
		senders, receivers = append(senders, qa), append(receivers, qz)
	}
	const chunks = benchBytes / rawChunk
	wrs := make([]verbs.SendWR, 2*chunks)
	sges := make([]verbs.SGE, 2*chunks)
	recvs := make([]verbs.RecvWR, chunks)
	wcs := make([]verbs.WC, 64)
	move := func() {
		if chain {
			for i := range chunks {
				recvs[i] = verbs.RecvWR{ID: uint64(i)}
				_, err := receivers[i%paths].PostRecv(&recvs[i])
				require.NoError(b, err)
			}
		}
		for i := range chunks {
			off := uint64(i * rawChunk)
			head, tail := &wrs[2*i], &wrs[2*i+1]
			sges[2*i] = verbs.SGE{Addr: src.Addr() + off, Length: rawChunk, LKey: src.LKey()}
			*head = verbs.SendWR{ID: uint64(i), Opcode: verbs.OpWrite, Flags: verbs.Signaled, SGL: sges[2*i : 2*i+1],
				RemoteAddr: dst.Addr() + off, RKey: dst.RKey()}
			if chain {
				sges[2*i].Length = rawChunk - mtu
				sges[2*i+1] = verbs.SGE{Addr: src.Addr() + off + rawChunk - mtu, Length: mtu, LKey: src.LKey()}
				*tail = verbs.SendWR{ID: uint64(i), Opcode: verbs.OpWriteImm, Flags: verbs.Signaled, SGL: sges[2*i+1 : 2*i+2],
					RemoteAddr: dst.Addr() + off + rawChunk - mtu, RKey: dst.RKey(), Imm: uint32(i)}
				head.Flags, head.Next = 0, tail
			}
			_, err := senders[i%paths].PostSend(head)
			require.NoError(b, err)
		}
		for left := chunks; left > 0; {
			n, err := acq.Wait(ctx, wcs)
			require.NoError(b, err)
			for _, wc := range wcs[:n] {
				require.Equal(b, verbs.StatusSuccess, wc.Status)
			}
			left -= n
		}
		for left := chunks; chain && left > 0; {
			n, err := zcq.Wait(ctx, wcs)
			require.NoError(b, err)
			left -= n
		}
	}
	move()
	b.SetBytes(benchBytes)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		move()
	}
	b.StopTimer()
	require.Equal(b, -1, firstDiff(src.Bytes(), dst.Bytes()))
}

// Latency: a ping-pong of n-byte ranges between two connections of this
// process, each end keeping its next receive posted; one operation is a
// round trip, so two ranges each way complete per operation.
func BenchmarkPingPong(b *testing.B) {
	for _, p := range providers {
		for _, n := range []int{8, 64 << 10, 1 << 20} {
			b.Run(fmt.Sprintf("%s/%d", p.name, n), func(b *testing.B) {
				pr := newPairWith(b, p, testConfig(), false)
				ctx := bounded(b)
				// Each end receives into the first n bytes and sends
				// from the next n, and posts its next receive before it
				// sends, as a message layer keeps receives posted: the
				// peer's grant is there before its cell is ready.
				bufs := [2]verbs.MR{pr.a.region(2 * n), pr.b.region(2 * n)}
				conns := [2]*Conn{pr.a.conn, pr.b.conn}
				recv := func(i int) (*Op, error) { return conns[i].Recv(bufs[i], 0, n) }
				send := func(i int) (*Op, error) { return conns[i].Send(bufs[i], n, n) }
				wait := func(o *Op, err error) error {
					if err != nil {
						return err
					}
					_, err = o.Wait(ctx)
					return err
				}
				done := make(chan error, 1)
				go func() {
					done <- func() error {
						cur, err := recv(1)
						for k := range b.N {
							if err := wait(cur, err); err != nil {
								return err
							}
							if k < b.N-1 {
								cur, err = recv(1)
							}
							if err := wait(send(1)); err != nil {
								return err
							}
						}
						return nil
					}()
				}()
				// The mean hides what matters here: most round trips
				// are quick, and a few wait for a wake-up.
				ds := make([]time.Duration, 0, b.N)
				cur, err := recv(0)
				require.NoError(b, err)
				b.ReportAllocs()
				b.ResetTimer()
				for k := range b.N {
					t0 := time.Now()
					s, err := send(0)
					require.NoError(b, err)
					next := cur
					if k < b.N-1 {
						next, err = recv(0)
						require.NoError(b, err)
					}
					require.NoError(b, wait(cur, nil))
					ds = append(ds, time.Since(t0))
					require.NoError(b, wait(s, nil))
					cur = next
				}
				b.StopTimer()
				slices.Sort(ds)
				for _, q := range []int{50, 90, 99} {
					b.ReportMetric(float64(ds[(len(ds)-1)*q/100].Microseconds()), fmt.Sprintf("p%d-µs", q))
				}
				require.NoError(b, <-done)
			})
		}
	}
}
