package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/rdmacell/rdmacell/collectives"
	"github.com/rdmacell/rdmacell/comm"
)

// rankMain is a rank's main function: it joins the job from the
// launcher's environment, runs every check, prints one "ok" line on
// success and exits non-zero on the first failure.
func rankMain() int {
	ctx, cancel := context.WithTimeout(context.Background(), rankTimeout)
	defer cancel()
	c, g, code := join(ctx)
	if c == nil {
		return code
	}
	k := &checker{ctx: ctx, g: g, rank: c.Rank(), size: c.Size()}
	err := runChecks(k, c)
	err = errors.Join(err, g.Close())
	if err != nil {
		fmt.Fprintf(os.Stderr, "rank %d: %v\n", k.rank, err)
		return 1
	}
	over := os.Getenv(comm.EnvTransport)
	if os.Getenv(envRole) == roleHosts {
		over = roleHosts
	}
	fmt.Printf("ok rank %d of %d over %s: %d checks\n", k.rank, k.size, over, k.checks)
	return 0
}

// join opens the job's group from the launcher's environment and returns
// it with its communicator; on failure it says why and returns the exit
// code.
func join(ctx context.Context) (*comm.Comm, *collectives.Group, int) {
	g, err := collectives.Open(ctx, collectives.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return nil, nil, 2
	}
	return g.Comm(), g, 0
}

// roleLeave makes the last rank exit after one barrier while the others
// start an AllReduce (see TestRankLeavesSharedMemory).
const roleLeave = "leave"

func leaveMain() int {
	ctx, cancel := context.WithTimeout(context.Background(), rankTimeout)
	defer cancel()
	c, g, code := join(ctx)
	if c == nil {
		return code
	}
	if err := collectives.Barrier(ctx, g); err != nil {
		fmt.Fprintln(os.Stderr, "barrier:", err)
		return 1
	}
	if c.Rank() == c.Size()-1 {
		os.Exit(0) // gone, closing nothing
	}
	buf := make([]float32, 1000)
	err := collectives.AllReduce(ctx, g, buf, buf, collectives.Sum)
	var oe *collectives.OpError
	// The lock, not the communicator's lease (seconds later), tells.
	if !errors.As(err, &oe) || oe.Peer != c.Size()-1 || !strings.Contains(err.Error(), "holds no lock") {
		fmt.Fprintf(os.Stderr, "rank %d: AllReduce returned %v, want an error naming rank %d, which holds no lock\n", c.Rank(), err, c.Size()-1)
		return 1
	}
	fmt.Printf("ok: rank %d saw rank %d leave: %v\n", c.Rank(), c.Size()-1, err)
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
		checkGather,
		checkScatter,
		checkReduceScatterV,
		checkInFlight,
		checkWaitAll,
		checkMismatch,
		checkSendrecv,
		checkMessages,
		func(k *checker) error { return checkReproducible(k, c.P2P()) },
	} {
		if err := check(k); err != nil {
			return err
		}
	}
	return nil
}

// roleHosts runs the checks in a job whose ranks register two host names
// (see TestTwoHostNames).
const roleHosts = "hosts"

// checkTransport makes sure the job runs over the transport the test
// asked for, so that the tcp runs do not quietly use shared memory, and
// in a job of two host names that ranks share memory with those of their
// name only.
func checkTransport(c *comm.Comm) error {
	want := os.Getenv(comm.EnvTransport)
	for peer := range c.Size() {
		if peer == c.Rank() {
			continue
		}
		if os.Getenv(envRole) == roleHosts {
			want = string(comm.TransportTCP)
			if c.Host(peer) == c.Host(c.Rank()) {
				want = string(comm.TransportShm)
			}
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
