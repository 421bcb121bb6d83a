package bootstrap

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// child is a rank running in its own process (this test binary, re-executed).
type child struct {
	rank  int
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   <-chan string
}

// startChild starts rank of a job whose ranks meet as where says (the
// variables of the store: envEndpoints, or envStore and envSecret).
func startChild(t *testing.T, where []string, job string, rank, world int) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), where...),
		envChild+"=1",
		envJob+"="+job,
		envRank+"="+strconv.Itoa(rank),
		envWorld+"="+strconv.Itoa(world),
	)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	c := &child{rank: rank, cmd: cmd, stdin: stdin, out: lines(stdout)}
	t.Cleanup(func() {
		// A test that failed halfway must not leave ranks behind.
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return c
}

// expect waits for the child's next line of output and checks its prefix.
func (c *child) expect(ctx context.Context, t *testing.T, prefix string) string {
	t.Helper()
	select {
	case line, ok := <-c.out:
		require.True(t, ok, "rank %d ended its output while we waited for %q", c.rank, prefix)
		require.True(t, strings.HasPrefix(line, prefix), "rank %d said %q, want %q...", c.rank, line, prefix)
		return line
	case <-ctx.Done():
		require.FailNow(t, "child did not answer", "rank %d, waiting for %q: %v", c.rank, prefix, ctx.Err())
		return ""
	}
}

// closeCleanly asks the child to leave the job and waits for it to exit.
// It may run on its own goroutine, hence an error rather than a failure.
func (c *child) closeCleanly() error {
	if _, err := fmt.Fprintln(c.stdin, "close"); err != nil {
		return fmt.Errorf("rank %d: %w", c.rank, err)
	}
	if err := c.stdin.Close(); err != nil {
		return fmt.Errorf("rank %d: %w", c.rank, err)
	}
	for range c.out {
		// What it says on its way out is not checked here.
	}
	if err := c.cmd.Wait(); err != nil {
		return fmt.Errorf("rank %d: %w", c.rank, err)
	}
	return nil
}

// TestProcessesKillAndCleanExit runs a job of four ranks: this process and
// three child processes, meeting in etcd, or in the store this process
// serves as rank 0 does for a job srun starts. After the exchange, one
// child is killed with SIGKILL and the survivors must report it dead,
// naming its host and pid; then a child closes cleanly and must be
// reported as a clean exit.
func TestProcessesKillAndCleanExit(t *testing.T) {
	const world, job = 4, "processes"
	t.Run("etcd", func(t *testing.T) {
		srv := startServer(t)
		where := []string{envEndpoints + "=" + strings.Join(srv.Endpoints(), ",")}
		killAndCleanExit(t, world, job, where, rankConfig(clientOf(srv), job, 0, world))
	})
	t.Run("served", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := ln.Addr().String()
		require.NoError(t, ln.Close()) // a free port, for rank 0 to serve on
		where := []string{envStore + "=" + addr, envSecret + "=" + hex.EncodeToString(testStoreSecret)}
		cfg := rankConfig(ClientConfig{}, job, 0, world)
		cfg.StoreAddr, cfg.ServeStore, cfg.Secret = addr, addr, testStoreSecret
		killAndCleanExit(t, world, job, where, cfg)
	})
}

func killAndCleanExit(t *testing.T, world int, job string, where []string, cfg Config) {
	ctx := testContext(t)
	children := make([]*child, world)
	for r := 1; r < world; r++ {
		children[r] = startChild(t, where, job, r, world)
	}
	self := join(t, cfg)
	require.NoError(t, exchangeAll(ctx, self))

	secret := hex.EncodeToString(self.Secret())
	for _, c := range children[1:] {
		assert.Equal(t, "ready "+secret, c.expect(ctx, t, "ready "), "rank %d sees another secret", c.rank)
	}
	host := self.Self().Host

	victim := children[1]
	require.NoError(t, victim.cmd.Process.Kill())
	_ = victim.cmd.Wait()
	wantDead := fmt.Sprintf("departed 1 dead %s %d", host, victim.cmd.Process.Pid)

	err := nextDeparture(ctx, t, self)
	var dead *RankDeadError
	require.ErrorAs(t, err, &dead)
	assert.Equal(t, RankDeadError{Job: job, Rank: 1, Host: host, PID: victim.cmd.Process.Pid}, *dead)
	for _, c := range children[2:] {
		assert.Equal(t, wantDead, c.expect(ctx, t, "departed "), "rank %d", c.rank)
	}

	leaver := children[2]
	pid := leaver.cmd.Process.Pid
	closed := make(chan error, 1)
	go func() { closed <- leaver.closeCleanly() }()
	err = nextDeparture(ctx, t, self)
	var exited *RankExitedError
	require.ErrorAs(t, err, &exited, "a clean exit must not be reported as a death")
	assert.Equal(t, RankExitedError{Job: job, Rank: 2, Host: host, PID: pid}, *exited)
	assert.Equal(t, fmt.Sprintf("departed 2 clean %s %d", host, pid), children[3].expect(ctx, t, "departed "))
	require.NoError(t, <-closed)

	require.NoError(t, children[3].closeCleanly())
	require.ErrorAs(t, nextDeparture(ctx, t, self), &exited)
	assert.Equal(t, 3, exited.Rank)
	require.NoError(t, self.Close(ctx))
}
