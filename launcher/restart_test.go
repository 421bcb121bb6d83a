package launcher

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/rdmacell/rdmacell/bootstrap"
	"github.com/rdmacell/rdmacell/bootstrap/etcdserver"
	"github.com/stretchr/testify/require"
)

// generationLines are the stdout lines of rank r in generation gen,
// without the prefix.
func generationLines(lines []string, gen, r int) []string {
	prefix := string(linePrefix(r, gen))
	var out []string
	for _, l := range lines {
		if rest, ok := strings.CutPrefix(l, prefix); ok {
			out = append(out, rest)
		}
	}
	return out
}

// generationValue is the value of "name=" in rank r's lines of generation
// gen, e.g. its pid.
func generationValue(t *testing.T, lines []string, gen, r int, name string) string {
	t.Helper()
	for _, l := range generationLines(lines, gen, r) {
		if v, ok := strings.CutPrefix(l, name+"="); ok {
			return v
		}
	}
	require.FailNow(t, "rank did not report "+name, "generation %d rank %d:\n%s", gen, r, strings.Join(lines, "\n"))
	return ""
}

var jobOfRank = regexp.MustCompile(` job=(\S+) `)

// TestRestart fails a rank of the first generation under --max-restarts 1:
// cellrun says so in one line, starts the whole job again as generation 1
// (a new job id, a new secret, RDMACELL_RESTART_COUNT=1, output prefixed
// with the generation), and exits 0 when that generation succeeds.
func TestRestart(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	logs := t.TempDir()
	p, code := runCellrun(t, "-n", "3", "--max-restarts", "1", "--restart-delay", "100ms", "--log-dir", logs, bin.rankprog,
		"-fail-rank", "1", "-code", "3", "-fail-generations", "1")
	stdout, stderr := p.stdout.all(), p.stderr.all()
	out := "stdout:\n" + strings.Join(stdout, "\n") + "\nstderr:\n" + strings.Join(stderr, "\n")
	require.Equal(t, 0, code, out)

	own := ownLines(stderr)
	require.Len(t, own, 1, "one line, for the restart: %q", own)
	pid := generationValue(t, stdout, 0, 1, "pid")
	assert.Regexp(t, `^cellrun: rank 1 \(pid `+pid+`, host [^,]+\) exited with code 3; restart 1 of 1: the job starts again as generation 1 in 100ms$`, own[0])

	var jobs [2]string
	for gen := range 2 {
		for r := range 3 {
			lines := generationLines(stdout, gen, r)
			require.NotEmpty(t, lines, "generation %d rank %d\n%s", gen, r, out)
			m := jobOfRank.FindStringSubmatch(lines[0])
			require.NotNil(t, m, lines[0])
			jobs[gen] = m[1]
			assert.Equal(t, "restart count="+strconv.Itoa(gen), lines[1], "generation %d rank %d", gen, r)
			assert.Contains(t, lines, "passed barrier", "generation %d rank %d", gen, r)
		}
	}
	assert.Equal(t, jobs[0]+".g1", jobs[1], "each generation meets under its own job id")
	assert.NotEqual(t, generationValue(t, stdout, 0, 0, "secret-hash"), generationValue(t, stdout, 1, 0, "secret-hash"),
		"each generation has its own secret")
	for r := range 3 {
		assert.NotContains(t, generationLines(stdout, 1, r), "failing with code 3", "generation 1 rank %d", r)
	}
	failed, err := os.ReadFile(filepath.Join(logs, "rank.1.log"))
	require.NoError(t, err)
	assert.Contains(t, string(failed), "failing with code 3", "the first generation's log is kept")
	restarted, err := os.ReadFile(filepath.Join(logs, "rank.1.g1.log"))
	require.NoError(t, err)
	assert.Contains(t, string(restarted), "restart count=1\n")
	p.assertClean(ctx, t, 6)
}

// TestRestartsExhausted fails a rank in every generation: after
// --max-restarts 1 the job fails with that rank's code, and the last line
// names the last failure, the one before it the first.
func TestRestartsExhausted(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	p, code := runCellrun(t, "-n", "2", "--max-restarts", "1", bin.rankprog, "-kill-rank", "0")
	stdout, stderr := p.stdout.all(), p.stderr.all()
	out := "stdout:\n" + strings.Join(stdout, "\n") + "\nstderr:\n" + strings.Join(stderr, "\n")
	require.Equal(t, 128+9, code, out)

	own := ownLines(stderr)
	require.Len(t, own, 2, "%q", own)
	first, last := generationValue(t, stdout, 0, 0, "pid"), generationValue(t, stdout, 1, 0, "pid")
	assert.Regexp(t, `^cellrun: rank 0 \(pid `+first+`, host [^,]+\) killed by signal 9 \(killed\); restart 1 of 1: the job starts again as generation 1$`, own[0])
	assert.Regexp(t, `^cellrun: rank 0 \(pid `+last+`, host [^,]+\) killed by signal 9 \(killed\) \(generation 1, after 1 of --max-restarts 1\)$`, own[1])
	p.assertClean(ctx, t, 4)
}

