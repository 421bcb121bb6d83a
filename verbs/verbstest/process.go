package verbstest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/rdmacell/rdmacell/internal/syncbuf"
	"github.com/rdmacell/rdmacell/verbs"
	"github.com/stretchr/testify/require"
)

// peer is a second process serving the suite: the test binary started
// again with the peer environment variable set (see Main).
type peer struct {
	t       *testing.T
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	enc     *json.Encoder
	replies chan reply
	readErr error // why replies closed; read after it is closed
	stderr  *syncbuf.Buffer
	exited  bool
}

func startPeer(t *testing.T, p Provider) *peer {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err, "find the test binary")
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), peerEnv+"="+p.Name)
	pp := &peer{t: t, cmd: cmd, replies: make(chan reply), stderr: &syncbuf.Buffer{}}
	cmd.Stderr = pp.stderr
	pp.stdin, err = cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start(), "start peer process %s", exe)
	pp.enc = json.NewEncoder(pp.stdin)
	go func() {
		dec := json.NewDecoder(stdout)
		for {
			var r reply
			if err := dec.Decode(&r); err != nil {
				pp.readErr = err
				close(pp.replies)
				return
			}
			pp.replies <- r
		}
	}()
	t.Cleanup(pp.stop)
	return pp
}

// stop ends the peer: closing its standard input asks it to exit; one
// that does not is killed.
func (pp *peer) stop() {
	if !pp.exited {
		_ = pp.stdin.Close()
		pp.reap(5 * time.Second)
	}
	if pp.t.Failed() {
		pp.t.Logf("peer process %d standard error:\n%s", pp.cmd.Process.Pid, pp.stderr.String())
	}
}

// kill ends the peer with SIGKILL, as a crash would.
func (pp *peer) kill() {
	pp.t.Helper()
	require.NoError(pp.t, pp.cmd.Process.Signal(syscall.SIGKILL), "kill peer process %d", pp.cmd.Process.Pid)
	pp.reap(waitTimeout)
}

// reap waits for the peer's output to end and the process to exit,
// killing it after grace.
func (pp *peer) reap(grace time.Duration) {
	pp.exited = true
	timer := time.NewTimer(grace)
	defer timer.Stop()
	for {
		select {
		case _, ok := <-pp.replies:
			if ok {
				continue // an answer nobody asked for any more
			}
			_ = pp.cmd.Wait()
			return
		case <-timer.C:
			_ = pp.cmd.Process.Kill()
			timer.Reset(waitTimeout)
		}
	}
}

// call sends req and waits for its reply, which must not be an error.
func (pp *peer) call(req request) reply {
	pp.t.Helper()
	pp.send(req)
	return pp.await(req.Op)
}

func (pp *peer) send(req request) {
	pp.t.Helper()
	require.NoError(pp.t, pp.enc.Encode(req), "send %q to peer process", req.Op)
}

func (pp *peer) await(op string) reply {
	pp.t.Helper()
	select {
	case r, ok := <-pp.replies:
		if !ok {
			require.FailNowf(pp.t, "peer process ended", "no reply to %q: %v (does the provider's TestMain call verbstest.Main?)\nstderr:\n%s",
				op, pp.readErr, pp.stderr.String())
		}
		require.Empty(pp.t, r.Err, "peer process failed %q", op)
		return r
	case <-time.After(waitTimeout):
		require.FailNowf(pp.t, "peer process silent", "no reply to %q within %v", op, waitTimeout)
		return reply{}
	}
}

// peerQP starts a peer process with a region of size bytes, connects a
// new local QP with cfg to the peer's QP, and returns both with the peer's
// region.
func peerQP(t *testing.T, e *env, p Provider, cfg verbs.QPConfig, size int) (*peer, *qp, remote) {
	t.Helper()
	pp := startPeer(t, p)
	r := pp.call(request{Op: opInit, Size: size})
	require.NotNil(t, r.Endpoint, "peer endpoint")
	require.NotEqual(t, os.Getpid(), r.Pid, "the peer is another process")
	a := e.qp(0, cfg)
	require.NoError(t, modify(a, verbs.StateInit, nil))
	ea := viaJSON(t, a.Endpoint())
	pp.send(request{Op: opConnect, Endpoint: &ea})
	require.NoError(t, modify(a, verbs.StateRTR, r.Endpoint), "local QP to RTR towards peer process")
	require.NoError(t, modify(a, verbs.StateRTS, nil))
	pp.await(opConnect)
	return pp, a, remote{r.Addr, r.RKey}
}

