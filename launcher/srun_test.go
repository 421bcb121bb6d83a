package launcher

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The tests of this file run jobs under a real Slurm, as users do: srun
// starts the ranks of the examples (no cellrun), or one cellrun per task.
// .ci/slurm-up starts a one-node cluster on this machine; without one (no
// srun, not root, no node answering) they skip.

// srunTimeout bounds each srun, and Slurm's own time limit on its job.
const srunTimeout = 2 * time.Minute

var slurm struct {
	once sync.Once
	skip string
}

// progs are the programs the jobs run, built once.
var progs struct {
	once               sync.Once
	err                error
	dir                string
	train, idle, bench string
}

// needSlurm skips t without a working Slurm, and builds the programs the
// jobs run.
func needSlurm(t *testing.T) {
	t.Helper()
	slurm.once.Do(func() {
		switch {
		case os.Geteuid() != 0:
			slurm.skip = "the Slurm tests run as root, on the cluster .ci/slurm-up starts"
			return
		case !onPath("srun") || !onPath("scontrol"):
			slurm.skip = "no srun: start a one-node Slurm cluster with .ci/slurm-up"
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if out, err := exec.CommandContext(ctx, "srun", "-n", "1", "-t", "1", "true").CombinedOutput(); err != nil {
			slurm.skip = fmt.Sprintf("srun -n 1 true fails (%v: %s): start the cluster with .ci/slurm-up", err, bytes.TrimSpace(out))
		}
	})
	if slurm.skip != "" {
		t.Skip(slurm.skip)
	}
	buildProgs(t)
}

// buildProgs builds the examples and cellbench, once.
func buildProgs(t *testing.T) {
	t.Helper()
	progs.once.Do(func() {
		progs.dir = filepath.Dir(bin.cellrun) // removed by TestMain
		progs.train, progs.idle, progs.bench = progs.dir+"/train", progs.dir+"/idle", progs.dir+"/cellbench"
		var wg sync.WaitGroup
		errs := make([]error, 3)
		for i, b := range []struct{ pkg, out string }{
			{"../examples/train", progs.train}, {"../examples/idle", progs.idle}, {"../bench/cellbench", progs.bench},
		} {
			wg.Go(func() {
				if out, err := exec.Command("go", "build", "-o", b.out, b.pkg).CombinedOutput(); err != nil {
					errs[i] = fmt.Errorf("build %s: %w\n%s", b.pkg, err, out)
				}
			})
		}
		wg.Wait()
		progs.err = errors.Join(errs...)
	})
	require.NoError(t, progs.err)
}

func onPath(name string) bool { _, err := exec.LookPath(name); return err == nil }

// srunEnv is the environment of a job: the user's key in a file of the
// test's own, so that the tests never touch the home directory.
func srunEnv(t *testing.T) []string {
	return append(os.Environ(), EnvSecretFile+"="+filepath.Join(t.TempDir(), "key"))
}

// srun runs a job step and returns its exit code and its output, each line
// labelled with the task ("0: ...").
func srun(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), srunTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "srun", append([]string{"--label", "-t", "2", "-J", jobName(t)}, args...)...)
	cmd.Env, cmd.Dir = env, progs.dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, ctx.Err(), "srun %v did not end within %v:\n%s", args, srunTimeout, out)
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), string(out)
		}
		require.NoError(t, err, "%s", out)
	}
	return 0, string(out)
}

// jobName names a test's Slurm job, so that the test can find its tasks.
func jobName(t *testing.T) string {
	return fmt.Sprintf("rdmacell-%s-%d", strings.ReplaceAll(t.Name(), "/", "-"), os.Getpid())
}

// checkSrunTraining checks what the training example promises: rank 0's
// loss falls every epoch, and every rank ends with the same weights.
// label is how rank 0's lines start (srun --label: "0: "), before the
// "[0] " a cellrun adds.
func checkSrunTraining(t *testing.T, out string, ranks int, label string) {
	t.Helper()
	epoch := regexp.MustCompile(`(?m)^` + label + `(?:\[0\] )?epoch (\d+) loss ([0-9.]+)$`)
	m := epoch.FindAllStringSubmatch(out, -1)
	require.Len(t, m, 4, out)
	last := 1e9
	for i, e := range m {
		require.Equal(t, strconv.Itoa(i+1), e[1], out)
		loss, err := strconv.ParseFloat(e[2], 64)
		require.NoError(t, err)
		require.Less(t, loss, last, "loss must fall every epoch:\n%s", out)
		last = loss
	}
	require.Regexp(t, fmt.Sprintf(`(?m)^%s(\[0\] )?weights identical on all %d ranks`, label, ranks), out)
}

var trainSrunArgs = []string{"-epochs", "4", "-samples", "2048", "-timeout", "90s"}

// srun -n 4 ./train: the ranks find each other through Slurm alone.
func TestSrunTrain(t *testing.T) {
	needSlurm(t)
	code, out := srun(t, srunEnv(t), append([]string{"-n", "4", progs.train}, trainSrunArgs...)...)
	require.Zero(t, code, out)
	checkSrunTraining(t, out, 4, "0: ")
}

