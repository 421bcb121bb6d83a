package main

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/comm"
	"github.com/rdmacell/rdmacell/internal/syncbuf"
	"github.com/rdmacell/rdmacell/launcher"
)

// TestMoEThroughLauncher runs the example on three ranks through the
// launcher: it must exit 0 after matching the serial computation.
func TestMoEThroughLauncher(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	var stdout, stderr syncbuf.Buffer
	code, err := launcher.Run(ctx, launcher.Config{
		Program:      ".",
		Args:         []string{"-timeout", "90s"},
		ProcsPerNode: 3,
		Nodes:        1,
		Transport:    comm.TransportTCP,
		Env:          os.Environ(),
	}, &stdout, &stderr)
	out := "stdout:\n" + stdout.String() + "\nstderr:\n" + stderr.String()
	require.NoError(t, err, out)
	require.Zero(t, code, out)
	require.Contains(t, stdout.String(), "[0] moe: every output matches the serial computation", out)
}
