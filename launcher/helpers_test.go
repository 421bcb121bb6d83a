package launcher

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testTimeout bounds every wait of a test, so that a bug fails the test
// rather than hanging it. It is far above what any step needs.
const testTimeout = 60 * time.Second

// bin holds the binaries under test, built once per test binary.
var bin struct {
	cellrun  string
	rankprog string
}

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "launcher-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "launcher tests:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	bin.cellrun = dir + "/cellrun"
	bin.rankprog = dir + "/rankprog"
	// Both link etcd: building them side by side halves the wait.
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, b := range []struct{ pkg, out string }{{"./cellrun", bin.cellrun}, {"./testdata/rankprog", bin.rankprog}} {
		wg.Go(func() {
			args := []string{"build", "-o", b.out}
			if raceEnabled {
				args = append(args, "-race")
			}
			if out, err := exec.Command("go", append(args, b.pkg)...).CombinedOutput(); err != nil {
				errs[i] = fmt.Errorf("build %s: %w\n%s", b.pkg, err, out)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintln(os.Stderr, "launcher tests:", err)
		return 1
	}
	return m.Run()
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// lineLog collects the lines of a stream as they arrive.
type lineLog struct {
	mu      sync.Mutex
	lines   []string
	changed chan struct{} // closed and replaced on every new line
	done    chan struct{} // closed at end of the stream
}

func newLineLog(r io.Reader) *lineLog {
	l := &lineLog{changed: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		s := bufio.NewScanner(r)
		for s.Scan() {
			l.mu.Lock()
			l.lines = append(l.lines, s.Text())
			close(l.changed)
			l.changed = make(chan struct{})
			l.mu.Unlock()
		}
	}()
	return l
}

// all returns the lines so far.
func (l *lineLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

// waitCount waits until n lines contain substr.
func (l *lineLog) waitCount(ctx context.Context, t *testing.T, substr string, n int) {
	t.Helper()
	for {
		l.mu.Lock()
		count := 0
		for _, line := range l.lines {
			if strings.Contains(line, substr) {
				count++
			}
		}
		changed := l.changed
		l.mu.Unlock()
		if count >= n {
			return
		}
		select {
		case <-changed:
		case <-l.done:
			require.FailNow(t, "output ended early", "want %d lines with %q, have %d:\n%s",
				n, substr, count, strings.Join(l.all(), "\n"))
		case <-ctx.Done():
			require.FailNow(t, "output did not come", "want %d lines with %q, have %d:\n%s",
				n, substr, count, strings.Join(l.all(), "\n"))
		}
	}
}

// cellrunProc is a cellrun process under test.
type cellrunProc struct {
	cmd    *exec.Cmd
	tmp    string // its TMPDIR: must be empty once it exited
	stdout *lineLog
	stderr *lineLog
	// etcdAddr and token are those of a multi-node job's etcd, when the
	// test started one.
	etcdAddr, token string
}

// cleanEnv is the test's environment without any RDMACELL_ variable, with
// TMPDIR set to tmp.
func cleanEnv(tmp string, extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "RDMACELL_") && !strings.HasPrefix(kv, "TMPDIR=") {
			env = append(env, kv)
		}
	}
	return append(append(env, "TMPDIR="+tmp), extra...)
}

// startCellrun starts the cellrun binary with args and extra environment.
func startCellrun(t *testing.T, extraEnv []string, args ...string) *cellrunProc {
	t.Helper()
	return startCommand(t, t.TempDir(), extraEnv, bin.cellrun, args...)
}

// startCommand starts name (cellrun, or a shell that runs it) with TMPDIR
// tmp and extra environment.
func startCommand(t *testing.T, tmp string, extraEnv []string, name string, args ...string) *cellrunProc {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = cleanEnv(tmp, extraEnv...)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	p := &cellrunProc{cmd: cmd, tmp: tmp, stdout: newLineLog(stdout), stderr: newLineLog(stderr)}
	t.Cleanup(func() {
		// A test that failed halfway must not leave cellrun behind; its
		// ranks die with it (parent-death signal).
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return p
}

// wait waits for cellrun to exit, and for its output, and returns its exit
// code.
func (p *cellrunProc) wait(ctx context.Context, t *testing.T) int {
	t.Helper()
	for _, l := range []*lineLog{p.stdout, p.stderr} {
		select {
		case <-l.done:
		case <-ctx.Done():
			require.FailNow(t, "cellrun did not exit", "stdout:\n%s\nstderr:\n%s",
				strings.Join(p.stdout.all(), "\n"), strings.Join(p.stderr.all(), "\n"))
		}
	}
	err := p.cmd.Wait()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		require.NoError(t, err)
	}
	return p.cmd.ProcessState.ExitCode()
}

// runCellrun runs cellrun to its end.
func runCellrun(t *testing.T, args ...string) (*cellrunProc, int) {
	t.Helper()
	p := startCellrun(t, nil, args...)
	return p, p.wait(testContext(t), t)
}

var pidPattern = regexp.MustCompile(`(?:pid|grandchild)=(\d+)`)

// pids are the processes a cellrun's ranks said they were: ranks and the
// children they spawned.
func (p *cellrunProc) pids(t *testing.T) []int {
	var pids []int
	for _, line := range p.stdout.all() {
		if m := pidPattern.FindStringSubmatch(line); m != nil {
			pid, err := strconv.Atoi(m[1])
			require.NoError(t, err)
			pids = append(pids, pid)
		}
	}
	return pids
}

// assertClean checks that cellrun left nothing behind: every process its
// ranks reported is gone, and its temporary directory is empty.
func (p *cellrunProc) assertClean(ctx context.Context, t *testing.T, wantPids int) {
	t.Helper()
	pids := p.pids(t)
	assert.Len(t, pids, wantPids, "processes reported by the ranks")
	for _, pid := range pids {
		waitGone(ctx, t, pid)
	}
	entries, err := os.ReadDir(p.tmp)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.Empty(t, names, "cellrun left files in its TMPDIR")
}

// waitGone waits until pid no longer runs. A SIGKILL is delivered
// asynchronously, hence the wait; a zombie counts as gone, since it runs
// no more and its parent may not be ours to reap it.
func waitGone(ctx context.Context, t *testing.T, pid int) {
	t.Helper()
	for {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return
		}
		// The state follows the command name in parentheses.
		if i := strings.LastIndexByte(string(stat), ')'); i > 0 && strings.HasPrefix(string(stat[i:]), ") Z") {
			return
		}
		select {
		case <-time.After(10 * time.Millisecond):
		case <-ctx.Done():
			require.FailNow(t, "process leaked", "pid %d still runs: %s", pid, stat)
		}
	}
}

// rankLines are the stdout lines of rank r, without the prefix.
func rankLines(lines []string, r int) []string {
	prefix := "[" + strconv.Itoa(r) + "] "
	var out []string
	for _, l := range lines {
		if rest, ok := strings.CutPrefix(l, prefix); ok {
			out = append(out, rest)
		}
	}
	return out
}

// ownLines are the stderr lines that cellrun itself wrote: those without a
// rank prefix.
func ownLines(lines []string) []string {
	var out []string
	for _, l := range lines {
		if !strings.HasPrefix(l, "[") {
			out = append(out, l)
		}
	}
	return out
}

// freePort finds a loopback port nobody listens on right now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	return port
}

// signalWhenBlocked waits until n ranks block, then sends sig to cellrun.
func (p *cellrunProc) signalWhenBlocked(ctx context.Context, t *testing.T, n int, sig syscall.Signal) {
	t.Helper()
	p.stdout.waitCount(ctx, t, "blocked", n)
	require.NoError(t, p.cmd.Process.Signal(sig))
}
