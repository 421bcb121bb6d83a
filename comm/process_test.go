package comm

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/bootstrap/etcdserver"
)

// Multi-process tests run each rank as this test binary, re-executed with
// the environment a launcher gives ranks plus the name of a scenario,
// which TestMain dispatches to instead of running the tests. A rank
// reports on its standard output, one line at a time, and reads
// instructions from its standard input.
const envScenario = "COMM_TEST_SCENARIO"

func TestMain(m *testing.M) {
	if s := os.Getenv(envScenario); s != "" {
		os.Exit(rankMain(s))
	}
	os.Exit(m.Run())
}

// rankProc is a rank running in its own process.
type rankProc struct {
	rank   int
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	out    chan string
	stderr *bytes.Buffer
}

// startRanks starts the ranks of a job running scenario; env adds
// variables to every rank's environment. The test's cleanup kills ranks
// still running.
func startRanks(t *testing.T, srv *etcdserver.Server, world int, scenario string, env ...string) []*rankProc {
	t.Helper()
	job := jobID(t)
	procs := make([]*rankProc, world)
	for r := range world {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(),
			envScenario+"="+scenario,
			EnvRank+"="+strconv.Itoa(r),
			EnvWorldSize+"="+strconv.Itoa(world),
			EnvLocalRank+"="+strconv.Itoa(r),
			EnvLocalWorldSize+"="+strconv.Itoa(world),
			EnvJob+"="+job,
			EnvEtcdEndpoints+"="+strings.Join(srv.Endpoints(), ","),
			EnvPaths+"=2",
		)
		cmd.Env = append(cmd.Env, env...)
		p := &rankProc{rank: r, cmd: cmd, out: make(chan string, 64), stderr: &bytes.Buffer{}}
		cmd.Stderr = p.stderr
		var err error
		p.stdin, err = cmd.StdinPipe()
		require.NoError(t, err)
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				p.out <- sc.Text()
			}
			close(p.out)
		}()
		procs[r] = p
		t.Cleanup(func() {
			if cmd.ProcessState == nil {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
			}
		})
	}
	return procs
}

// expect waits for the rank's next line and checks its prefix.
func (p *rankProc) expect(ctx context.Context, t *testing.T, prefix string) string {
	t.Helper()
	select {
	case line, ok := <-p.out:
		require.True(t, ok, "rank %d ended its output while we waited for %q; its stderr:\n%s", p.rank, prefix, p.stderr)
		require.True(t, strings.HasPrefix(line, prefix), "rank %d said %q, want %q...; its stderr:\n%s", p.rank, line, prefix, p.stderr)
		return line
	case <-ctx.Done():
		require.FailNow(t, "rank did not answer", "rank %d, waiting for %q: %v; its stderr:\n%s", p.rank, prefix, ctx.Err(), p.stderr)
		return ""
	}
}

func (p *rankProc) send(t *testing.T, line string) {
	t.Helper()
	_, err := fmt.Fprintln(p.stdin, line)
	require.NoError(t, err, "rank %d", p.rank)
}

// wait waits for the rank to exit and checks that it succeeded.
func (p *rankProc) wait(ctx context.Context, t *testing.T) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		for range p.out {
			// Lines not expected are not checked.
		}
		done <- p.cmd.Wait()
	}()
	select {
	case err := <-done:
		require.NoError(t, err, "rank %d; its stderr:\n%s", p.rank, p.stderr)
	case <-ctx.Done():
		require.FailNow(t, "rank did not exit", "rank %d: %v; its stderr:\n%s", p.rank, ctx.Err(), p.stderr)
	}
}

