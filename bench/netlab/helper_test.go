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

// helperEnv makes the test binary a helper process: it brings a lab up,
// prints "up <ID>", and then ends as the value says, so that the tests can
// check what is left.
const helperEnv = "NETLAB_TEST_HELPER"

// The helpers' labs.
const helperLab = "helper"

// helperWait bounds every wait on a helper.
const helperWait = time.Minute

// runSignalHelper is the helper process of mode "signal": it brings a lab
// up, says so and waits (at most helperWait) for the signal the test
// sends.
func runSignalHelper() int {
	stop := HandleSignals()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), helperWait)
	defer cancel()
	l, err := Up(ctx, Config{Name: helperLab, Spines: 2})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("up", l.ID())
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
	l := upLab(t, context.Background(), Config{Name: helperLab, Spines: 2})
	fmt.Println("up", l.ID())
	panic("the test panics with its lab up")
}

// helper is a helper process.
type helper struct {
	cmd *exec.Cmd
	// lines carries what it prints, until it ends; exited is closed once
	// it has ended and been waited for.
	lines  chan string
	exited chan struct{}
	// id is its lab's ID, once it said it.
	id string
}

// startHelper runs the test binary as a helper in mode. When t ends the
// helper is killed, and its lab, now a leftover, removed.
func startHelper(t *testing.T, mode string) *helper {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperPanics$", "-test.v")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	h := &helper{cmd: cmd, lines: make(chan string, 64), exited: make(chan struct{})}
	go func() {
		// Wait only once the output is read to its end, as exec asks.
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case h.lines <- sc.Text():
			default: // nobody listens any more
			}
		}
		close(h.lines)
		_ = cmd.Wait()
		close(h.exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		select {
		case <-h.exited:
		case <-time.After(helperWait):
			t.Errorf("helper %d did not end after SIGKILL", cmd.Process.Pid)
			return
		}
		if h.id != "" {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_, err := Cleanup(ctx, h.id)
			require.NoError(t, err, "remove the lab of helper %d", cmd.Process.Pid)
		}
	})
	return h
}

// waitUp waits until the helper says its lab is up, and returns the
// lab's ID.
func (h *helper) waitUp(t *testing.T) string {
	t.Helper()
	deadline := time.After(helperWait)
	for {
		select {
		case line, ok := <-h.lines:
			require.True(t, ok, "helper ended before its lab was up")
			if id, ok := strings.CutPrefix(strings.TrimSpace(line), "up "); ok {
				h.id = id
				return id
			}
		case <-deadline:
			t.Fatalf("helper's lab not up within %v", helperWait)
		}
	}
}

// waitExit waits for the helper to end and returns its exit status.
func (h *helper) waitExit(t *testing.T) int {
	t.Helper()
	select {
	case <-h.exited:
	case <-time.After(helperWait):
		_ = h.cmd.Process.Signal(syscall.SIGKILL)
		t.Fatalf("helper did not exit within %v", helperWait)
	}
	return h.cmd.ProcessState.ExitCode()
}
