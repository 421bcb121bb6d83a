package driver

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/cell"
	"github.com/rdmacell/rdmacell/internal/syncbuf"
	"github.com/rdmacell/rdmacell/verbs"
)

// The test binary started with peerEnv set to a provider's name is the
// peer process of the tests below: an echo server that receives ranges
// over a connection and sends each back.
const (
	peerEnv       = "RDMACELL_DRIVER_TEST_PEER"
	peerRangesEnv = "RDMACELL_DRIVER_TEST_RANGES" // "count,bytes"
	peerLifetime  = 2 * time.Minute
)

func TestMain(m *testing.M) {
	if name := os.Getenv(peerEnv); name != "" {
		os.Exit(servePeer(name))
	}
	os.Exit(m.Run())
}

// lineExchanger swaps setup information as one base64 line each way.
type lineExchanger struct {
	w io.Writer
	r *bufio.Reader
}

func (x lineExchanger) Exchange(ctx context.Context, local []byte) ([]byte, error) {
	if _, err := fmt.Fprintln(x.w, base64.StdEncoding.EncodeToString(local)); err != nil {
		return nil, err
	}
	type result struct {
		line string
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		line, err := x.r.ReadString('\n')
		ch <- result{line, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, r.err
		}
		return base64.StdEncoding.DecodeString(strings.TrimSpace(r.line))
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// servePeer is the peer process: it echoes count ranges of n bytes and
// closes the connection when its standard input ends.
func servePeer(name string) int {
	time.AfterFunc(peerLifetime, func() { os.Exit(3) })
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "driver test peer:", err)
		return 2
	}
	var count, n int
	if _, err := fmt.Sscanf(os.Getenv(peerRangesEnv), "%d,%d", &count, &n); err != nil {
		return fail(err)
	}
	var p provider
	for _, q := range providers {
		if q.name == name {
			p = q
		}
	}
	if p.open == nil {
		return fail(fmt.Errorf("unknown provider %q", name))
	}
	dev, err := p.open()
	if err != nil {
		return fail(err)
	}
	defer dev.Close()
	pd, err := dev.AllocPD()
	if err != nil {
		return fail(err)
	}
	mem, err := verbs.Alloc(n)
	if err != nil {
		return fail(err)
	}
	mr, err := pd.RegMR(mem.Bytes(), verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	if err != nil {
		return fail(err)
	}
	in := bufio.NewReader(os.Stdin)
	ctx, cancel := context.WithTimeout(context.Background(), peerLifetime)
	defer cancel()
	cfg := testConfig()
	cfg.Peer, cfg.Device, cfg.PD = "parent", dev, pd
	c, err := Dial(ctx, cfg, lineExchanger{w: os.Stdout, r: in})
	if err != nil {
		return fail(err)
	}
	defer c.Close()
	for i := range count {
		r, err := c.Recv(mr, 0, n)
		if err != nil {
			return fail(err)
		}
		if _, err := r.Wait(ctx); err != nil {
			return fail(fmt.Errorf("receive %d: %w", i, err))
		}
		s, err := c.Send(mr, 0, n)
		if err != nil {
			return fail(err)
		}
		if _, err := s.Wait(ctx); err != nil {
			return fail(fmt.Errorf("send %d: %w", i, err))
		}
	}
	_, _ = io.Copy(io.Discard, in)
	return 0
}

// child is a peer process and the connection to it.
type child struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *syncbuf.Buffer
	conn   *Conn
	end    *end
}

func startChild(t *testing.T, p provider, count, n int) *child {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	ch := &child{cmd: exec.Command(exe, "-test.run=^$"), stderr: &syncbuf.Buffer{}}
	ch.cmd.Env = append(os.Environ(), peerEnv+"="+p.name, peerRangesEnv+"="+strconv.Itoa(count)+","+strconv.Itoa(n))
	ch.cmd.Stderr = ch.stderr
	ch.stdin, err = ch.cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := ch.cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, ch.cmd.Start())
	ch.end = openEnd(t, p, "parent")
	t.Cleanup(func() {
		_ = ch.stdin.Close()
		_ = ch.cmd.Process.Kill()
		_ = ch.cmd.Wait()
		if ch.conn != nil {
			require.NoError(t, closeBounded(ch.conn))
		}
		for _, mr := range ch.end.mrs {
			require.NoError(t, mr.Close())
		}
		require.NoError(t, ch.end.dev.Close())
		for _, m := range ch.end.mems {
			require.NoError(t, m.Free())
		}
	})
	cfg := testConfig()
	cfg.Peer, cfg.Device, cfg.PD = "child", ch.end.dev, ch.end.pd
	ch.conn, err = Dial(bounded(t), cfg, lineExchanger{w: ch.stdin, r: bufio.NewReader(stdout)})
	require.NoError(t, err, "dial the peer process; its errors: %s", ch.stderr)
	ch.end.conn = ch.conn
	return ch
}

// Ranges go to another process and come back intact.
func TestAcrossProcesses(t *testing.T) {
	const count, n = 4, 16 << 20
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			ch := startChild(t, p, count, n)
			ctx := bounded(t)
			src, back := ch.end.region(n), ch.end.region(n)
			for i := range count {
				fill(src.Bytes(), uint64(i))
				r, err := ch.conn.Recv(back, 0, n)
				require.NoError(t, err)
				s, err := ch.conn.Send(src, 0, n)
				require.NoError(t, err)
				_, err = s.Wait(ctx)
				require.NoError(t, err, "send %d; peer: %s", i, ch.stderr)
				got, err := r.Wait(ctx)
				require.NoError(t, err, "echo %d; peer: %s", i, ch.stderr)
				require.Equal(t, n, got)
				require.Equal(t, -1, firstDiff(src.Bytes(), back.Bytes()), "echo %d", i)
			}
			require.NoError(t, ch.stdin.Close())
			require.NoError(t, ch.cmd.Wait(), "peer: %s", ch.stderr)
		})
	}
}

// The peer process is killed in the middle: every range in flight fails
// with an error naming it, and nothing hangs.
func TestPeerProcessKilled(t *testing.T) {
	const n = 32 << 20
	p := providers[1]
	ch := startChild(t, p, 4, n)
	ctx := bounded(t)
	src, back := ch.end.region(n), ch.end.region(n)
	r, err := ch.conn.Recv(back, 0, n)
	require.NoError(t, err)
	s, err := ch.conn.Send(src, 0, n)
	require.NoError(t, err)
	_, err = s.Wait(ctx)
	require.NoError(t, err)
	require.NoError(t, ch.cmd.Process.Signal(syscall.SIGKILL))
	var ops []*Op
	for range 3 { // the dead peer grants none of them
		s, err := ch.conn.Send(src, 0, n)
		if err != nil {
			require.ErrorIs(t, err, cell.ErrNoPath)
			break
		}
		ops = append(ops, s)
	}
	ops = append(ops, r)
	failed := requireDone(ctx, t, ops, requireNoPath(t, "child"))
	require.GreaterOrEqual(t, failed, len(ops)-1, "only the first echo may have made it")
	err = ch.conn.Err()
	require.ErrorIs(t, err, cell.ErrNoPath)
	var np *cell.NoPathError
	require.True(t, errors.As(err, &np))
	t.Logf("after the peer died: %v", err)
}
