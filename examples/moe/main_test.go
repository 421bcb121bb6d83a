package main

import (
	"bytes"
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/comm"
	"github.com/rdmacell/rdmacell/launcher"
)

// syncBuffer is a bytes.Buffer the launcher's output pumps can share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestMoEThroughLauncher runs the example on three ranks through the
// launcher: it must exit 0 after matching the serial computation.
func TestMoEThroughLauncher(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	var stdout, stderr syncBuffer
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