// TestTwoNodesRestart fails a rank of node 1 in the first generation: both
// nodes stop their ranks, meet for generation 1, start it together, and
// exit 0.
func TestTwoNodesRestart(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	flags := []string{"--max-restarts", "1"}
	args := []string{"-fail-rank", "3", "-code", "5", "-fail-generations", "1"}
	node0, node1 := startTwoNodesWith(t, "two-nodes-restart", flags, flags, args, args)
	code0, code1 := node0.wait(ctx, t), node1.wait(ctx, t)
	out := ""
	for node, p := range []*cellrunProc{node0, node1} {
		out += "node " + strconv.Itoa(node) + " stdout:\n" + strings.Join(p.stdout.all(), "\n") + "\nstderr:\n" + strings.Join(p.stderr.all(), "\n") + "\n"
	}
	require.Equal(t, 0, code0, out)
	require.Equal(t, 0, code1, out)

	pid := generationValue(t, node1.stdout.all(), 0, 3, "pid")
	want := `^cellrun: rank 3 \(pid ` + pid + `, host [^,]+, node 1\) exited with code 5; restart 1 of 1: the job starts again as generation 1$`
	for node, p := range []*cellrunProc{node0, node1} {
		own := ownLines(p.stderr.all())
		require.Len(t, own, 1, "node %d: %q", node, own)
		assert.Regexp(t, want, own[0], "node %d", node)
		for local := range 2 {
			r := node*2 + local
			lines := generationLines(p.stdout.all(), 1, r)
			require.NotEmpty(t, lines, "node %d rank %d\n%s", node, r, out)
			assert.Contains(t, lines[0], " job=two-nodes-restart.g1 ", "node %d rank %d", node, r)
			assert.Contains(t, lines, "passed barrier", "generation 1, node %d rank %d", node, r)
		}
	}
	assert.Equal(t, generationValue(t, node0.stdout.all(), 1, 0, "secret-hash"), generationValue(t, node1.stdout.all(), 1, 2, "secret-hash"),
		"the nodes derive the same secret for generation 1")
	assert.NotEqual(t, generationValue(t, node0.stdout.all(), 0, 0, "secret-hash"), generationValue(t, node0.stdout.all(), 1, 0, "secret-hash"))
	node0.assertClean(ctx, t, 4)
	node1.assertClean(ctx, t, 4)
}

// TestTwoNodesDisagreeOnRestarts: nodes with different --max-restarts
// would not restart together; the job is refused, naming the flag.
func TestTwoNodesDisagreeOnRestarts(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	node0, node1 := startTwoNodesWith(t, "two-nodes-disagree", []string{"--max-restarts", "2"}, nil, nil, nil)
	for node, p := range []*cellrunProc{node0, node1} {
		code := p.wait(ctx, t)
		assert.Equal(t, ExitUsage, code, "node %d", node)
		assert.Contains(t, strings.Join(p.stderr.all(), "\n"), "--max-restarts", "node %d", node)
		assert.Contains(t, strings.Join(p.stderr.all(), "\n"), "the same on every node", "node %d", node)
	}
}

// TestSignalIsFinal: a signal to cellrun ends the job with its code and
// line, restarts or not, whether it comes while the ranks run or while
// cellrun waits to start the next generation; no rank of a next
// generation starts.
func TestSignalIsFinal(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		args   []string
		ready  func(ctx context.Context, t *testing.T, p *cellrunProc) // waits for the moment to signal
		before int                                                     // cellrun's lines before the last
		last   string
	}{
		{
			name: "while the ranks run", args: []string{"--max-restarts", "3", bin.rankprog, "-block"},
			ready: func(ctx context.Context, t *testing.T, p *cellrunProc) { p.stdout.waitCount(ctx, t, "blocked", 2) },
			last:  "cellrun: stopped by signal 15 (terminated)",
		},
		{
			name: "during the restart delay", args: []string{"--max-restarts", "1", "--restart-delay", "1m", bin.rankprog, "-fail-rank", "1"},
			ready: func(ctx context.Context, t *testing.T, p *cellrunProc) {
				p.stderr.waitCount(ctx, t, "restart 1 of 1", 1)
			},
			before: 1,
			last:   "cellrun: stopped by signal 15 (terminated) (generation 1, after 1 of --max-restarts 1)",
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t)
			p := startCellrun(t, nil, append([]string{"-n", "2"}, tt.args...)...)
			tt.ready(ctx, t, p)
			require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
			assert.Equal(t, 128+15, p.wait(ctx, t))
			own := ownLines(p.stderr.all())
			require.Len(t, own, tt.before+1, "%q", own)
			assert.Equal(t, tt.last, own[tt.before])
			assert.Empty(t, generationLines(p.stdout.all(), 1, 0), "no rank of generation 1")
		})
	}
}

// TestRestartForgetsTheLastGeneration runs a job that restarts once on an
// etcd of its own: once it succeeded, none of its keys is left, neither
// of generation 1 (its ranks all left cleanly) nor of generation 0, whose
// failed rank cellrun cleared up before it started generation 1.
func TestRestartForgetsTheLastGeneration(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	srv, err := etcdserver.Start(ctx, etcdserver.Config{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close(context.Background()) })
	endpoint := strings.Join(srv.Endpoints(), ",")
	p, code := runCellrun(t, "--etcd", endpoint, "--job", "forget", "-n", "3", "--max-restarts", "1",
		bin.rankprog, "-kill-rank", "2", "-fail-generations", "1")
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", strings.Join(p.stdout.all(), "\n"), strings.Join(p.stderr.all(), "\n"))

	st, err := bootstrap.NewEtcdStore(ctx, bootstrap.ClientConfig{Endpoints: srv.Endpoints()})
	require.NoError(t, err)
	defer st.Close()
	left, _, err := st.List(ctx, bootstrap.DefaultKeyPrefix+"forget")
	require.NoError(t, err)
	var keys []string
	for _, kv := range left {
		keys = append(keys, kv.Key)
	}
	assert.Empty(t, keys, "keys the job left in etcd")
}
