package main

import (
	"fmt"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/comm"
	"github.com/rdmacell/rdmacell/internal/launchtest"
)

var epochLine = regexp.MustCompile(`(?m)^\[0\] epoch (\d+) loss ([0-9.]+)$`)

// TestTrainThroughLauncher builds the example, runs it on two ranks
// through the launcher, and checks what the example promises: it exits 0,
// rank 0's loss falls, and the ranks end with identical weights.
func TestTrainThroughLauncher(t *testing.T) {
	stdout, out := launchtest.Run(t, 2, "", trainArgs...)
	checkTraining(t, stdout, out, 2)
}

// TestTrainAcrossHosts trains over two host names of two ranks each, so
// that the gradients cross "hosts" over cells, hierarchically.
func TestTrainAcrossHosts(t *testing.T) {
	stdout, out := launchtest.Hosts(t, ".", 2, nil, trainArgs...)
	checkTraining(t, stdout, out, 4)
}

var trainArgs = []string{"-epochs", "4", "-samples", "2048", "-timeout", "90s"}

// checkTraining checks what the example promises: rank 0's loss falls
// every epoch, and the ranks end with identical weights.
func checkTraining(t *testing.T, stdout, out string, ranks int) {
	t.Helper()

	matches := epochLine.FindAllStringSubmatch(stdout, -1)
	require.Len(t, matches, 4, out)
	var losses []float64
	for i, m := range matches {
		require.Equal(t, strconv.Itoa(i+1), m[1], out)
		loss, err := strconv.ParseFloat(m[2], 64)
		require.NoError(t, err)
		losses = append(losses, loss)
	}
	for i := 1; i < len(losses); i++ {
		require.Less(t, losses[i], losses[i-1], "loss must fall every epoch: %v", losses)
	}
	require.Contains(t, stdout, fmt.Sprintf("[0] weights identical on all %d ranks", ranks), out)
}

var hashLine = regexp.MustCompile(`(?m)^\[0\] weights identical on all (\d+) ranks \(hash (0x[0-9a-f]+)\)$`)

// finalHash runs the example on procs ranks over transport and returns the
// hash of the weights every rank ended with.
func finalHash(t *testing.T, procs int, transport comm.Transport, args ...string) string {
	t.Helper()
	args = append([]string{"-epochs", "2", "-samples", "1024", "-timeout", "90s"}, args...)
	stdout, out := launchtest.Run(t, procs, transport, args...)
	m := hashLine.FindStringSubmatch(stdout)
	require.NotNil(t, m, out)
	require.Equal(t, strconv.Itoa(procs), m[1], out)
	return m[2]
}

// TestTrainExactAcrossWorldSizes: with --exact, training with the same
// global batch on 1, 2 and 4 ranks ends with the same weights.
func TestTrainExactAcrossWorldSizes(t *testing.T) {
	const global = 64
	var hashes []string
	for _, n := range []int{1, 2, 4} {
		hashes = append(hashes, finalHash(t, n, "", "-exact", "-batch", strconv.Itoa(global/n)))
	}
	require.Equal(t, hashes[0], hashes[1], "1 and 2 ranks")
	require.Equal(t, hashes[0], hashes[2], "1 and 4 ranks")
}

// TestTrainReproducibleAcrossTransports: with --reproducible, four ranks
// end with the same weights over shared memory and over tcp, whose
// reductions run different algorithms.
func TestTrainReproducibleAcrossTransports(t *testing.T) {
	shm := finalHash(t, 4, "shm", "-reproducible", "-batch", "16")
	tcp := finalHash(t, 4, "tcp", "-reproducible", "-batch", "16")
	require.Equal(t, shm, tcp)
	// Two host names of two ranks: shared memory within, tcp across,
	// where the collectives would otherwise run hierarchically.
	stdout, out := launchtest.Hosts(t, ".", 2, []string{"RDMACELL_REPRODUCIBLE=1"},
		"-epochs", "2", "-samples", "1024", "-timeout", "90s", "-batch", "16")
	m := hashLine.FindStringSubmatch(stdout)
	require.NotNil(t, m, out)
	require.Equal(t, shm, m[2], "two host layouts")
}
