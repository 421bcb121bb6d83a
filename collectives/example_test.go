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

// Four ranks, goroutines of one program meeting in an in-process store,
// sum their gradients in place: every rank ends with the same sums. A
// program started by cellrun opens its group with
// collectives.Open(ctx, collectives.Options{}) instead, which reads the
// rank and the rendezvous from the environment, and the rest is the same.
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
			g, err := collectives.Open(ctx, collectives.Options{Comm: comm.Options{Rank: r, WorldSize: world, Job: "example-allreduce", Store: store}})
			if err != nil {
				errs[r] = err
				return
			}
			defer g.Close() // closes its communicator too

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
			g, err := collectives.Open(ctx, collectives.Options{Comm: comm.Options{Rank: r, WorldSize: world, Job: "example-iallreduce", Store: store}})
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

// Three ranks shift typed values one step around a ring, each sending to
// the next rank and receiving from the previous one in one call, which
// cannot deadlock; then rank 0 takes a message from whichever rank sends
// first, and the Status says who it was.
func ExampleSendrecv() {
	const world = 3
	store := bootstrap.NewLocalStore()
	defer store.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	lines := make([]string, world)
	errs := make([]error, world)
	var wg sync.WaitGroup
	for r := range world {
		wg.Go(func() {
			g, err := collectives.Open(ctx, collectives.Options{Comm: comm.Options{Rank: r, WorldSize: world, Job: "example-sendrecv", Store: store}})
			if err != nil {
				errs[r] = err
				return
			}
			defer g.Close()
			next, prev := (r+1)%world, (r+world-1)%world
			in := make([]float32, 2)
			if _, err := collectives.Sendrecv(ctx, g, next, 0, []float32{float32(r), 0.5}, prev, 0, in); err != nil {
				errs[r] = err
				return
			}
			lines[r] = fmt.Sprintf("rank %d got %v from rank %d", r, in, prev)
			if r == world-1 {
				errs[r] = collectives.Send(ctx, g, 0, 7, []int64{42})
			}
			if r == 0 {
				v := make([]int64, 1)
				st, err := collectives.Recv(ctx, g, collectives.AnySource, collectives.AnyTag, v)
				errs[r] = err
				lines[r] += fmt.Sprintf(", then %v from rank %d with tag %d", v, st.Source, st.Tag)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		fmt.Println(err)
		return
	}
	for _, l := range lines {
		fmt.Println(l)
	}
	// Output:
	// rank 0 got [2 0.5] from rank 2, then [42] from rank 2 with tag 7
	// rank 1 got [0 0.5] from rank 0
	// rank 2 got [1 0.5] from rank 1
}
