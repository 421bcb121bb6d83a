package launcher

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var envLine = regexp.MustCompile(`^env rank=(\d+) world=(\d+) local=(\d+) localworld=(\d+) job=(\S+) endpoints=(\S+)$`)

// TestFourRanks runs four ranks with every knob set: each rank sees its
// environment, they rendezvous through the embedded etcd and pass a
// barrier, every line is prefixed with its rank on the stream it was
// written to, and --log-dir keeps each rank's output unprefixed.
func TestFourRanks(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	logDir := filepath.Join(t.TempDir(), "logs")
	p, code := runCellrun(t, "-n", "4", "--transport", "tcp", "--paths", "3", "--cell-size", "64KiB",
		"--policy", "spray", "--debug=cell,bootstrap", "--rendezvous-timeout", "30s", "--log-dir", logDir, bin.rankprog)
	stdout, stderr := p.stdout.all(), p.stderr.all()
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", strings.Join(stdout, "\n"), strings.Join(stderr, "\n"))

	for _, line := range stdout {
		assert.Regexp(t, `^\[[0-3]\] `, line, "every output line carries its rank")
	}
	jobs := map[string]bool{}
	for r := range 4 {
		lines := rankLines(stdout, r)
		require.NotEmpty(t, lines, "rank %d printed nothing", r)
		m := envLine.FindStringSubmatch(lines[0])
		require.NotNil(t, m, "rank %d: %q", r, lines[0])
		assert.Equal(t, []string{strconv.Itoa(r), "4", strconv.Itoa(r), "4"}, m[1:5], "rank %d: rank, world, local, local world", r)
		assert.Regexp(t, `^cellrun-[0-9a-f]+$`, m[5])
		assert.Regexp(t, `^unix:///.*/rdmacell-etcd-\d+-\d+/client\.sock$`, m[6], "the embedded etcd of one node is on a private socket")
		jobs[m[5]] = true
		assert.Subset(t, lines, []string{
			"knob RDMACELL_TRANSPORT=tcp",
			"knob RDMACELL_PATHS=3",
			"knob RDMACELL_CELL_SIZE=65536",
			"knob RDMACELL_POLICY=spray",
			"knob RDMACELL_DEBUG=cell,bootstrap",
			"knob RDMACELL_RENDEZVOUS_TIMEOUT=30s",
			"knob RDMACELL_ETCD_USER unset",
			"passed barrier",
		}, "rank %d", r)
		assert.Contains(t, stderr, "["+strconv.Itoa(r)+"] stderr line from rank "+strconv.Itoa(r), "stderr stays stderr")

		log, err := os.ReadFile(filepath.Join(logDir, "rank."+strconv.Itoa(r)+".log"))
		require.NoError(t, err)
		assert.Contains(t, string(log), lines[0]+"\n", "log of rank %d", r)
		assert.Contains(t, string(log), "stderr line from rank "+strconv.Itoa(r)+"\n", "log of rank %d", r)
		assert.NotContains(t, string(log), "[", "log files are not prefixed")
	}
	assert.Len(t, jobs, 1, "every rank is in the same job")
	for _, line := range stdout {
		assert.NotContains(t, line, "stderr line", "stdout stays stdout")
	}
	p.assertClean(ctx, t, 4)
}

// TestInheritedEnvironmentAndNoPrefix checks that knobs without flags are
// left out or inherited, that what cellrun owns is never inherited, and
// that --no-prefix leaves lines as the ranks wrote them.
func TestInheritedEnvironmentAndNoPrefix(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	p := startCellrun(t, []string{"RDMACELL_POLICY=ecmp", "RDMACELL_RANK=99", "RDMACELL_ETCD_USER=stale"},
		"--no-prefix", "-n", "2", bin.rankprog)
	code := p.wait(ctx, t)
	stdout := p.stdout.all()
	require.Equal(t, 0, code, "stderr:\n%s", strings.Join(p.stderr.all(), "\n"))

	ranks := map[string]bool{}
	for _, line := range stdout {
		assert.NotRegexp(t, `^\[\d+\] `, line)
		if m := envLine.FindStringSubmatch(line); m != nil {
			ranks[m[1]] = true
			assert.Equal(t, "2", m[2])
		}
	}
	assert.Equal(t, map[string]bool{"0": true, "1": true}, ranks, "a stale RDMACELL_RANK must not leak through")
	count := func(line string) int {
		n := 0
		for _, l := range stdout {
			if l == line {
				n++
			}
		}
		return n
	}
	assert.Equal(t, 2, count("knob RDMACELL_POLICY=ecmp"), "an inherited knob passes through")
	assert.Equal(t, 2, count("knob RDMACELL_TRANSPORT unset"), "a knob without flag is not set")
	assert.Equal(t, 2, count("knob RDMACELL_ETCD_USER unset"), "etcd credentials are never inherited")
	assert.Equal(t, 2, count("passed barrier"))
	p.assertClean(ctx, t, 2)
}

// TestExternalEtcd runs a job against an etcd that cellrun did not start.
func TestExternalEtcd(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	port := freePort(t)
	token := NewToken()
	server := startCellrun(t, nil, "--etcd-serve", "127.0.0.1:"+strconv.Itoa(port), "--join", token, "-n", "1", bin.rankprog, "-block")
	server.stdout.waitCount(ctx, t, "blocked", 1)

	endpoint := "127.0.0.1:" + strconv.Itoa(port)
	p, code := runCellrun(t, "--etcd", endpoint, "--join", token, "--job", "external-etcd", "-n", "2", bin.rankprog)
	require.Equal(t, 0, code, "stderr:\n%s", strings.Join(p.stderr.all(), "\n"))
	for r := range 2 {
		lines := rankLines(p.stdout.all(), r)
		require.NotEmpty(t, lines)
		m := envLine.FindStringSubmatch(lines[0])
		require.NotNil(t, m, lines[0])
		assert.Equal(t, []string{"external-etcd", endpoint}, m[5:7])
		assert.Contains(t, lines, "passed barrier")
	}
	p.assertClean(ctx, t, 2)

	require.NoError(t, server.cmd.Process.Signal(os.Interrupt))
	assert.Equal(t, 130, server.wait(ctx, t))
	server.assertClean(ctx, t, 1)
}

// TestCleanTCPJobIsQuiet runs a small training job of four ranks over tcp,
// whose teardown closes hundreds of connections: a clean run prints no
// warning or error, from cellrun or any rank.
func TestCleanTCPJobIsQuiet(t *testing.T) {
	t.Parallel()
	p, code := runCellrun(t, "--transport", "tcp", "-n", "4", "../examples/train", "-epochs", "2", "-samples", "1024")
	all := append(p.stdout.all(), p.stderr.all()...)
	require.Equal(t, 0, code, "%s", strings.Join(all, "\n"))
	for _, line := range all {
		assert.NotRegexp(t, `WARN|ERROR|level=(WARN|ERROR)`, line)
	}
	assert.Contains(t, strings.Join(p.stdout.all(), "\n"), "[0] weights identical on all 4 ranks")
}