// srun -n 2 cellbench allreduce -c 1: every result checked, none wrong.
func TestSrunCellbench(t *testing.T) {
	needSlurm(t)
	code, out := srun(t, srunEnv(t), "-n", "2", progs.bench, "allreduce", "-c", "1", "-b", "8", "-e", "1M", "-f", "16")
	require.Zero(t, code, out)
	require.Contains(t, out, "0: # Out of bounds values : 0 OK", out)
	rows := 0
	s := bufio.NewScanner(strings.NewReader(out))
	for s.Scan() {
		f := strings.Fields(strings.TrimPrefix(s.Text(), "0: "))
		if len(f) == 13 && !strings.HasPrefix(f[0], "#") {
			rows++
			assert.Equal(t, "0", f[8], "out-of-place wrong: %s", s.Text())
			assert.Equal(t, "0", f[12], "in-place wrong: %s", s.Text())
		}
	}
	require.Positive(t, rows, out)
}

// A rank killed by SIGKILL (its pid found through Slurm: scancel signals
// every task of a step, not one) is named dead by the others, through its
// lease that ended, and the step fails.
func TestSrunKilledRank(t *testing.T) {
	needSlurm(t)
	ctx, cancel := context.WithTimeout(context.Background(), srunTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "srun", "--label", "-t", "2", "-J", jobName(t), "-n", "3", progs.idle, "-idle", "8s", "-timeout", "90s")
	cmd.Env, cmd.Dir = srunEnv(t), progs.dir
	var out bytes.Buffer
	pr, pw, err := os.Pipe()
	require.NoError(t, err)
	cmd.Stdout, cmd.Stderr = pw, pw
	require.NoError(t, cmd.Start())
	pw.Close()
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		s := bufio.NewScanner(pr)
		for s.Scan() {
			lines <- s.Text()
		}
	}()
	// Every rank is idle: the job is up.
	idle := 0
	for idle < 3 {
		select {
		case l, ok := <-lines:
			require.True(t, ok, "srun ended early:\n%s", out.String())
			out.WriteString(l + "\n")
			if strings.Contains(l, " idle for ") {
				idle++
			}
		case <-ctx.Done():
			t.Fatalf("the ranks did not start:\n%s", out.String())
		}
	}
	pid := taskPID(t, 1)
	require.NoError(t, exec.Command("kill", "-KILL", strconv.Itoa(pid)).Run())
	killed := time.Now()
	for l := range lines {
		out.WriteString(l + "\n")
	}
	err = cmd.Wait()
	took := time.Since(killed)
	require.Error(t, err, "the step succeeded with a rank killed:\n%s", out.String())
	dead := fmt.Sprintf("rank 1 (host %s, pid %d) died", hostname(t), pid)
	for _, r := range []string{"0", "2"} {
		assert.Regexp(t, "(?m)^"+r+": .*"+regexp.QuoteMeta(dead), out.String(), "rank %s does not name the dead rank", r)
	}
	t.Logf("the step ended %v after the kill (the ranks were idle for 8 s, then met in a barrier)", took.Round(time.Millisecond))
}

// taskPID is the pid of the job's task with global rank rank.
func taskPID(t *testing.T, rank int) int {
	t.Helper()
	id, err := exec.Command("squeue", "-h", "-n", jobName(t), "-o", "%i").Output()
	require.NoError(t, err)
	job := strings.TrimSpace(string(id))
	require.NotEmpty(t, job, "no job named %s", jobName(t))
	list, err := exec.Command("scontrol", "listpids", job).Output()
	require.NoError(t, err)
	for _, l := range strings.Split(string(list), "\n") {
		f := strings.Fields(l)
		if len(f) == 5 && f[4] == strconv.Itoa(rank) {
			pid, err := strconv.Atoi(f[0])
			require.NoError(t, err)
			return pid
		}
	}
	t.Fatalf("no task %d in scontrol listpids %s:\n%s", rank, job, list)
	return 0
}

func hostname(t *testing.T) string {
	h, err := os.Hostname()
	require.NoError(t, err)
	return h
}

// srun -n 2 cellrun -n 2 ./train: one cellrun per task, each a node of
// the job (here both on this machine, under two host names), taking its
// node rank, the job id, node 0's etcd and the token from Slurm.
func TestSrunCellrun(t *testing.T) {
	needSlurm(t)
	script := fmt.Sprintf(`RDMACELL_HOST=node-$SLURM_PROCID exec %s -n 2 %s %s`, bin.cellrun, progs.train, strings.Join(trainSrunArgs, " "))
	code, out := srun(t, srunEnv(t), "-n", "2", "bash", "-c", script)
	require.Zero(t, code, out)
	checkSrunTraining(t, out, 4, "0: ")
	assert.NotContains(t, out, "WARN", "a clean job warned")
}

// mpirun -n 4 ./train: Open MPI's launcher, with no cellrun either; the
// ranks meet on loopback, all being on this host.
func TestMpirunTrain(t *testing.T) {
	if !onPath("mpirun") {
		t.Skip("no mpirun (Open MPI) on this machine")
	}
	buildProgs(t)
	ctx, cancel := context.WithTimeout(context.Background(), srunTimeout)
	defer cancel()
	args := append([]string{"--oversubscribe", "-x", EnvSecretFile, "-n", "4", progs.train}, trainSrunArgs...)
	if os.Geteuid() == 0 {
		args = append([]string{"--allow-run-as-root"}, args...)
	}
	cmd := exec.CommandContext(ctx, "mpirun", args...)
	cmd.Env, cmd.Dir = srunEnv(t), progs.dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	checkSrunTraining(t, string(out), 4, "")
}
