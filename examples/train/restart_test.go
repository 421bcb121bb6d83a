package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/bootstrap"
	"github.com/rdmacell/rdmacell/comm"
	"github.com/rdmacell/rdmacell/internal/launchtest"
	"github.com/rdmacell/rdmacell/internal/syncbuf"
	"github.com/rdmacell/rdmacell/launcher"
)

// restartArgs train long enough (about a second on four ranks) for a kill
// to land in the middle, with a checkpoint every few steps.
var restartArgs = []string{"-epochs", "6", "-samples", "2048", "-timeout", "90s", "-checkpoint-every", "5"}

// trainBin is the example, built once by TestMain so that the launcher
// starts the ranks at once instead of building first.
var trainBin string

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "train-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "train tests:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	trainBin = filepath.Join(dir, "train")
	if out, err := exec.Command("go", "build", "-o", trainBin, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "train tests: build: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// trainJob is the example running under the launcher in this process:
// its ranks are this process's children.
type trainJob struct {
	stdout, stderr syncbuf.Buffer
	done           chan struct{}
	code           int
	err            error
}

// startTrain runs the example as -n procs ranks with cfg's restarts.
func startTrain(ctx context.Context, bin string, procs int, cfg launcher.Config, args ...string) *trainJob {
	j := &trainJob{done: make(chan struct{})}
	cfg.Program, cfg.Args, cfg.ProcsPerNode, cfg.Nodes = bin, args, procs, 1
	cfg.Env = os.Environ()
	go func() {
		defer close(j.done)
		j.code, j.err = launcher.Run(ctx, cfg, &j.stdout, &j.stderr)
	}()
	return j
}

func (j *trainJob) out() string {
	return "stdout:\n" + j.stdout.String() + "\nstderr:\n" + j.stderr.String()
}

// waitOutput waits until stdout has a line starting with prefix, and says
// when it saw it.
func (j *trainJob) waitOutput(ctx context.Context, t *testing.T, prefix string) time.Time {
	t.Helper()
	for {
		for _, line := range strings.Split(j.stdout.String(), "\n") {
			if strings.HasPrefix(line, prefix) {
				return time.Now()
			}
		}
		select {
		case <-time.After(2 * time.Millisecond):
		case <-j.done:
			require.FailNow(t, "the job ended before "+prefix, j.out())
		case <-ctx.Done():
			require.FailNow(t, "no "+prefix, j.out())
		}
	}
}

// wait waits for the job's end.
func (j *trainJob) wait(ctx context.Context, t *testing.T) {
	t.Helper()
	select {
	case <-j.done:
	case <-ctx.Done():
		require.FailNow(t, "the job did not end", j.out())
	}
	require.NoError(t, j.err, j.out())
}

// lookupRank finds rank r of generation gen among this process's
// children in /proc, by the environment the launcher gave it.
func lookupRank(r, gen int) (int, bool) {
	want := []string{launcher.EnvRank + "=" + strconv.Itoa(r), launcher.EnvRestartCount + "=" + strconv.Itoa(gen)}
	tasks, _ := filepath.Glob("/proc/self/task/*/children")
	for _, task := range tasks {
		children, err := os.ReadFile(task)
		if err != nil {
			continue // the thread ended
		}
		for _, field := range strings.Fields(string(children)) {
			pid, err := strconv.Atoi(field)
			if err != nil {
				continue
			}
			environ, err := os.ReadFile("/proc/" + field + "/environ")
			if err != nil {
				continue // exited meanwhile
			}
			if containsAll(strings.Split(string(environ), "\x00"), want) {
				return pid, true
			}
		}
	}
	return 0, false
}

func containsAll(have, want []string) bool {
	for _, w := range want {
		found := false
		for _, h := range have {
			found = found || h == w
		}
		if !found {
			return false
		}
	}
	return true
}

// killRandomRank waits a random time below within, then SIGKILLs a
// random rank of generation gen, and says which (and its pid).
func killRandomRank(t *testing.T, procs, gen int, within time.Duration) (rank, pid int) {
	t.Helper()
	time.Sleep(rand.N(within))
	rank = rand.IntN(procs)
	pid = findRank(t, rank, gen)
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	t.Logf("killed rank %d (pid %d) of generation %d", rank, pid, gen)
	return rank, pid
}

// reference runs the example uninterrupted and returns its weights' hash
// and how long it trained (from its first line to its end).
func reference(ctx context.Context, t *testing.T, bin string, procs int, transport comm.Transport) (string, time.Duration) {
	t.Helper()
	j := startTrain(ctx, bin, procs, launcher.Config{Transport: string(transport)}, restartArgs...)
	started := j.waitOutput(ctx, t, "[0] training on")
	j.wait(ctx, t)
	took := time.Since(started)
	require.Zero(t, j.code, j.out())
	m := hashLine.FindStringSubmatch(j.stdout.String())
	require.NotNil(t, m, j.out())
	return m[2], took
}

// startRestartable runs the example uninterrupted for its weights' hash
// and its training time, then starts it again under --max-restarts 1 with
// a checkpoint directory, and returns once it trains.
func startRestartable(ctx context.Context, t *testing.T, procs int) (j *trainJob, want string, took time.Duration) {
	t.Helper()
	want, took = reference(ctx, t, trainBin, procs, "")
	j = startTrain(ctx, trainBin, procs, launcher.Config{MaxRestarts: 1},
		append([]string{"-checkpoint-dir", t.TempDir()}, restartArgs...)...)
	j.waitOutput(ctx, t, "[0] training on")
	return j, want, took
}

var restartedHash = regexp.MustCompile(`(?m)^\[g1 0\] weights identical on all (\d+) ranks \(hash (0x[0-9a-f]+)\)$`)

// TestTrainSurvivesKill SIGKILLs a random rank at a random step under
// --max-restarts 1 with a checkpoint directory: the job restarts, resumes
// from the last checkpoint, exits 0, and ends with the uninterrupted
// run's weights, bit for bit.
func TestTrainSurvivesKill(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const procs = 4
	j, want, took := startRestartable(ctx, t, procs)
	rank, pid := killRandomRank(t, procs, 0, took/2)
	j.wait(ctx, t)
	require.Zero(t, j.code, j.out())
	require.Regexp(t, fmt.Sprintf(`(?m)^cellrun: rank %d \(pid %d, host [^,]+\) killed by signal 9 \(killed\); restart 1 of 1: `, rank, pid),
		j.stderr.String(), j.out())
	m := restartedHash.FindStringSubmatch(j.stdout.String())
	require.NotNil(t, m, j.out())
	require.Equal(t, want, m[2], "the restarted job ends with the uninterrupted run's weights\n%s", j.out())
	if strings.Contains(j.stdout.String(), "[g1 0] resuming from") {
		t.Log("generation 1 resumed from a checkpoint")
	} else {
		t.Log("generation 1 started afresh: the kill came before the first checkpoint")
	}
}

// TestTrainKilledTwice kills a rank in each generation under
// --max-restarts 1: the job fails with the second rank's code, the last
// line names it, and the line before names the first.
func TestTrainKilledTwice(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const procs = 4
	j, _, took := startRestartable(ctx, t, procs)
	rank0, pid0 := killRandomRank(t, procs, 0, took/2)
	j.waitOutput(ctx, t, "[g1 0] training on")
	rank1, pid1 := killRandomRank(t, procs, 1, took/4)
	j.wait(ctx, t)
	require.Equal(t, 128+9, j.code, j.out())

	var own []string
	for _, line := range strings.Split(strings.TrimSpace(j.stderr.String()), "\n") {
		if strings.HasPrefix(line, "cellrun: ") {
			own = append(own, line)
		}
	}
	require.Len(t, own, 2, j.out())
	require.Regexp(t, fmt.Sprintf(`^cellrun: rank %d \(pid %d, host [^,]+\) killed by signal 9 \(killed\); restart 1 of 1: `, rank0, pid0), own[0])
	require.Regexp(t, fmt.Sprintf(`^cellrun: rank %d \(pid %d, host [^,]+\) killed by signal 9 \(killed\) \(generation 1, after 1 of --max-restarts 1\)$`, rank1, pid1), own[1])
}

// TestTrainResumesFromCheckpoint trains 3 epochs with a checkpoint at the
// end of each, then runs again for 6 epochs from the same directory: the
// second run resumes at the end of epoch 3, prints only epochs 4 to 6, and
// ends with the weights of 6 uninterrupted epochs.
func TestTrainResumesFromCheckpoint(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const procs = 2
	want, _ := reference(ctx, t, trainBin, procs, "")
	dir := t.TempDir()
	// 2048 samples in global batches of 64: 32 steps an epoch.
	args := func(epochs string) []string {
		return []string{"-epochs", epochs, "-samples", "2048", "-timeout", "90s", "-checkpoint-every", "32", "-checkpoint-dir", dir}
	}
	first := startTrain(ctx, trainBin, procs, launcher.Config{}, args("3")...)
	first.wait(ctx, t)
	require.Zero(t, first.code, first.out())

	second := startTrain(ctx, trainBin, procs, launcher.Config{}, args("6")...)
	second.wait(ctx, t)
	require.Zero(t, second.code, second.out())
	stdout := second.stdout.String()
	require.Contains(t, stdout, "[0] resuming from "+filepath.Join(dir, checkpointName)+" at epoch 3, step 32 of 32\n", second.out())
	require.NotContains(t, stdout, "[0] epoch 2 loss", second.out())
	require.Contains(t, stdout, "[0] epoch 6 loss", second.out())
	m := hashLine.FindStringSubmatch(stdout)
	require.NotNil(t, m, second.out())
	require.Equal(t, want, m[2], "3 epochs, then 3 more from the checkpoint, are 6 epochs")
}

// TestTrainSurvivesPause stops a random rank with SIGSTOP for 3 s, less
// than the lease TTL (bootstrap.DefaultLeaseTTL), then lets it go on with
// SIGCONT: slow is not dead, so nobody declares it dead, the job exits 0
// and ends with the uninterrupted run's weights. Over shared memory and
// over tcp, whose connections the stopped process's kernel keeps up.
func TestTrainSurvivesPause(t *testing.T) {
	const pause = 3 * time.Second
	require.Less(t, pause, bootstrap.DefaultLeaseTTL, "the pause must be shorter than the lease")
	for _, transport := range []comm.Transport{"shm", "tcp"} {
		t.Run(string(transport), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			const procs = 4
			want, took := reference(ctx, t, trainBin, procs, transport)
			j := startTrain(ctx, trainBin, procs, launcher.Config{Transport: string(transport)}, restartArgs...)
			j.waitOutput(ctx, t, "[0] training on")
			time.Sleep(rand.N(took / 4))
			rank := rand.IntN(procs)
			pid := findRank(t, rank, 0)
			require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP))
			time.Sleep(pause)
			require.NoError(t, syscall.Kill(pid, syscall.SIGCONT))
			t.Logf("paused rank %d (pid %d) for %v", rank, pid, pause)
			j.wait(ctx, t)
			require.Zero(t, j.code, j.out())
			require.NotContains(t, j.stderr.String(), "cellrun:", "cellrun has nothing to report\n%s", j.out())
			m := hashLine.FindStringSubmatch(j.stdout.String())
			require.NotNil(t, m, j.out())
			require.Equal(t, want, m[2], j.out())
		})
	}
}

