package integration

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/rdmacell/rdmacell/collectives"
	"github.com/rdmacell/rdmacell/comm"
)

// rankMain is a rank's main function: it joins the job from the
// launcher's environment, runs every check, prints one "ok" line on
// success and exits non-zero on the first failure.
func rankMain() int {
	ctx, cancel := context.WithTimeout(context.Background(), rankTimeout)
	defer cancel()
	c, err := comm.Init(ctx, comm.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "init:", err)
		return 2
	}
	g, err := collectives.New(c.P2P(), collectives.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "new group:", err)
		_ = c.Close()
		return 2
	}
	k := &checker{ctx: ctx, g: g, rank: c.Rank(), size: c.Size()}
	err = runChecks(k, c)
	// Close the group before the communicator: it returns its scratch
	// memory to it.
	err = errors.Join(err, g.Close(), c.Close())
	if err != nil {
		fmt.Fprintf(os.Stderr, "rank %d: %v\n", k.rank, err)
		return 1
	}
	fmt.Printf("ok rank %d of %d over %s: %d checks\n", k.rank, k.size, os.Getenv(comm.EnvTransport), k.checks)
	return 0
}

// runChecks makes every check in turn and stops at the first failure.
func runChecks(k *checker, c *comm.Comm) error {
	if err := checkTransport(c); err != nil {
		return err
	}
	for _, check := range []func(*checker) error{
		checkAllReduce,
		checkAllGather,
		checkAllGatherV,
		checkReduceScatter,
		checkAllToAll,
		checkAllToAllV,
		checkBroadcast,
		checkReduce,
		checkBarrier,
		checkInFlight,
		checkMismatch,
	} {
		if err := check(k); err != nil {
			return err
		}
	}
	return nil
}

// checkTransport makes sure the job runs over the transport the test
// asked for, so that the tcp runs do not quietly use shared memory.
func checkTransport(c *comm.Comm) error {
	want := os.Getenv(comm.EnvTransport)
	for peer := range c.Size() {
		if peer == c.Rank() {
			continue
		}
		if got := c.Transport(peer); got != want {
			return fmt.Errorf("transport to rank %d is %q, want %q", peer, got, want)
		}
	}
	return nil
}

// checker runs collectives on one rank and compares their results with a
// serial reference every rank can compute on its own.
type checker struct {
	ctx        context.Context
	g          *collectives.Group
	rank, size int
	checks     int
}

// counts are the element counts each collective runs with: empty, one
// element, a prime that no world size divides, and a large one that
// takes the bandwidth algorithms (ring, chain) and many chunks.
var counts = []int{0, 1, 7919, 1 << 18}

// next counts a check and returns a salt that gives it its own data.
func (k *checker) next() int {
	k.checks++
	return k.checks
}
