// Package launchtest runs the program under test through the launcher,
// as a user would with cellrun, for the examples' tests.
package launchtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/comm"
	"github.com/rdmacell/rdmacell/internal/syncbuf"
	"github.com/rdmacell/rdmacell/launcher"
)

// timeout bounds a whole job.
const timeout = 120 * time.Second

// Run builds the package in the current directory and runs it as procs
// ranks of one node over transport ("" lets the ranks choose), with args,
// within two minutes. It fails t unless every rank exits 0, and returns
// the ranks' prefixed standard output, and both outputs for messages.
func Run(t *testing.T, procs int, transport comm.Transport, args ...string) (stdout, out string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
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

// Hosts runs program (a binary, or "." to build the current directory)
// as two launcher nodes of procs ranks each on this machine, whose ranks
// register the host names node-0 and node-1: they share memory within a
// node and talk over tcp across, as on two hosts. env is added to each
// rank's environment. It fails t unless every rank exits 0, and returns
// both nodes' prefixed standard output, and all output for messages.
func Hosts(t *testing.T, program string, procs int, env []string, args ...string) (stdout, out string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var outs [2][2]syncbuf.Buffer
	var codes [2]int
	var errs [2]error
	var wg sync.WaitGroup
	token := launcher.NewToken()
	for node := range 2 {
		cfg := launcher.Config{
			Program:      program,
			Args:         args,
			ProcsPerNode: procs,
			Nodes:        2,
			NodeRank:     node,
			Job:          fmt.Sprint("hosts-", os.Getpid()),
			JoinToken:    token,
			NodeTimeout:  5 * time.Second,
			Env:          append(append(os.Environ(), env...), fmt.Sprintf("%s=node-%d", comm.EnvHost, node)),
		}
		if node == 0 {
			cfg.EtcdServe = addr
		} else {
			cfg.EtcdEndpoints = []string{addr}
		}
		wg.Go(func() { codes[node], errs[node] = launcher.Run(ctx, cfg, &outs[node][0], &outs[node][1]) })
	}
	wg.Wait()
	for node := range 2 {
		stdout += outs[node][0].String()
		out += fmt.Sprintf("node %d stdout:\n%s\nnode %d stderr:\n%s\n", node, outs[node][0].String(), node, outs[node][1].String())
	}
	for node := range 2 {
		require.NoError(t, errs[node], out)
		require.Zero(t, codes[node], "node %d\n%s", node, out)
	}
	return stdout, out
}
