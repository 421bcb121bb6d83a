package comm_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/rdmacell/rdmacell/bootstrap"
	"github.com/rdmacell/rdmacell/comm"
)

// The ranks of a job run as goroutines of one program, as a Go test runs
// them: every rank calls Init with its rank and the same in-process
// store, and no etcd server is needed. A program started by cellrun calls
// Init with zero Options instead, which reads its rank and the rendezvous
// from the environment.
func ExampleInit() {
	const world = 4
	store := bootstrap.NewLocalStore()
	defer store.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	lines := make([]string, world)
	var wg sync.WaitGroup
	for r := range world {
		wg.Go(func() {
			c, err := comm.Init(ctx, comm.Options{Rank: r, WorldSize: world, Job: "example-init", Store: store})
			if err != nil {
				lines[r] = err.Error()
				return
			}
			defer c.Close() // waits for the other ranks to close too
			lines[r] = fmt.Sprintf("rank %d of %d reaches rank 0 over %s", c.Rank(), c.Size(), c.Transport(0))
		})
	}
	wg.Wait()
	for _, l := range lines {
		fmt.Println(l)
	}
	// Output:
	// rank 0 of 4 reaches rank 0 over self
	// rank 1 of 4 reaches rank 0 over shm
	// rank 2 of 4 reaches rank 0 over shm
	// rank 3 of 4 reaches rank 0 over shm
}

// Rank 0 sends a message to rank 1, which answers with how many bytes it
// got. A message goes to the oldest receive posted for its sender and
// tag; Recv returns the length of the message it took.
func ExampleComm_Send() {
	const tag = 7
	store := bootstrap.NewLocalStore()
	defer store.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	var reply string
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Go(func() {
			c, err := comm.Init(ctx, comm.Options{Rank: r, WorldSize: 2, Job: "example-send", Store: store})
			if err != nil {
				errs[r] = err
				return
			}
			defer c.Close()
			buf := make([]byte, 64)
			if r == 0 {
				if err := c.Send(ctx, 1, tag, []byte("hello, rank 1")); err != nil {
					errs[r] = err
					return
				}
				n, err := c.Recv(ctx, 1, tag, buf)
				errs[r], reply = err, string(buf[:n])
				return
			}
			n, err := c.Recv(ctx, 0, tag, buf)
			if err != nil {
				errs[r] = err
				return
			}
			errs[r] = c.Send(ctx, 0, tag, fmt.Appendf(nil, "rank 1 got %q (%d bytes)", buf[:n], n))
		})
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			fmt.Printf("rank %d: %v\n", r, err)
		}
	}
	fmt.Println(reply)
	// Output:
	// rank 1 got "hello, rank 1" (13 bytes)
}
