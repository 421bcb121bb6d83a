package main

import (
	"context"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/internal/syncbuf"
	"github.com/rdmacell/rdmacell/launcher"
)

var epochLine = regexp.MustCompile(`(?m)^\[0\] epoch (\d+) loss ([0-9.]+)$`)

// TestTrainThroughLauncher builds the example, runs it on two ranks
// through the launcher, and checks what the example promises: it exits 0,
// rank 0's loss falls, and the ranks end with identical weights.
func TestTrainThroughLauncher(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	var stdout, stderr syncbuf.Buffer
	code, err := launcher.Run(ctx, launcher.Config{
		Program:      ".", // the launcher builds this directory once
		Args:         []string{"-epochs", "4", "-samples", "2048", "-timeout", "90s"},
		ProcsPerNode: 2,
		Nodes:        1,
		Env:          os.Environ(),
	}, &stdout, &stderr)
	out := "stdout:\n" + stdout.String() + "\nstderr:\n" + stderr.String()
	require.NoError(t, err, out)
	require.Zero(t, code, out)

	matches := epochLine.FindAllStringSubmatch(stdout.String(), -1)
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
	require.Contains(t, stdout.String(), "[0] weights identical on all 2 ranks", out)
}
