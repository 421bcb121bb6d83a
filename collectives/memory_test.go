package collectives_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/bootstrap"
	"github.com/rdmacell/rdmacell/collectives"
	"github.com/rdmacell/rdmacell/comm"
)

// TestAllocSlice reduces in place over tcp in typed slices of registered
// memory: the communicator counts them as its user's registered bytes
// while they live, the sums are right, and FreeSlice gives them back.
func TestAllocSlice(t *testing.T) {
	const world, n = 2, 4096
	store := bootstrap.NewLocalStore()
	defer store.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	errs := make([]error, world)
	var wg sync.WaitGroup
	for r := range world {
		wg.Go(func() {
			errs[r] = func() error {
				c, err := comm.Init(ctx, comm.Options{Rank: r, WorldSize: world, Job: t.Name(), Store: store, Transport: comm.TransportTCP})
				if err != nil {
					return err
				}
				defer c.Close()
				g, err := collectives.New(c.P2P(), collectives.Options{})
				if err != nil {
					return err
				}
				defer g.Close()
				before := c.Stats().Memory.UserBytes
				v, err := collectives.AllocSlice[float64](g, n)
				if err != nil {
					return err
				}
				if got := c.Stats().Memory.UserBytes - before; got < n*8 {
					return errors.New("the slice is not registered memory of the communicator")
				}
				for i := range v {
					v[i] = float64(r + i)
				}
				if err := collectives.AllReduce(ctx, g, v, v, collectives.Sum); err != nil {
					return err
				}
				for i, x := range v {
					if x != float64(2*i+1) {
						return errors.New("wrong sum")
					}
				}
				held := c.Stats().Memory.UserBytes // the group's scratch too, now
				if err := collectives.FreeSlice(g, v); err != nil {
					return err
				}
				if held-c.Stats().Memory.UserBytes < n*8 {
					return errors.New("FreeSlice did not release the memory")
				}
				return nil
			}()
		})
	}
	wg.Wait()
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
}

// TestAllocSliceArgs: a negative length is an argument error; an empty
// slice costs nothing.
func TestAllocSliceArgs(t *testing.T) {
	store := bootstrap.NewLocalStore()
	defer store.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := comm.Init(ctx, comm.Options{Rank: 0, WorldSize: 1, Job: t.Name(), Store: store})
	require.NoError(t, err)
	defer c.Close()
	g, err := collectives.New(c.P2P(), collectives.Options{})
	require.NoError(t, err)
	defer g.Close()
	_, err = collectives.AllocSlice[float32](g, -1)
	var ae *collectives.ArgError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, "n", ae.Arg)
	s, err := collectives.AllocSlice[collectives.BFloat16](g, 0)
	require.NoError(t, err)
	require.Empty(t, s)
	require.NoError(t, collectives.FreeSlice(g, s))
	h, err := collectives.AllocSlice[collectives.Float16](g, 3)
	require.NoError(t, err)
	require.Len(t, h, 3)
	require.NoError(t, collectives.FreeSlice(g, h))
}

// TestRegisterSlice reduces over tcp in a slice of the Go heap that the
// program registered: the communicator counts it as registered while it
// is, the sums are right, and no byte went through a staging buffer.
// The same reduction on an unregistered slice is staged.
func TestRegisterSlice(t *testing.T) {
	const world, n = 2, 1 << 20
	gs := openAll(t, world, comm.TransportTCP)
	ctx := bounded(t)
	each(t, gs, func(g *collectives.Group) error {
		staged := func() int64 {
			m := g.Comm().Stats().Memory
			return m.SendStaging.Bytes + m.ReceiveStaging.Bytes
		}
		reduce := func(v []float64) error {
			for i := range v {
				v[i] = float64(g.Rank() + i)
			}
			if err := collectives.AllReduce(ctx, g, v, v, collectives.Sum); err != nil {
				return err
			}
			for i, x := range v {
				if x != float64(2*i+1) {
					return fmt.Errorf("element %d is %v, want %d", i, x, 2*i+1)
				}
			}
			return nil
		}
		v := make([]float64, n)
		if err := collectives.Register(g, v); err != nil {
			return err
		}
		if got := g.Comm().Stats().Memory.RegisteredBytes; got != n*8 {
			return fmt.Errorf("%d bytes registered, want %d", got, n*8)
		}
		if err := reduce(v); err != nil {
			return err
		}
		if s := staged(); s != 0 {
			return fmt.Errorf("the registered slice went through %d bytes of staging buffers", s)
		}
		if err := collectives.Unregister(g, v); err != nil {
			return err
		}
		if err := reduce(make([]float64, n)); err != nil {
			return err
		}
		if staged() == 0 {
			return errors.New("the unregistered slice was not staged: the check above cannot fail")
		}
		return nil
	})
}