// TestTrainTwoNodesSurvivesKill runs the example on two launcher nodes of
// two ranks each (two hosts to the ranks: tcp across) and SIGKILLs a rank
// of node 1 at a random step: both nodes restart together, and the job
// ends with the weights of an uninterrupted two-node run.
func TestTrainTwoNodesSurvivesKill(t *testing.T) {
	stdout, out := launchtest.Hosts(t, trainBin, 2, nil, restartArgs...)
	m := hashLine.FindStringSubmatch(stdout)
	require.NotNil(t, m, out)
	r := restartOnce(t, 2, rand.N(300*time.Millisecond))
	got := restartedHash.FindStringSubmatch(r.stdout)
	require.NotNil(t, got, r.stdout)
	require.Equal(t, m[2], got[2], "the restarted job ends with the uninterrupted run's weights\n%s", r.stdout)
}

// TestTrainElastic SIGKILLs a random rank at a random step of a job run
// with -elastic under cellrun --elastic: the survivors shrink, share the
// data among themselves, say so, and finish with identical weights; the
// job exits 0.
func TestTrainElastic(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const procs = 4
	_, took := reference(ctx, t, trainBin, procs, "")
	args := append([]string{"-elastic"}, restartArgs...)
	j := startTrain(ctx, trainBin, procs, launcher.Config{Elastic: true}, args...)
	j.waitOutput(ctx, t, "[0] training on")
	rank, pid := killRandomRank(t, procs, 0, took/2)
	j.wait(ctx, t)
	require.Zero(t, j.code, j.out())
	require.Regexp(t, fmt.Sprintf(`(?m)^cellrun: rank %d \(pid %d, host [^,]+\) killed by signal 9 \(killed\); the others go on \(--elastic\)$`, rank, pid),
		j.stderr.String(), j.out())
	first := 0 // the lowest survivor, rank 0 of the shrunk team
	if rank == 0 {
		first = 1
	}
	require.Regexp(t, fmt.Sprintf(`(?m)^\[%d\] rank %d died: going on with 3 of 4 ranks from sample \d+ of the epoch$`, first, rank), j.stdout.String(), j.out())
	require.Regexp(t, fmt.Sprintf(`(?m)^\[%d\] weights identical on all 3 ranks \(hash 0x[0-9a-f]+\)$`, first), j.stdout.String(), j.out())
}
