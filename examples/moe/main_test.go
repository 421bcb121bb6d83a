package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/comm"
	"github.com/rdmacell/rdmacell/internal/launchtest"
)

// TestMoEThroughLauncher runs the example on three ranks through the
// launcher: it must exit 0 after matching the serial computation.
func TestMoEThroughLauncher(t *testing.T) {
	stdout, out := launchtest.Run(t, 3, comm.TransportTCP, "-timeout", "90s")
	require.Contains(t, stdout, "[0] moe: every output matches the serial computation", out)
}
