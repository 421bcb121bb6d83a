package launcher

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// outputGrace bounds the wait for a rank's output after it exited. Its
// process group is killed at that point, so only a descendant that left the
// group (setsid) can still hold the pipes open; its lines are not waited for.
const outputGrace = time.Second

// rankSpec is what it takes to start one rank.
type rankSpec struct {
	rank    int
	gen     int    // the generation it belongs to, 0 before any restart
	node    int    // shown in descriptions of multi-node jobs, else -1
	host    string // this machine's name, for descriptions
	program string
	args    []string
	env     []string
	console *console
	prefix  bool
	logDir  string
	deaths  *deathWatch // finds the rank's reports of other ranks' deaths
}

// rankProc is one running rank.
type rankProc struct {
	spec rankSpec
	cmd  *exec.Cmd
	pid  int
	log  *rankLog
	// outputs are the read ends of the rank's stdout and stderr pipes.
	outputs []*os.File
	pumps   sync.WaitGroup

	mu     sync.Mutex
	reaped bool // once reaped, its pid (and group id) may belong to someone else
	status syscall.WaitStatus
	death  *deathReport // the first death of another rank it reported
}

// startRank starts the rank in its own process group, so that signals
// reach everything it started, and with SIGKILL as its parent-death signal,
// so that it does not outlive a cellrun that was killed outright.
func startRank(s rankSpec) (*rankProc, error) {
	r := &rankProc{spec: s}
	if err := r.start(); err != nil {
		r.closeOutputs()
		_ = r.log.close()
		return nil, err
	}
	return r, nil
}

// start does startRank's work; on error the caller closes what it opened.
func (r *rankProc) start() error {
	s := r.spec
	var err error
	if s.logDir != "" {
		if r.log, err = openRankLog(s.logDir, s.rank, s.gen); err != nil {
			return err
		}
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("start rank %d: stdout pipe: %w", s.rank, describeStartError(err))
	}
	r.outputs = append(r.outputs, outR)
	errR, errW, err := os.Pipe()
	if err != nil {
		_ = outW.Close()
		return fmt.Errorf("start rank %d: stderr pipe: %w", s.rank, describeStartError(err))
	}
	r.outputs = append(r.outputs, errR)

	cmd := exec.Command(s.program, s.args...)
	cmd.Env = s.env
	cmd.Stdout, cmd.Stderr = outW, errW // stdin stays /dev/null: ranks do not share a terminal
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	err = cmd.Start()
	// The rank holds the write ends now; ours would keep the pipes from
	// ever reaching end of file.
	_ = outW.Close()
	_ = errW.Close()
	if err != nil {
		return fmt.Errorf("start rank %d (%s): %w", s.rank, s.program, describeStartError(err))
	}
	r.cmd, r.pid = cmd, cmd.Process.Pid

	var prefix []byte
	if s.prefix {
		prefix = linePrefix(s.rank, s.gen)
	}
	r.pumps.Add(2)
	go func() { defer r.pumps.Done(); pump(outR, s.console, s.console.stdout, prefix, r.log, r.noteLine) }()
	go func() { defer r.pumps.Done(); pump(errR, s.console, s.console.stderr, prefix, r.log, r.noteLine) }()
	return nil
}

// describeStartError adds what the OS error means for cellrun to the
// errors of starting a rank that come from the machine's limits.
func describeStartError(err error) error {
	switch {
	case errors.Is(err, unix.EMFILE), errors.Is(err, unix.ENFILE):
		return fmt.Errorf("%w: out of file descriptors (each rank takes a few in cellrun; see ulimit -n)", err)
	case errors.Is(err, unix.EAGAIN):
		return fmt.Errorf("%w: no more processes allowed for this user or cgroup (see ulimit -u and pids.max)", err)
	case errors.Is(err, unix.ENOMEM):
		return fmt.Errorf("%w: out of memory", err)
	}
	return err
}

// noteLine keeps the first report of another rank's death in the rank's
// output.
func (r *rankProc) noteLine(line []byte) {
	rep, ok := r.spec.deaths.scan(line)
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.death == nil && rep.rank != r.spec.rank {
		r.death = &rep
	}
}

// deathReport is the first death of another rank this rank reported.
func (r *rankProc) deathReport() (deathReport, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.death == nil {
		return deathReport{}, false
	}
	return *r.death, true
}

// describe names the rank for the one line that blames it.
func (r *rankProc) describe() string {
	if r.spec.node >= 0 {
		return fmt.Sprintf("rank %d (pid %d, host %s, node %d)", r.spec.rank, r.pid, r.spec.host, r.spec.node)
	}
	return fmt.Sprintf("rank %d (pid %d, host %s)", r.spec.rank, r.pid, r.spec.host)
}

// signal sends sig to the rank's process group, unless the rank has been
// reaped (its group id could then name another group).
func (r *rankProc) signal(sig syscall.Signal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.reaped {
		_ = unix.Kill(-r.pid, sig) // ESRCH: the whole group is gone already
	}
}

// wait blocks until the rank exits, kills what it left behind in its
// process group, reaps it, and waits (boundedly) for its last output. It
// returns the rank's wait status and the error of its log file, if any.
func (r *rankProc) wait() (syscall.WaitStatus, error) {
	// Wait without reaping: while the rank is a zombie its pid, and so its
	// process group id, cannot be reused, which makes the kill below safe.
	if err := waitExited(r.pid); err == nil {
		_ = unix.Kill(-r.pid, syscall.SIGKILL)
	} else {
		// Not expected for a child of ours. Reaping still works, outside
		// the lock because it blocks until the rank exits; only the clean-up
		// of the group is lost.
		_ = r.cmd.Wait()
	}
	r.mu.Lock()
	if r.cmd.ProcessState == nil {
		_ = r.cmd.Wait() // the status says everything the error would
	}
	r.reaped = true
	r.status, _ = r.cmd.ProcessState.Sys().(syscall.WaitStatus)
	status := r.status
	r.mu.Unlock()

	drained := make(chan struct{})
	go func() { r.pumps.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(outputGrace):
		for _, f := range r.outputs {
			_ = f.SetReadDeadline(time.Now())
		}
		<-drained
	}
	r.closeOutputs()
	return status, r.log.close()
}

// closeOutputs closes the read ends of the rank's pipes.
func (r *rankProc) closeOutputs() {
	for _, f := range r.outputs {
		_ = f.Close()
	}
	r.outputs = nil
}

// waitExited blocks until process pid has exited, leaving it unreaped.
func waitExited(pid int) error {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// exitOutcome says how a rank ended: how it ended in words, the exit code
// cellrun passes on (128+N for signal N, as shells do), and whether that is
// a failure.
func exitOutcome(ws syscall.WaitStatus) (how string, code int, failed bool) {
	if ws.Signaled() {
		sig := ws.Signal()
		return fmt.Sprintf("killed by signal %d (%v)", int(sig), sig), 128 + int(sig), true
	}
	code = ws.ExitStatus()
	return fmt.Sprintf("exited with code %d", code), code, code != 0
}
