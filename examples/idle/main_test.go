package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/comm"
	"github.com/rdmacell/rdmacell/internal/syncbuf"
	"github.com/rdmacell/rdmacell/launcher"
)

// TestIdleThroughLauncher runs the example on two ranks through the
// launcher, recording traces: it must exit 0 and leave one trace per rank.
func TestIdleThroughLauncher(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	dir := t.TempDir()
	var stdout, stderr syncbuf.Buffer
	code, err := launcher.Run(ctx, launcher.Config{
		Program:      ".",
		Args:         []string{"-idle", "100ms", "-trace", dir, "-timeout", "90s"},
		ProcsPerNode: 2,
		Nodes:        1,
		Transport:    comm.TransportShm,
		Env:          os.Environ(),
	}, &stdout, &stderr)
	out := "stdout:\n" + stdout.String() + "\nstderr:\n" + stderr.String()
	require.NoError(t, err, out)
	require.Zero(t, code, out)
	for _, r := range []string{"rank-0.trace", "rank-1.trace"} {
		fi, err := os.Stat(filepath.Join(dir, r))
		require.NoError(t, err)
		require.NotZero(t, fi.Size(), r)
	}
}
