package collectives_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rdmacell/rdmacell/bootstrap"
	"github.com/rdmacell/rdmacell/collectives"
	"github.com/rdmacell/rdmacell/comm"
)

// Four ranks, goroutines of one program, each with a communicator and a
// group on it, sum their gradients in place: every rank ends with the same
// sums. A program started by cellrun makes its communicator with
// comm.Init(ctx, comm.Options{}) instead, and the rest is the same.
func ExampleAllReduce() {
	const world = 4
	store := bootstrap.NewLocalStore()
	defer store.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	grads := make([][]float32, world)
	errs := make([]error, world)
	var wg sync.WaitGroup
	for r := range world {
		wg.Go(func() {
			c, err := comm.Init(ctx, comm.Options{Rank: r, WorldSize: world, Job: "example-allreduce", Store: store})
			if err != nil {
				errs[r] = err
				return
			}
			defer c.Close()
			g, err := collectives.New(c.P2P(), collectives.Options{})
			if err != nil {
				errs[r] = err
				return
			}
			defer g.Close() // before c.Close: it returns the group's memory to c

			grads[r] = []float32{float32(r), 10 * float32(r), 0.5}
			errs[r] = collectives.AllReduce(ctx, g, grads[r], grads[r], collectives.Sum)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		fmt.Println(err)
		return
	}
	for r, g := range grads {
		fmt.Printf("rank %d: %v\n", r, g)
	}
	// Output:
	// rank 0: [6 60 2]
	// rank 1: [6 60 2]
	// rank 2: [6 60 2]
	// rank 3: [6 60 2]
}

// A non-blocking AllReduce runs while the rank goes on with other work,
// as a data-parallel trainer overlaps the reduction of one bucket of
// gradients with the backward pass of the next; Wait returns its result.
func ExampleIAllReduce() {
	const world = 2
	store := bootstrap.NewLocalStore()
	defer store.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	means := make([][]float64, world)
	errs := make([]error, world)
	var wg sync.WaitGroup
	for r := range world {
		wg.Go(func() {
			c, err := comm.Init(ctx, comm.Options{Rank: r, WorldSize: world, Job: "example-iallreduce", Store: store})
			if err != nil {
				errs[r] = err
				return
			}
			defer c.Close()
			g, err := collectives.New(c.P2P(), collectives.Options{})
			if err != nil {
				errs[r] = err
				return
			}
			defer g.Close()

			bucket := []float64{1 + float64(r), 2 * (1 + float64(r))}
			means[r] = make([]float64, len(bucket))
			req, err := collectives.IAllReduce(ctx, g, bucket, means[r], collectives.Avg)
			if err != nil {
				errs[r] = err
				return
			}
			// ... compute the next bucket here; bucket and means[r]
			// belong to the operation until Wait returns.
			errs[r] = req.Wait(ctx)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(means[0], means[1])
	// Output:
	// [1.5 3] [1.5 3]
}
