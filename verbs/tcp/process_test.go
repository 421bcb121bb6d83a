package tcp_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/rdmacell/rdmacell/verbs"
	"github.com/rdmacell/rdmacell/verbs/tcp"
	"github.com/stretchr/testify/require"
)

// silentPeerEnv turns the test binary into the peer of TestSilentPeer.
const silentPeerEnv = "RDMACELL_TCP_TEST_SILENT_PEER"

// serveSilentPeer opens a QP, prints its endpoint, reads the parent's,
// connects, prints "ready" and then serves until its standard input
// closes.
func serveSilentPeer() int {
	time.AfterFunc(2*time.Minute, func() { os.Exit(3) })
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "silent peer:", err)
		return 2
	}
	d, err := tcp.Open(tcp.Options{Secret: testSecret})
	if err != nil {
		return fail(err)
	}
	defer d.Close()
	pd, err := d.AllocPD()
	if err != nil {
		return fail(err)
	}
	cq, err := d.CreateCQ(16)
	if err != nil {
		return fail(err)
	}
	q, err := pd.CreateQP(verbs.QPConfig{SendCQ: cq, RecvCQ: cq})
	if err != nil {
		return fail(err)
	}
	if err := q.Modify(verbs.StateInit, nil); err != nil {
		return fail(err)
	}
	out := json.NewEncoder(os.Stdout)
	if err := out.Encode(q.Endpoint()); err != nil {
		return fail(err)
	}
	in := bufio.NewReader(os.Stdin)
	var remote verbs.Endpoint
	if err := json.NewDecoder(in).Decode(&remote); err != nil {
		return fail(err)
	}
	if err := q.Modify(verbs.StateRTR, &remote); err != nil {
		return fail(err)
	}
	if err := q.Modify(verbs.StateRTS, nil); err != nil {
		return fail(err)
	}
	if err := out.Encode("ready"); err != nil {
		return fail(err)
	}
	_, _ = io.Copy(io.Discard, in)
	return 0
}

// TestSilentPeer stops the peer process (SIGSTOP) and posts a request:
// no FIN, no RST, the peer's kernel even takes the bytes, but nobody
// places them. The ack timer must notice that the peer went silent and
// fail the request with StatusRetryExceeded.
func TestSilentPeer(t *testing.T) {
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), silentPeerEnv+"=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
	})
	lines := make(chan json.RawMessage, 2)
	go func() {
		dec := json.NewDecoder(stdout)
		for {
			var m json.RawMessage
			if dec.Decode(&m) != nil {
				close(lines)
				return
			}
			lines <- m
		}
	}()
	next := func(v any) {
		t.Helper()
		select {
		case m, ok := <-lines:
			require.True(t, ok, "peer process ended")
			require.NoError(t, json.Unmarshal(m, v))
		case <-time.After(10 * time.Second):
			require.FailNow(t, "peer process silent")
		}
	}

	d, err := tcp.Open(tcp.Options{Secret: testSecret})
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	pd, err := d.AllocPD()
	require.NoError(t, err)
	cq, err := d.CreateCQ(16)
	require.NoError(t, err)
	vq, err := pd.CreateQP(verbs.QPConfig{SendCQ: cq, RecvCQ: cq, Timeout: 100 * time.Millisecond, RetryCount: 1, RNRRetry: 7})
	require.NoError(t, err)
	q := vq.(*tcp.QP)
	require.NoError(t, q.Modify(verbs.StateInit, nil))
	var remote verbs.Endpoint
	next(&remote)
	require.NoError(t, json.NewEncoder(stdin).Encode(q.Endpoint()))
	require.NoError(t, q.Modify(verbs.StateRTR, &remote))
	require.NoError(t, q.Modify(verbs.StateRTS, nil))
	var ready string
	next(&ready)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	wc := make([]verbs.WC, 1)
	// A zero-length WRITE needs no region at the peer: one round trip
	// proves the connection is up.
	_, err = q.PostSend(&verbs.SendWR{ID: 1, Opcode: verbs.OpWrite, Flags: verbs.Signaled})
	require.NoError(t, err)
	_, err = cq.Wait(ctx, wc)
	require.NoError(t, err)
	require.Equal(t, verbs.StatusSuccess, wc[0].Status)

	require.NoError(t, cmd.Process.Signal(syscall.SIGSTOP))
	waitStopped(t, cmd.Process.Pid)
	_, err = q.PostSend(&verbs.SendWR{ID: 2, Opcode: verbs.OpWrite, Flags: verbs.Signaled})
	require.NoError(t, err)
	_, err = cq.Wait(ctx, wc)
	require.NoError(t, err)
	require.Equal(t, uint64(2), wc[0].ID)
	require.Equal(t, verbs.StatusRetryExceeded, wc[0].Status)
	require.Equal(t, verbs.StateErr, q.State())
	require.ErrorIs(t, q.Err(), tcp.ErrAckTimeout)
}

// waitStopped waits until the kernel reports process pid stopped: a
// signal is delivered asynchronously.
func waitStopped(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		require.NoError(t, err)
		// The state follows the parenthesised command name.
		if i := bytes.LastIndexByte(b, ')'); i > 0 && i+2 < len(b) && b[i+2] == 'T' {
			return
		}
		require.True(t, time.Now().Before(deadline), "process %d did not stop", pid)
		time.Sleep(time.Millisecond)
	}
}
