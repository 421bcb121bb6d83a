package launcher

import (
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var pidOfRank = regexp.MustCompile(`^pid=(\d+)$`)

// rankPID is the pid rank r reported.
func rankPID(t *testing.T, stdout []string, r int) int {
	t.Helper()
	for _, line := range rankLines(stdout, r) {
		if m := pidOfRank.FindStringSubmatch(line); m != nil {
			pid, err := strconv.Atoi(m[1])
			require.NoError(t, err)
			return pid
		}
	}
	require.FailNow(t, "rank did not report its pid", "rank %d", r)
	return 0
}

// TestRankFailure makes one rank fail while the others block in a barrier
// it will never reach: cellrun stops them, exits with the failed rank's
// code, and says which rank failed and how in exactly one line.
func TestRankFailure(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		args     []string
		failed   int
		code     int
		how      string
		survivor string // what the ranks stopped by cellrun print
	}{
		{
			name: "exit code", args: []string{"-fail-rank", "2", "-code", "3"},
			failed: 2, code: 3, how: "exited with code 3", survivor: "got signal terminated",
		},
		{
			name: "SIGKILL", args: []string{"-kill-rank", "1"},
			failed: 1, code: 128 + 9, how: "killed by signal 9 (killed)", survivor: "got signal terminated",
		},
		{
			// The survivors ignore SIGTERM: the grace period ends in SIGKILL.
			name: "survivors ignore SIGTERM", args: []string{"-fail-rank", "0", "-code", "4", "-ignore-term"},
			failed: 0, code: 4, how: "exited with code 4", survivor: "ignoring signal terminated",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t)
			args := append([]string{"-n", "4", "--grace", "500ms", bin.rankprog, "-block", "-spawn"}, tt.args...)
			p, code := runCellrun(t, args...)
			stdout, stderr := p.stdout.all(), p.stderr.all()
			assert.Equal(t, tt.code, code, "stdout:\n%s\nstderr:\n%s", strings.Join(stdout, "\n"), strings.Join(stderr, "\n"))

			own := ownLines(stderr)
			require.Len(t, own, 1, "cellrun writes exactly one line: %q", own)
			pid := rankPID(t, stdout, tt.failed)
			assert.Regexp(t, regexp.MustCompile(`^cellrun: rank `+strconv.Itoa(tt.failed)+` \(pid `+strconv.Itoa(pid)+
				`, host [^,]+\) `+regexp.QuoteMeta(tt.how)+`$`), own[0])

			for r := range 4 {
				if r == tt.failed {
					continue
				}
				lines := rankLines(stdout, r)
				assert.Contains(t, lines, "blocked", "rank %d", r)
				assert.Contains(t, lines, tt.survivor, "rank %d was sent SIGTERM", r)
			}
			p.assertClean(ctx, t, 8) // 4 ranks, each with a child
		})
	}
}

// TestSignals sends a signal to cellrun while its ranks block: the signal
// is forwarded, the ranks exit, and cellrun exits with 128+signal after one
// line. Nothing is left running, not even the ranks' own children.
func TestSignals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		sig    syscall.Signal
		args   []string
		second bool // ranks ignore the signal: a second one kills them
		line   string
	}{
		{name: "SIGTERM", sig: syscall.SIGTERM, line: "cellrun: stopped by signal 15 (terminated)"},
		{name: "SIGINT", sig: syscall.SIGINT, line: "cellrun: stopped by signal 2 (interrupt)"},
		{name: "second signal kills", sig: syscall.SIGTERM, args: []string{"-ignore-term"}, second: true,
			line: "cellrun: stopped by signal 15 (terminated)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t)
			// A grace period longer than the test: only a second signal can
			// end ranks that ignore the first.
			args := append([]string{"-n", "3", "--grace", "1h", bin.rankprog, "-block", "-spawn"}, tt.args...)
			p := startCellrun(t, nil, args...)
			p.signalWhenBlocked(ctx, t, 3, tt.sig)
			if tt.second {
				// Once every rank has seen the first signal, cellrun has
				// handled it: the second cannot merge into it.
				p.stdout.waitCount(ctx, t, "ignoring signal", 3)
				require.NoError(t, p.cmd.Process.Signal(tt.sig))
			}
			code := p.wait(ctx, t)
			stdout := p.stdout.all()
			assert.Equal(t, 128+int(tt.sig), code, "stdout:\n%s", strings.Join(stdout, "\n"))
			assert.Equal(t, []string{tt.line}, ownLines(p.stderr.all()))
			for r := range 3 {
				got := "got signal " + tt.sig.String()
				if tt.second {
					assert.NotContains(t, rankLines(stdout, r), got, "rank %d", r)
				} else {
					assert.Contains(t, rankLines(stdout, r), got, "rank %d", r)
				}
			}
			p.assertClean(ctx, t, 6)
		})
	}
}

// TestStoppedRankBlamed stops one rank (SIGSTOP) while all block in a
// barrier: the others declare it dead when its lease expires and exit 1,
// and cellrun's line names the stopped rank, not the first to exit.
func TestStoppedRankBlamed(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	p := startCellrun(t, nil, "-n", "3", "--grace", "500ms", bin.rankprog, "-block", "-die-with-peer")
	p.stdout.waitCount(ctx, t, "blocked", 3)
	stopped := rankPID(t, p.stdout.all(), 1)
	require.NoError(t, syscall.Kill(stopped, syscall.SIGSTOP))

	assert.Equal(t, 1, p.wait(ctx, t))
	own := ownLines(p.stderr.all())
	require.Len(t, own, 1, "cellrun writes exactly one line: %q", p.stderr.all())
	assert.Regexp(t, regexp.MustCompile(`^cellrun: rank 1 \(pid `+strconv.Itoa(stopped)+`, host [^,]+\) was stopped \(SIGSTOP or a debugger\) `+
		`and declared dead by the others; rank [02] \(pid \d+, host [^,]+\) exited with code 1$`), own[0])
	p.assertClean(ctx, t, 3)
}
