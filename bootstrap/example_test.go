package bootstrap_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/rdmacell/rdmacell/bootstrap"
)

// The ranks of a job run as goroutines of one program meet in a store of
// that program: each joins with the address it would accept connections
// at, waits for the others (and so learns theirs), hands its right-hand
// neighbour a value and reads the one its left-hand neighbour handed it,
// and passes a barrier before it leaves.
func ExampleNewLocalStore() {
	const world = 3
	store := bootstrap.NewLocalStore()
	defer store.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	got := make([]string, world)
	errs := make([]error, world)
	var wg sync.WaitGroup
	for r := range world {
		wg.Go(func() {
			errs[r] = func() error {
				j, err := bootstrap.Join(ctx, bootstrap.Config{
					Store:     store,
					Job:       "example",
					Rank:      r,
					WorldSize: world,
					Endpoints: []string{fmt.Sprintf("10.0.0.%d:7000", r)},
					Logger:    slog.New(slog.DiscardHandler),
				})
				if err != nil {
					return err
				}
				defer j.Close(ctx)
				members, err := j.WaitWorld(ctx)
				if err != nil {
					return err
				}
				right, left := (r+1)%world, (r+world-1)%world
				msg := fmt.Sprintf("hello from rank %d", r)
				if err := j.Put(ctx, right, "greeting", []byte(msg)); err != nil {
					return err
				}
				v, err := j.Get(ctx, left, "greeting") // waits until left has put it
				if err != nil {
					return err
				}
				got[r] = fmt.Sprintf("%q from %s", v, members[left].Endpoints[0])
				return j.Barrier(ctx, "done")
			}()
		})
	}
	wg.Wait()
	for r := range world {
		if errs[r] != nil {
			fmt.Printf("rank %d: %v\n", r, errs[r])
			continue
		}
		fmt.Printf("rank %d got %s\n", r, got[r])
	}
	// Output:
	// rank 0 got "hello from rank 2" from 10.0.0.2:7000
	// rank 1 got "hello from rank 0" from 10.0.0.0:7000
	// rank 2 got "hello from rank 1" from 10.0.0.1:7000
}
