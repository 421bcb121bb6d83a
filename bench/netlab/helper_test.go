package netlab

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// helperEnv makes the test binary a helper process: it brings a lab up and
// then dies as the value says, so that the tests can check what is left.
const helperEnv = "NETLAB_TEST_HELPER"

// The helper's lab.
const helperLab = "helper"

// runSignalHelper is the helper process of mode "signal": it brings the
// lab up, says so and waits (at most a minute) for the signal the test
// sends.
func runSignalHelper() int {
	stop := HandleSignals()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := Up(ctx, Config{Name: helperLab, Spines: 2}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("up")
	<-ctx.Done()
	DownAll()
	return 3
}

// TestHelperPanics is the helper process of mode "panic": a test that
// brings a lab up the way the tests do and panics.
func TestHelperPanics(t *testing.T) {
	if os.Getenv(helperEnv) != "panic" {
		t.Skip("runs only as a helper process")
	}
	upLab(t, context.Background(), Config{Name: helperLab, Spines: 2})
	fmt.Println("up")
	panic("the test panics with its lab up")
}

// startHelper runs the test binary as a helper in mode.
func startHelper(t *testing.T, mode string) (*exec.Cmd, *bufio.Reader) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperPanics$", "-test.v")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = Cleanup(context.Background(), helperLab)
	})
	return cmd, bufio.NewReader(out)
}

// waitUp reads the helper's output until it says its lab is up.
func waitUp(t *testing.T, r *bufio.Reader) {
	t.Helper()
	for {
		line, err := r.ReadString('\n')
		require.NoError(t, err, "helper ended before its lab was up")
		if strings.TrimSpace(line) == "up" {
			return
		}
	}
}

// waitExit waits, at most a minute, for cmd to end, and returns its exit
// status.
func waitExit(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		_ = cmd.Process.Signal(syscall.SIGKILL)
		t.Fatal("helper did not exit within a minute")
	}
	return cmd.ProcessState.ExitCode()
}
