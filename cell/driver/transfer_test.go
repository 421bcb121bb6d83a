package driver

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
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
