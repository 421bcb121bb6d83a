package integration

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/comm"
	"github.com/rdmacell/rdmacell/internal/launchtest"
	"github.com/rdmacell/rdmacell/internal/syncbuf"
	"github.com/rdmacell/rdmacell/launcher"
)

// envRole makes the test binary act as a rank instead of running tests:
// the launcher re-executes it with this variable set.
const envRole = "COLLECTIVES_INTEGRATION_RANK"

// testTimeout bounds a whole job, and rankTimeout each rank's work inside
// it, so that a bug fails the test instead of hanging it.
const (
	testTimeout = 120 * time.Second
	rankTimeout = 90 * time.Second
)

func TestMain(m *testing.M) {
	switch os.Getenv(envRole) {
	case "":
		os.Exit(m.Run())
	case roleLeave:
		os.Exit(leaveMain())
	case roleStall:
		os.Exit(stallMain())
	case roleTrace:
		os.Exit(traceMain())
	case roleShrink:
		os.Exit(shrinkMain())
	}
	os.Exit(rankMain())
}

// TestCollectivesAcrossProcesses runs every collective in real processes,
// one job per transport and world size; each job makes all of its checks
// in one launch, which keeps the test to a handful of process starts.
func TestCollectivesAcrossProcesses(t *testing.T) {
	for _, transport := range []string{string(comm.TransportShm), string(comm.TransportTCP)} {
		for _, world := range []int{2, 3, 4} {
			t.Run(fmt.Sprintf("%s/n=%d", transport, world), func(t *testing.T) {
				stdout, out := launch(t, world, transport, "1")
				for r := range world {
					require.Contains(t, stdout, fmt.Sprintf("[%d] ok rank %d of %d over %s:", r, r, world, transport), out)
				}
			})
		}
	}
}

// TestTwoHostNames runs every collective in a job of two "hosts" of two
// ranks each, on this machine: two launcher nodes whose ranks register
// different host names. Ranks of one name share memory, the others talk
// over tcp, and the collectives that have it run hierarchically.
func TestTwoHostNames(t *testing.T) {
	stdout, out := launchtest.Hosts(t, os.Args[0], 2, []string{envRole + "=" + roleHosts, comm.EnvPaths + "=2"})
	for r := range 4 {
		require.Contains(t, stdout, fmt.Sprintf("[%d] ok rank %d of 4 over hosts:", r, r), out)
	}
}

// TestRankLeavesSharedMemory: over shared memory the collectives wait on
// the segment, not on messages. A rank whose process exits (here without
// closing anything, as a crash would) must still be reported by the
// ranks waiting for it, by name and long before their deadline: the
// kernel drops its lock on the segment when it exits.
func TestRankLeavesSharedMemory(t *testing.T) {
	stdout, out := launch(t, 3, string(comm.TransportShm), roleLeave)
	for r := range 2 {
		require.Contains(t, stdout, fmt.Sprintf("[%d] ok: rank %d saw rank 2 leave", r, r), out)
	}
}

// launch runs this test binary as world ranks over transport, in role,
// two paths per peer. It fails t unless every rank exits 0, and returns
// the ranks' prefixed standard output, and both outputs for messages.
func launch(t *testing.T, world int, transport, role string) (stdout, out string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var so, se syncbuf.Buffer
	code, err := launcher.Run(ctx, launcher.Config{
		Program:      os.Args[0],
		ProcsPerNode: world,
		Nodes:        1,
		Transport:    transport,
		Paths:        2,
		Env:          append(os.Environ(), envRole+"="+role),
	}, &so, &se)
	out = "stdout:\n" + so.String() + "\nstderr:\n" + se.String()
	require.NoError(t, err, out)
	require.Zero(t, code, out)
	return so.String(), out
}
