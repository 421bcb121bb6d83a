package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/comm"
	"github.com/rdmacell/rdmacell/internal/launchtest"
)

// TestIdleThroughLauncher runs the example on two ranks through the
// launcher, recording traces: it must exit 0 and leave one trace per rank.
func TestIdleThroughLauncher(t *testing.T) {
	dir := t.TempDir()
	launchtest.Run(t, 2, comm.TransportShm, "-idle", "100ms", "-trace", dir, "-timeout", "90s")
	for _, r := range []string{"rank-0.trace", "rank-1.trace"} {
		fi, err := os.Stat(filepath.Join(dir, r))
		require.NoError(t, err)
		require.NotZero(t, fi.Size(), r)
	}
}