func testProcessWrite(t *testing.T, p Provider) {
	const size = 4 << 20
	e := newEnv(t, p)
	pp, a, dst := peerQP(t, e, p, verbs.QPConfig{}, size)

	t.Run("to the peer", func(t *testing.T) {
		src := e.region(0, size, verbs.AccessLocalWrite)
		n := size - 3
		fill(src.Bytes()[:n], 77)
		pp.call(request{Op: opRecv, N: 1})
		post(t, a, chain(
			unsignaled(write(1, src, 0, n-4, dst, 3)),
			writeImm(2, src, n-4, 4, dst, 3+n-4, 0x5eed),
		))
		requireOK(t, waitWC(t, a.send, "WRITE chain to the peer process"), 2, verbs.OpWriteImm, a.Num())
		r := pp.call(request{Op: opWait, N: 1})
		require.Len(t, r.WCs, 1)
		require.Equal(t, verbs.StatusSuccess, r.WCs[0].Status, "peer's immediate completion %+v", r.WCs[0])
		require.Equal(t, uint32(0x5eed), r.WCs[0].Imm, "immediate at the peer")
		require.Equal(t, uint32(4), r.WCs[0].ByteLen, "byte length at the peer")
		sum := sha256.Sum256(src.Bytes()[:n])
		r = pp.call(request{Op: opSum, Off: 3, Len: n})
		require.Equal(t, hex.EncodeToString(sum[:]), r.Sum, "checksum of the bytes the peer process received")
	})

	t.Run("from the peer", func(t *testing.T) {
		local := e.region(0, 1<<20, remoteRW)
		set(local.Bytes(), canary)
		n := 1<<20 - 9
		r := pp.call(request{Op: opWrite, Addr: local.Addr() + 5, RKey: local.RKey(), Len: n, Seed: 78})
		require.Len(t, r.WCs, 1)
		require.Equal(t, verbs.StatusSuccess, r.WCs[0].Status, "peer's WRITE completion %+v", r.WCs[0])
		want := make([]byte, n)
		fill(want, 78)
		requireBytes(t, want, local.Bytes()[5:5+n], "bytes the peer process wrote")
		requireAll(t, local.Bytes()[:5], canary, "bytes before the peer's target")
		requireAll(t, local.Bytes()[5+n:], canary, "bytes after the peer's target")
	})
}

func testPeerKilled(t *testing.T, p Provider) {
	const size = 4 << 20
	tests := []struct {
		name string
		// writes is the number of 1 MiB WRITEs posted before the request
		// that waits for a receive the peer never posts.
		writes int
	}{
		{"waiting for a receive", 0},
		{"data in flight", 32},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, p)
			cfg := verbs.QPConfig{RNRRetry: rnrForever, Timeout: 100 * time.Millisecond, RetryCount: 3}
			pp, a, dst := peerQP(t, e, p, cfg, size)
			src := e.region(0, 1<<20, verbs.AccessLocalWrite)
			postRecvs(t, a, 10, 11)

			var wrs []*verbs.SendWR
			for i := range tt.writes {
				wrs = append(wrs, write(uint64(i), src, 0, 1<<20, dst, (i%4)<<20))
			}
			wrs = append(wrs,
				writeImm(uint64(tt.writes), src, 0, 8, dst, 0, 1),
				write(uint64(tt.writes+1), src, 0, 8, dst, 8))
			post(t, a, chain(wrs...))
			pp.kill()

			wcs := waitWCs(t, a.send, len(wrs), "requests outstanding when the peer died")
			failed := false
			for i, wc := range wcs {
				require.Equal(t, uint64(i), wc.ID, "completion order: %+v", wc)
				if wc.Status != verbs.StatusSuccess {
					failed = true
				}
				require.False(t, failed && wc.Status == verbs.StatusSuccess, "success after a failure: %+v", wc)
			}
			for _, wc := range wcs[len(wcs)-2:] {
				require.NotEqual(t, verbs.StatusSuccess, wc.Status, "request that could not complete: %+v", wc)
			}
			for _, wc := range waitWCs(t, a.recv, 2, "receives when the peer died") {
				require.NotEqual(t, verbs.StatusSuccess, wc.Status, "receive after peer death: %+v", wc)
			}
			require.Equal(t, verbs.StateErr, a.State(), "QP after its peer died")
			_, err := a.PostSend(write(99, src, 0, 8, dst, 0))
			require.ErrorIs(t, err, verbs.ErrInvalidState, "posting towards a dead peer")
		})
	}
}
