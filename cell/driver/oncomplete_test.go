package driver

import (
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/verbs"
	"github.com/rdmacell/rdmacell/verbs/tcp"
)

// TestOnCompleteRoundWritesOnce receives messages the way comm does: the
// receiver's OnComplete posts the next receive as soon as one completes.
// That runs on the progress goroutine, inside the round that found the
// arrival, so over tcp the round's token and the new receive's grant
// leave in one write: about one batch with requests per message at the
// receiver, where writing each record as it is posted costs two.
func TestOnCompleteRoundWritesOnce(t *testing.T) {
	const rounds, size = 50, 64
	a, b, pr, rp := repostingPair(t, rounds, size)
	src := a.region(size)

	dev := b.dev.(*tcp.Device)
	ctx := bounded(t)
	start := dev.Writes()
	for i := range rounds {
		o, err := pr.a.conn.Send(src, 0, size)
		require.NoError(t, err)
		_, err = o.Wait(ctx)
		require.NoError(t, err, "send %d", i)
		select {
		case r := <-rp.got:
			n, err := r.Wait(ctx)
			require.NoError(t, err)
			require.Equal(t, size, n)
		case <-ctx.Done():
			t.Fatalf("receive %d never completed", i)
		}
	}
	writes := dev.Writes().WithRequests - start.WithRequests
	t.Logf("%d messages: the receiver wrote %d batches with requests", rounds, writes)
	// One per message; a write racing with the provider's own (an
	// acknowledgement the reader flushes) may split a batch, rarely.
	require.Less(t, writes, uint64(rounds*3/2), "batches with requests the receiver wrote")
}

// TestCallerAnswerRidesWithRecords runs a ping-pong over tcp on one
// processor, as cellrun gives each of two ranks on two cores, with the
// ponger's receives posted from OnComplete as comm posts its slots. The
// round that completes a ping's receive yields before it lets the ping's
// token and the next receive's grant go, so the pong the woken caller
// sends at once leaves in the same write: about one batch with requests
// per message at the ponger, where a round that writes its records before
// the caller runs costs two.
func TestCallerAnswerRidesWithRecords(t *testing.T) {
	const rounds, size = 50, 64
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	a, b, pr, rp := repostingPair(t, rounds, size)
	srcA, dstA := a.region(size), a.region(size)
	srcB := b.region(size)
	ctx := bounded(t)

	done := make(chan error, 1)
	go func() {
		done <- func() error {
			for range rounds {
				select {
				case r := <-rp.got:
					if _, err := r.Wait(ctx); err != nil {
						return err
					}
				case <-ctx.Done():
					return ctx.Err()
				}
				s, err := pr.b.conn.Send(srcB, 0, size)
				if err != nil {
					return err
				}
				if _, err := s.Wait(ctx); err != nil {
					return err
				}
			}
			return nil
		}()
	}()
	dev := b.dev.(*tcp.Device)
	start := dev.Writes()
	for i := range rounds {
		r, err := pr.a.conn.Recv(dstA, 0, size)
		require.NoError(t, err)
		s, err := pr.a.conn.Send(srcA, 0, size)
		require.NoError(t, err)
		_, err = s.Wait(ctx)
		require.NoError(t, err, "ping %d", i)
		n, err := r.Wait(ctx)
		require.NoError(t, err, "pong %d", i)
		require.Equal(t, size, n)
	}
	require.NoError(t, <-done)
	writes := dev.Writes().WithRequests - start.WithRequests
	t.Logf("%d round trips: the ponger wrote %d batches with requests", rounds, writes)
	require.Less(t, writes, uint64(rounds*3/2), "batches with requests the ponger wrote")
}

// reposter posts a connection's receives the way comm posts its slots:
// from OnComplete, the next as soon as one completes, each completed one
// handed to got.
type reposter struct {
	recv   atomic.Pointer[Op]
	posted atomic.Int32
	conn   atomic.Pointer[Conn]
	got    chan *Op
	dst    verbs.MR
	size   int
}

// repostingPair connects A and B over tcp with one path each, B keeping
// rounds receives of size bytes posted through a reposter, the first
// posted already.
func repostingPair(t *testing.T, rounds, size int) (a, b *end, pr *pair, rp *reposter) {
	t.Helper()
	before := runtime.NumGoroutine()
	a, b = openEndWith(t, providers[1], "A", false), openEndWith(t, providers[1], "B", false)
	cfgA, cfgB := testConfig(), testConfig()
	cfgA.Paths, cfgB.Paths = 1, 1
	rp = repostReceives(t, &cfgB, rounds, b.region(size), size)
	pr = dialPairEach(t, before, a, b, cfgA, cfgB)
	rp.start(t, pr.b.conn)
	return a, b, pr, rp
}

// repostReceives sets cfg.OnComplete to keep rounds receives of size
// bytes into dst posted, one at a time; start posts the first.
func repostReceives(t *testing.T, cfg *Config, rounds int, dst verbs.MR, size int) *reposter {
	r := &reposter{got: make(chan *Op, rounds), dst: dst, size: size}
	cfg.OnComplete = func() {
		o := r.recv.Load()
		if o == nil {
			return
		}
		if done, _, _ := o.Test(); !done || !r.recv.CompareAndSwap(o, nil) {
			return
		}
		if r.posted.Add(1) < int32(rounds) {
			next, err := r.conn.Load().Recv(dst, 0, size)
			if err != nil {
				t.Errorf("post the next receive: %v", err)
				return
			}
			r.recv.Store(next)
		}
		r.got <- o
	}
	return r
}

// start posts the first receive on c, the connection cfg was dialed with.
func (r *reposter) start(t *testing.T, c *Conn) {
	t.Helper()
	r.conn.Store(c)
	first, err := c.Recv(r.dst, 0, r.size)
	require.NoError(t, err)
	r.recv.Store(first)
}
