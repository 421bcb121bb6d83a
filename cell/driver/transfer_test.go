package driver

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/verbs"
)

// Ranges of awkward sizes go both ways, several in flight at once, and
// arrive intact.
func TestTransferSizes(t *testing.T) {
	sizes := []int{0, 1, 4095, 4096, 4097, 64 << 10, 1<<20 + 3}
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.CellSize = 64 << 10
			pr := newPair(t, p, cfg)
			ctx := bounded(t)
			for dir, ends := range [][2]*end{{pr.a, pr.b}, {pr.b, pr.a}} {
				from, to := ends[0], ends[1]
				total := 0
				for _, n := range sizes {
					total += n
				}
				src, dst := from.region(total+1), to.region(total+1)
				fill(src.Bytes(), uint64(dir+1))
				var sends, recvs []*Op
				off := 0
				for _, n := range sizes {
					r, err := to.conn.Recv(dst, off, n)
					require.NoError(t, err)
					recvs = append(recvs, r)
					s, err := from.conn.Send(src, off, n)
					require.NoError(t, err)
					sends = append(sends, s)
					off += n
				}
				for i, n := range sizes {
					got, err := sends[i].Wait(ctx)
					require.NoError(t, err, "send %d of %d bytes", i, n)
					require.Equal(t, n, got)
					got, err = recvs[i].Wait(ctx)
					require.NoError(t, err, "receive %d of %d bytes", i, n)
					require.Equal(t, n, got)
				}
				require.Equal(t, -1, firstDiff(src.Bytes()[:total], dst.Bytes()[:total]), "direction %d", dir)
			}
			// Over tcp the provider tells of records landing in the
			// rings (tokens at least, one per cell); shm cannot.
			landings := pr.a.conn.Stats().Landings
			if p.name == "tcp" {
				require.NotZero(t, landings)
			} else {
				require.Zero(t, landings)
			}
		})
	}
}

// Several goroutines post and wait at once; each posts a receive and the
// matching send under a lock of its own pair, so that the k-th send fills
// the k-th receive, and checks what arrived.
func TestConcurrentCallers(t *testing.T) {
	const workers, rounds, n = 8, 16, 256 << 10
	pr := newPair(t, providers[1], testConfig())
	ctx := bounded(t)
	src, dst := pr.a.region(workers*n), pr.b.region(workers*n)
	var pairing sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, d := src.Bytes()[w*n:(w+1)*n], dst.Bytes()[w*n:(w+1)*n]
			for r := range rounds {
				fill(s, uint64(w*rounds+r))
				pairing.Lock()
				rop, err := pr.b.conn.Recv(dst, w*n, n)
				if err == nil {
					var sop *Op
					sop, err = pr.a.conn.Send(src, w*n, n)
					pairing.Unlock()
					if err == nil {
						_, err = sop.Wait(ctx)
					}
				} else {
					pairing.Unlock()
				}
				if err == nil {
					_, err = rop.Wait(ctx)
				}
				if err == nil && firstDiff(s, d) != -1 {
					err = fmt.Errorf("worker %d round %d: wrong bytes at %d", w, r, firstDiff(s, d))
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.EqualValues(t, workers*rounds, pr.b.conn.Stats().Engine.RangesReceived)
}

// Far more ranges than the engine's window are posted at once, both ways
// in order: those beyond it wait in the driver, and every one arrives in
// its place.
func TestMoreRangesThanTheWindow(t *testing.T) {
	const k, n = 40, 64 << 10
	cfg := testConfig()
	cfg.Engine.MaxRanges = 8
	pr := newPair(t, providers[0], cfg)
	ctx := bounded(t)
	src, dst := pr.a.region(k*n), pr.b.region(k*n)
	fill(src.Bytes(), 3)
	var ops []*Op
	for i := range k {
		s, err := pr.a.conn.Send(src, i*n, n) // sends first: they wait for grants
		require.NoError(t, err)
		ops = append(ops, s)
	}
	require.Equal(t, k, pr.a.conn.Stats().InFlight)
	for i := range k {
		r, err := pr.b.conn.Recv(dst, i*n, n)
		require.NoError(t, err)
		ops = append(ops, r)
	}
	for i, o := range ops {
		got, err := o.Wait(ctx)
		require.NoError(t, err, "op %d", i)
		require.Equal(t, n, got)
	}
	require.Equal(t, -1, firstDiff(src.Bytes(), dst.Bytes()))
}

// Both ends send and receive at once, as a ring step of a collective
// does, with sizes from one byte to several cells, and check every range.
// Ring records (grants, finals, tokens) land in slots the other end polls
// while they are being written; a decoder that read a slot field by field
// once took a torn final for another, cleared the slot and lost the real
// one, and this test stalled within a few thousand rounds.
func TestBothWaysMixedSizes(t *testing.T) {
	const rounds, slots, n = 2000, 8, 64 << 10
	sizes := []int{8, 100, 4096, 9000, n, 1}
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			pr := newPair(t, p, testConfig())
			ends := [2]*end{pr.a, pr.b}
			var src, dst [2]verbs.MR
			for i, e := range ends {
				src[i], dst[i] = e.region(slots*n), e.region(slots*n)
			}
			ctx := bounded(t)
			var wg sync.WaitGroup
			errs := make(chan error, 2)
			for side := range 2 {
				wg.Go(func() {
					c := ends[side].conn
					for r := range rounds {
						off, size := r%slots*n, sizes[r%len(sizes)]
						s, d := src[side].Bytes()[off:off+size], dst[side].Bytes()[off:off+size]
						fill(s, uint64(r<<1|side))
						rop, err := c.Recv(dst[side], off, n)
						var sop *Op
						if err == nil {
							sop, err = c.Send(src[side], off, size)
						}
						if err == nil {
							_, err = sop.Wait(ctx)
						}
						var got int
						if err == nil {
							got, err = rop.Wait(ctx)
						}
						if err == nil && got != size {
							err = fmt.Errorf("received %d bytes, want %d", got, size)
						}
						if err == nil {
							want := make([]byte, size)
							fill(want, uint64(r<<1|(1-side)))
							if i := firstDiff(want, d); i >= 0 {
								err = fmt.Errorf("wrong byte at %d", i)
							}
						}
						if err != nil {
							errs <- fmt.Errorf("end %s, round %d: %w", ends[side].name, r, err)
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			// Every final was followed by a bell on a control lane, and
			// none of that traffic may have cost a lane.
			for _, e := range ends {
				for _, l := range e.conn.ctl.lanes {
					require.False(t, l.down, "%s: control lane %d failed", e.name, l.idx)
				}
			}
		})
	}
}
