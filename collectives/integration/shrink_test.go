package integration

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/collectives"
	"github.com/rdmacell/rdmacell/comm"
	"github.com/rdmacell/rdmacell/internal/syncbuf"
	"github.com/rdmacell/rdmacell/launcher"
)

// roleShrink makes the last rank kill itself in the middle of an
// AllReduce loop, and the others shrink and go on (see TestShrinkAfterKill).
const roleShrink = "shrink"

// envKillStep is the step at which the last rank kills itself.
const envKillStep = "COLLECTIVES_INTEGRATION_KILL_STEP"

const shrinkSteps = 40

// TestShrinkAfterKill: four ranks in real processes run an AllReduce
// loop; the last one SIGKILLs itself at a random step. Every survivor's
// operation in flight fails naming it, the survivors Shrink to a group of
// three and finish the loop with the right sums; cellrun (--elastic) says
// that the rank died and exits 0.
func TestShrinkAfterKill(t *testing.T) {
	for _, transport := range []string{string(comm.TransportShm), string(comm.TransportTCP)} {
		t.Run(transport, func(t *testing.T) {
			step := 1 + rand.IntN(shrinkSteps-2)
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			var so, se syncbuf.Buffer
			code, err := launcher.Run(ctx, launcher.Config{
				Program: os.Args[0], ProcsPerNode: 4, Nodes: 1, Transport: transport, Paths: 2, Elastic: true,
				Env: append(os.Environ(), envRole+"="+roleShrink, envKillStep+"="+strconv.Itoa(step)),
			}, &so, &se)
			out := fmt.Sprintf("kill at step %d\nstdout:\n%s\nstderr:\n%s", step, so.String(), se.String())
			require.NoError(t, err, out)
			require.Zero(t, code, out)
			require.Contains(t, se.String(), "killed by signal 9 (killed); the others go on (--elastic)", out)
			for r := range 3 {
				require.Contains(t, so.String(), fmt.Sprintf("[%d] ok: rank 3 died at step %d; shrunk to rank %d of 3", r, step, r), out)
			}
		})
	}
}

// shrinkMain is a rank of TestShrinkAfterKill.
func shrinkMain() int {
	ctx, cancel := context.WithTimeout(context.Background(), rankTimeout)
	defer cancel()
	// A short lease: the death is known a second after it.
	world, err := collectives.Open(ctx, collectives.Options{Comm: comm.Options{LeaseTTL: time.Second}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 2
	}
	g, c := world, world.Comm()
	kill, _ := strconv.Atoi(os.Getenv(envKillStep))
	victim := c.Size() - 1
	buf := make([]int64, 1000)
	died := -1
	for step := 0; step < shrinkSteps; step++ {
		if c.Rank() == victim && step == kill {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
		for i := range buf {
			buf[i] = int64(c.WorldRank(g.Rank())*1000 + i + step)
		}
		err := collectives.AllReduce(ctx, g, buf, buf, collectives.Sum)
		switch {
		case err == nil:
		case died < 0 && blames(err, victim):
			died = step
			// The world's group stays failed, and open: closing it
			// would leave the job.
			if g, err = world.Shrink(ctx); err != nil {
				fmt.Fprintln(os.Stderr, "shrink:", err)
				return 1
			}
			c = g.Comm()
			step-- // again, with the survivors
			continue
		default:
			fmt.Fprintf(os.Stderr, "step %d: %v\n", step, err)
			return 1
		}
		for i, v := range buf {
			var want int64
			for r := range c.Size() {
				want += int64(c.WorldRank(r)*1000 + i + step)
			}
			if v != want {
				fmt.Fprintf(os.Stderr, "step %d: element %d is %d, want %d\n", step, i, v, want)
				return 1
			}
		}
	}
	if g != world {
		if err := g.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "close the shrunk group:", err)
			return 1
		}
	}
	if err := world.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "close:", err)
		return 1
	}
	fmt.Printf("ok: rank %d died at step %d; shrunk to rank %d of %d\n", victim, died, c.Rank(), c.Size())
	return 0
}

// blames reports whether err names rank as the cause: its death (a
// *comm.PeerError), or, where the ranks share memory, the peer an
// operation waited for when it found it gone.
func blames(err error, rank int) bool {
	var pe *comm.PeerError
	var oe *collectives.OpError
	return errors.As(err, &pe) && pe.Rank == rank || errors.As(err, &oe) && oe.Peer == rank
}