// rankMain is a rank's main function: it joins the job from the
// environment, runs the scenario and reports.
func rankMain(scenario string) int {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	// Only a test of deaths wants them noticed fast; elsewhere a loaded
	// machine must not make a slow rank look dead.
	ttl := 5 * time.Second
	if scenario == "kill" || scenario == "wildcards" {
		ttl = testTTL
	}
	c, err := Init(ctx, Options{LeaseTTL: ttl, Logger: log})
	if err != nil {
		fmt.Fprintln(os.Stderr, "init:", err)
		return 2
	}
	in := bufio.NewScanner(os.Stdin)
	f := scenarios[scenario]
	if f == nil {
		fmt.Fprintln(os.Stderr, "no scenario", scenario)
		return 2
	}
	err = f(ctx, c, in)
	if cerr := c.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("close: %w", cerr)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "rank %d: %v\n", c.Rank(), err)
		fmt.Println("error:", err)
		return 1
	}
	fmt.Println("ok")
	return 0
}

// scenarios are what the ranks of a multi-process test run.
var scenarios = map[string]func(ctx context.Context, c *Comm, in *bufio.Scanner) error{
	"exchange": scenarioExchange,
	"kill":     scenarioKill,
	"abort":    scenarioAbort,
	// wildcard_test.go
	"wildcards": scenarioWildcards,
}

// Four ranks in four processes exchange over shared memory and over
// forced tcp: rings of many sizes (up to 64 MiB on shared memory),
// zero-copy and staged, tags in any order, an ordered-channel mismatch, a
// split.
func TestProcessExchange(t *testing.T) {
	for _, tr := range transports {
		t.Run(string(tr), func(t *testing.T) {
			srv := startServer(t)
			ctx := bounded(t)
			procs := startRanks(t, srv, 4, "exchange", EnvTransport+"="+string(tr))
			for _, p := range procs {
				p.expect(ctx, t, "ok")
				p.wait(ctx, t)
			}
		})
	}
}

// A rank killed with SIGKILL while the others wait on it: every survivor's
// waits fail with an error naming its rank, host and pid, in bounded time,
// and the survivors go on talking to each other and close cleanly.
//
// They then shrink the world to themselves, over shm and over tcp.
func TestProcessKill(t *testing.T) {
	for _, tr := range transports {
		t.Run(string(tr), func(t *testing.T) { processKill(t, tr) })
	}
}

func processKill(t *testing.T, tr Transport) {
	srv := startServer(t)
	ctx := bounded(t)
	survivors := killLast(ctx, t, startRanks(t, srv, 4, "kill", EnvTransport+"="+string(tr)))
	for _, p := range survivors {
		p.send(t, "go")
	}
	for _, p := range survivors {
		p.expect(ctx, t, "shrunk 3")
		p.expect(ctx, t, "ok")
		p.wait(ctx, t)
	}
}

// killLast kills the last of procs once it is ready and the others wait
// on it (each printed "waiting"), and checks that each of the others
// reports two waits failed naming its rank and pid ("dead RANK PID ...").
// It returns the others.
func killLast(ctx context.Context, t *testing.T, procs []*rankProc) []*rankProc {
	t.Helper()
	n := len(procs) - 1
	victim, survivors := procs[n], procs[:n]
	victim.expect(ctx, t, "ready")
	for _, p := range survivors {
		p.expect(ctx, t, "waiting")
	}
	pid := victim.cmd.Process.Pid
	require.NoError(t, victim.cmd.Process.Signal(syscall.SIGKILL))
	_ = victim.cmd.Wait()
	for _, p := range survivors {
		for range 2 {
			line := p.expect(ctx, t, "dead ")
			require.Contains(t, line, fmt.Sprintf("dead %d %d ", n, pid), "rank %d", p.rank)
		}
	}
	return survivors
}

// Abort on one rank: the waiters of every other rank fail naming it.
func TestProcessAbort(t *testing.T) {
	srv := startServer(t)
	ctx := bounded(t)
	procs := startRanks(t, srv, 4, "abort")
	procs[2].expect(ctx, t, "ready")
	for _, r := range []int{0, 1, 3} {
		procs[r].expect(ctx, t, "waiting")
	}
	procs[2].send(t, "go")
	for _, r := range []int{0, 1, 3} {
		procs[r].expect(ctx, t, "aborted")
	}
	for _, p := range procs {
		p.expect(ctx, t, "ok")
		p.wait(ctx, t)
	}
}
