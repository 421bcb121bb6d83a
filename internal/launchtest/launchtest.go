// Package launchtest runs the program under test through the launcher,
// as a user would with cellrun, for the examples' tests.
package launchtest

import (
	"context"
	"github.com/rdmacell/rdmacell/comm"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/internal/syncbuf"
	"github.com/rdmacell/rdmacell/launcher"
)

// Run builds the package in the current directory and runs it as procs
// ranks of one node over transport ("" lets the ranks choose), with args,
// within two minutes. It fails t unless every rank exits 0, and returns
// the ranks' prefixed standard output, and both outputs for messages.
func Run(t *testing.T, procs int, transport comm.Transport, args ...string) (stdout, out string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	var so, se syncbuf.Buffer
	code, err := launcher.Run(ctx, launcher.Config{
		Program:      ".", // the launcher builds this directory once
		Args:         args,
		ProcsPerNode: procs,
		Nodes:        1,
		Transport:    string(transport),
		Env:          os.Environ(),
	}, &so, &se)
	out = "stdout:\n" + so.String() + "\nstderr:\n" + se.String()
	require.NoError(t, err, out)
	require.Zero(t, code, out)
	return so.String(), out
}
