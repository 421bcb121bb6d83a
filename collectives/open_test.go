package collectives_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/bootstrap"
	"github.com/rdmacell/rdmacell/collectives"
	"github.com/rdmacell/rdmacell/collectives/internal/memp2p"
	"github.com/rdmacell/rdmacell/comm"
)

// openAll opens a group per rank, goroutines of this test meeting in an
// in-process store, and closes them all at the test's end.
func openAll(t *testing.T, world int, transport comm.Transport) []*collectives.Group {
	t.Helper()
	store := bootstrap.NewLocalStore()
	t.Cleanup(func() { _ = store.Close() })
	gs := make([]*collectives.Group, world)
	errs := make([]error, world)
	var wg sync.WaitGroup
	for r := range world {
		wg.Go(func() {
			gs[r], errs[r] = collectives.Open(bounded(t), collectives.Options{Comm: comm.Options{
				Rank: r, WorldSize: world, Job: strings.NewReplacer("/", "-", "=", "").Replace(t.Name()), Store: store, Transport: transport,
			}})
		})
	}
	wg.Wait()
	t.Cleanup(func() { closeGroups(t, gs) })
	require.NoError(t, errors.Join(errs...))
	return gs
}

// closeGroups closes every group at once, as the ranks of a job do.
func closeGroups(t *testing.T, gs []*collectives.Group) {
	t.Helper()
	errs := make([]error, len(gs))
	var wg sync.WaitGroup
	for i, g := range gs {
		if g != nil {
			wg.Go(func() { errs[i] = g.Close() })
		}
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
}

// each runs f for every rank at once and fails with every rank's error.
func each(t *testing.T, gs []*collectives.Group, f func(g *collectives.Group) error) {
	t.Helper()
	errs := make([]error, len(gs))
	var wg sync.WaitGroup
	for i, g := range gs {
		wg.Go(func() {
			if err := f(g); err != nil {
				errs[i] = fmt.Errorf("rank %d: %w", i, err)
			}
		})
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
}

func bounded(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestOpen: one call joins the job and gives a group that reduces, whose
// communicator is its own, and whose Close closes that communicator too.
func TestOpen(t *testing.T) {
	for _, transport := range []comm.Transport{comm.TransportShm, comm.TransportTCP} {
		t.Run(string(transport), func(t *testing.T) {
			const world = 3
			gs := openAll(t, world, transport)
			ctx := bounded(t)
			each(t, gs, func(g *collectives.Group) error {
				if c := g.Comm(); c == nil || c.Rank() != g.Rank() || c.Size() != world {
					return fmt.Errorf("Comm() is %v, want the communicator of rank %d of %d", c, g.Rank(), world)
				}
				v := []int64{int64(g.Rank()), 1}
				if err := collectives.AllReduce(ctx, g, v, v, collectives.Sum); err != nil {
					return err
				}
				if !slices.Equal(v, []int64{0 + 1 + 2, world}) {
					return fmt.Errorf("AllReduce gave %v", v)
				}
				return nil
			})
			closeGroups(t, gs)
			for _, g := range gs {
				require.ErrorIs(t, g.Comm().Send(ctx, 0, 1, nil), comm.ErrClosed, "the communicator of a closed group")
				require.NoError(t, g.Close(), "a second Close")
			}
		})
	}
}

// An option that cannot be used fails Open before it joins anything: the
// store here would make Init wait for ranks that never come.
func TestOpenRejectsOptions(t *testing.T) {
	store := bootstrap.NewLocalStore()
	defer store.Close()
	_, err := collectives.Open(bounded(t), collectives.Options{
		ChunkBytes: -1,
		Comm:       comm.Options{Rank: 0, WorldSize: 2, Job: t.Name(), Store: store},
	})
	var ae *collectives.ArgError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, "Options.ChunkBytes", ae.Arg)
}

// TestSplit: the ranks split by parity, ranked in reverse, and the last
// rank joins none. Each new group reduces among its own ranks, sends
// messages ranked as it ranks them, and closes before the world's.
func TestSplit(t *testing.T) {
	const world = 5
	gs := openAll(t, world, comm.TransportShm)
	ctx := bounded(t)
	each(t, gs, func(g *collectives.Group) error {
		color := g.Rank() % 2
		if g.Rank() == world-1 {
			color = -1
		}
		sub, err := g.Split(ctx, color, -g.Rank())
		if err != nil {
			return err
		}
		if color < 0 {
			if sub != nil {
				return errors.New("a negative color got a group")
			}
			return nil
		}
		defer sub.Close()
		// Ranks 0 and 2 (color 0), 1 and 3 (color 1): reversed by key.
		if sub.Size() != 2 || sub.Rank() != 1-g.Rank()/2 {
			return fmt.Errorf("rank %d of the split group of %d, want %d of 2", sub.Rank(), sub.Size(), 1-g.Rank()/2)
		}
		v := []int32{int32(g.Rank())}
		if err := collectives.AllReduce(ctx, sub, v, v, collectives.Sum); err != nil {
			return err
		}
		if want := int32(2*color + 2); v[0] != want {
			return fmt.Errorf("the split group summed %d, want %d", v[0], want)
		}
		// A message within the split group, addressed by its ranks.
		in := []int32{-1}
		st, err := collectives.Sendrecv(ctx, sub, 1-sub.Rank(), 3, []int32{int32(g.Rank())}, 1-sub.Rank(), 3, in)
		if err != nil {
			return err
		}
		if want := int32(g.Rank() ^ 2); in[0] != want || st.Source != 1-sub.Rank() || st.Len != 4 {
			return fmt.Errorf("Sendrecv in the split group got %d from %d (%d bytes), want %d", in[0], st.Source, st.Len, want)
		}
		return sub.Close()
	})
}

// TestMessages sends typed messages between the ranks of a group over
// both transports and several world sizes: blocking and not, from any rank and with any tag, a
// ring shift, probes, and requests of messages and collectives waited for
// together.
func TestMessages(t *testing.T) {
	for _, c := range []struct {
		transport comm.Transport
		world     int
	}{{comm.TransportShm, 2}, {comm.TransportShm, 3}, {comm.TransportShm, 5}, {comm.TransportShm, 8}, {comm.TransportTCP, 2}, {comm.TransportTCP, 3}} {
		t.Run(fmt.Sprintf("%s/n=%d", c.transport, c.world), func(t *testing.T) {
			gs := openAll(t, c.world, c.transport)
			ctx := bounded(t)
			each(t, gs, func(g *collectives.Group) error {
				r, n := g.Rank(), g.Size()
				right, left := (r+1)%n, (r+n-1)%n

				// A ring shift, then the same by Isend and Irecv waited for
				// with a collective.
				in := make([]float64, 3)
				st, err := collectives.Sendrecv(ctx, g, right, 1, []float64{float64(r), 0.5, -1}, left, 1, in)
				if err != nil {
					return err
				}
				if !slices.Equal(in, []float64{float64(left), 0.5, -1}) || st.Source != left || st.Len != 24 {
					return fmt.Errorf("Sendrecv got %v from %d (%d bytes)", in, st.Source, st.Len)
				}
				recv := make([]int64, 2)
				rr, err := collectives.Irecv(ctx, g, left, 2, recv)
				if err != nil {
					return err
				}
				sr, err := collectives.Isend(ctx, g, right, 2, []int64{int64(r), 7})
				if err != nil {
					return err
				}
				sum := []int64{1}
				ar, err := collectives.IAllReduce(ctx, g, sum, sum, collectives.Sum)
				if err != nil {
					return err
				}
				if err := collectives.WaitAll(ctx, rr, sr, ar); err != nil {
					return err
				}
				if !slices.Equal(recv, []int64{int64(left), 7}) || sum[0] != int64(n) {
					return fmt.Errorf("after WaitAll: received %v, summed %d", recv, sum[0])
				}
				if st := rr.Status(); st.Source != left || st.Tag != 2 || st.Len != 16 {
					return fmt.Errorf("the receive's Status is %+v", st)
				}
				if err := rr.Wait(ctx); !errors.Is(err, collectives.ErrRequestDone) {
					return fmt.Errorf("a second Wait returned %v", err)
				}

				// Rank 0 takes one message from each other rank, from any
				// rank with any tag, after probing the first.
				if r != 0 {
					if err := collectives.Send(ctx, g, 0, uint64(10+r), []uint8{uint8(r)}); err != nil {
						return err
					}
				} else {
					pst, err := g.Probe(ctx, collectives.AnySource, collectives.AnyTag)
					if err != nil {
						return err
					}
					if _, ok, err := g.Iprobe(pst.Source, pst.Tag); !ok || err != nil {
						return fmt.Errorf("Iprobe after Probe: %v, %v", ok, err)
					}
					seen := map[int]bool{}
					for range n - 1 {
						b := make([]uint8, 4)
						st, err := collectives.Recv(ctx, g, collectives.AnySource, collectives.AnyTag, b)
						if err != nil {
							return err
						}
						if st.Len != 1 || int(b[0]) != st.Source || st.Tag != uint64(10+st.Source) || seen[st.Source] {
							return fmt.Errorf("received %v with %+v", b[:st.Len], st)
						}
						seen[st.Source] = true
					}
				}

				// WaitAny over a receive that only the last rank's
				// message completes, and a barrier, which completes first.
				if r == 0 {
					got := []int32{0}
					mr, err := collectives.Irecv(ctx, g, n-1, 20, got)
					if err != nil {
						return err
					}
					br, err := collectives.IBarrier(ctx, g)
					if err != nil {
						return err
					}
					reqs := []collectives.Request{mr, br}
					if i, err := collectives.WaitAny(ctx, reqs...); i != 1 || err != nil {
						return fmt.Errorf("WaitAny returned %d, %v: want the barrier", i, err)
					}
					if err := collectives.Send(ctx, g, n-1, 21, []int32{0}); err != nil {
						return err
					}
					if i, err := collectives.WaitAny(ctx, reqs...); i != 0 || err != nil || got[0] != 42 {
						return fmt.Errorf("WaitAny returned %d, %v, %d: want the receive of 42", i, err, got[0])
					}
					if i, err := collectives.WaitAny(ctx, reqs...); i != -1 || err != nil {
						return fmt.Errorf("WaitAny of spent requests returned %d, %v", i, err)
					}
					return nil
				}
				if err := collectives.Barrier(ctx, g); err != nil {
					return err
				}
				if r == n-1 {
					// Only once rank 0 is past its first WaitAny.
					if _, err := collectives.Recv(ctx, g, 0, 21, []int32{0}); err != nil {
						return err
					}
					return collectives.Send(ctx, g, 0, 20, []int32{42})
				}
				return nil
			})
		})
	}
}

// TestMessageContext: the context a message was issued with bounds it.
// When it ends, the receive completes with its error and takes no
// message, so the next receive gets the one sent after; the context given
// to Wait bounds only the waiting.
func TestMessageContext(t *testing.T) {
	gs := openAll(t, 2, comm.TransportTCP)
	ctx := bounded(t)
	each(t, gs, func(g *collectives.Group) error {
		if g.Rank() == 1 {
			if _, err := collectives.Recv(ctx, g, 0, 1, []byte{0}); err != nil {
				return err
			}
			return collectives.Send(ctx, g, 0, 2, []uint8{9})
		}
		issue, cancel := context.WithCancel(ctx)
		defer cancel()
		got := []uint8{0}
		req, err := collectives.Irecv(issue, g, 1, 2, got)
		if err != nil {
			return err
		}
		short, stop := context.WithTimeout(ctx, 10*time.Millisecond)
		defer stop()
		if err := req.Wait(short); !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("Wait with a short context returned %v", err)
		}
		if done, err := req.Test(); done || err != nil {
			return fmt.Errorf("the receive ended with Wait's context: %v, %v", done, err)
		}
		cancel()
		if err := req.Wait(ctx); !errors.Is(err, context.Canceled) {
			return fmt.Errorf("Wait after the issuing context ended returned %v", err)
		}
		if err := collectives.Send(ctx, g, 1, 1, []byte{1}); err != nil {
			return err
		}
		st, err := collectives.Recv(ctx, g, 1, 2, got)
		if err != nil || got[0] != 9 || st.Len != 1 {
			return fmt.Errorf("the receive after the given-up one got %v (%+v, %v)", got, st, err)
		}
		return nil
	})
}

// A group over a P2P that is not a communicator has no messages, no
// Split and no Shrink: each says so.
func TestNotACommunicator(t *testing.T) {
	g, err := collectives.New(memp2p.New(1).Endpoint(0), collectives.Options{})
	require.NoError(t, err)
	defer g.Close()
	require.Nil(t, g.Comm())
	ctx := bounded(t)
	var ae *collectives.ArgError
	require.ErrorAs(t, collectives.Send(ctx, g, 0, 1, []byte{1}), &ae)
	require.Equal(t, "Send", ae.Op)
	_, err = collectives.Irecv(ctx, g, 0, 1, []byte{1})
	require.ErrorAs(t, err, &ae)
	_, err = g.Split(ctx, 0, 0)
	require.ErrorAs(t, err, &ae)
	_, err = g.Shrink(ctx)
	require.ErrorAs(t, err, &ae)
	_, err = g.Probe(ctx, 0, 1)
	require.ErrorAs(t, err, &ae)
	require.ErrorAs(t, collectives.Register(g, []byte{1}), &ae)
}
