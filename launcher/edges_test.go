package launcher

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ownLine is the one line cellrun wrote itself, failing the test if it
// wrote none or several, or anything that looks like a crash.
func ownLine(t *testing.T, p *cellrunProc) string {
	t.Helper()
	stderr := p.stderr.all()
	joined := strings.Join(stderr, "\n")
	assert.NotContains(t, joined, "panic")
	assert.NotContains(t, joined, "goroutine ")
	own := ownLines(stderr)
	for len(own) > 0 && strings.HasPrefix(own[len(own)-1], "Run 'cellrun --help'") {
		own = own[:len(own)-1]
	}
	require.Len(t, own, 1, "cellrun writes one line: %q", stderr)
	return own[0]
}

// TestTooManyRanks asks for more ranks than cellrun allows, and than the
// file descriptors it may open allow: one line naming the flag and the
// limit, before anything starts.
func TestTooManyRanks(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	p, code := runCellrun(t, "-n", "100000", bin.rankprog)
	assert.Equal(t, ExitUsage, code)
	assert.Equal(t, `cellrun: -n/--nproc-per-node "100000": want at most 4096 ranks per node`, ownLine(t, p))

	p = startCommand(t, t.TempDir(), nil, "/bin/sh", "-c", `ulimit -n 200 && exec "$0" -n 40 "$1"`, bin.cellrun, bin.rankprog)
	assert.Equal(t, ExitUsage, p.wait(ctx, t))
	assert.Regexp(t, `^cellrun: -n/--nproc-per-node "40": this machine allows at most \d+ ranks here: RLIMIT_NOFILE of cellrun \(ulimit -n 200, `, ownLine(t, p))
	assert.Empty(t, p.stdout.all(), "no rank started")
}

// TestPidsCgroupLimit runs cellrun in a pids cgroup too small for its
// ranks: refused before starting, naming the cgroup. It needs root and a
// pids controller (v1 or v2) it can create a group in.
func TestPidsCgroupLimit(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("creating a pids cgroup needs root")
	}
	var group string
	for _, root := range []string{"/sys/fs/cgroup/pids", "/sys/fs/cgroup"} {
		if _, err := os.Stat(filepath.Join(root, "cgroup.procs")); err != nil {
			continue
		}
		dir := filepath.Join(root, "rdmacell-launcher-test-"+strconv.Itoa(os.Getpid()))
		if err := os.Mkdir(dir, 0o755); err != nil {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, "pids.max"), []byte("16"), 0o644); err != nil {
			_ = os.Remove(dir)
			continue
		}
		group = dir
		break
	}
	if group == "" {
		t.Skip("no pids cgroup controller to create a group in")
	}
	t.Cleanup(func() { _ = os.Remove(group) }) // once empty: after the processes are reaped
	ctx := testContext(t)
	script := `echo $$ > "$2/cgroup.procs" && exec "$0" -n 8 "$1"`
	p := startCommand(t, t.TempDir(), nil, "/bin/sh", "-c", script, bin.cellrun, bin.rankprog, group)
	assert.Equal(t, ExitUsage, p.wait(ctx, t))
	assert.Regexp(t, `^cellrun: -n/--nproc-per-node "8": this machine allows at most \d+ ranks here: the pids cgroup `+
		`.*rdmacell-launcher-test-\d+ \(pids.max 16, \d+ in use\)`, ownLine(t, p))
}

// TestRankCannotStart gives cellrun a program the kernel refuses to run
// (its interpreter does not exist): the job fails with one line naming
// the rank and the OS error.
func TestRankCannotStart(t *testing.T) {
	t.Parallel()
	prog := filepath.Join(t.TempDir(), "broken")
	require.NoError(t, os.WriteFile(prog, []byte("#!/nonexistent/interpreter\n"), 0o755))
	p, code := runCellrun(t, "-n", "3", prog)
	assert.Equal(t, ExitFailure, code)
	assert.Equal(t, "cellrun: start rank 0 ("+prog+"): fork/exec "+prog+": no such file or directory", ownLine(t, p))
	p.assertClean(testContext(t), t, 0)
}

// TestRefusedEtcd points cellrun at an etcd endpoint nobody serves: it
// fails after its bounded retries, before starting any rank, naming the
// endpoint.
func TestRefusedEtcd(t *testing.T) {
	t.Parallel()
	endpoint := "127.0.0.1:" + strconv.Itoa(freePort(t))
	p, code := runCellrun(t, "--etcd", endpoint, "--job", "refused", "-n", "2", bin.rankprog)
	assert.Equal(t, ExitFailure, code)
	assert.Regexp(t, `^cellrun: --etcd `+endpoint+`: .*etcd unreachable after \d+ attempts: .*connection refused$`, ownLine(t, p))
	assert.Empty(t, p.stdout.all(), "no rank started")
}

// TestKilledCellrunLeavesNothing kills cellrun outright while it serves
// etcd with TLS: its data directory and TLS files stay until the next
// cellrun of this user starts, which removes them.
func TestKilledCellrunLeavesNothing(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	tmp := t.TempDir()
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	p := startCommand(t, tmp, nil, bin.cellrun, "--etcd-serve", addr, "--join", NewToken(), "-n", "1", bin.rankprog, "-block")
	p.signalWhenBlocked(ctx, t, 1, syscall.SIGKILL)
	assert.Equal(t, -1, p.wait(ctx, t), "killed")
	for _, pid := range p.pids(t) {
		waitGone(ctx, t, pid)
	}
	for _, pattern := range []string{"rdmacell-etcd-*", "cellrun-tls-*"} {
		left, err := filepath.Glob(filepath.Join(tmp, pattern))
		require.NoError(t, err)
		require.Len(t, left, 1, "the killed cellrun could not remove its %s", pattern)
	}

	next := startCommand(t, tmp, nil, bin.cellrun, "-n", "1", bin.rankprog)
	require.Equal(t, 0, next.wait(ctx, t), "stderr: %q", next.stderr.all())
	next.assertClean(ctx, t, 1)
}
