package launcher

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"
)

// cause is the first reason a job stops early. There is only ever one:
// what happens to the ranks after cellrun started stopping them is the
// consequence, not a new failure.
type cause struct {
	line  string // the one line printed, without "cellrun: "
	code  int    // cellrun's exit code
	local bool   // it happened on this node: the other nodes must be told
	err   error  // set when the caller's context ended: returned, not printed
}

// job is one node's share of a running job.
type job struct {
	cfg     Config
	log     *slog.Logger
	console *console
	host    string

	// stopCtx ends at the first cause; the set-up steps run under it.
	stopCtx context.Context
	endStop context.CancelFunc
	// killCtx ends when the grace period is over or a second stop request
	// came: no more waiting for anyone.
	killCtx context.Context
	endKill context.CancelFunc

	ranks sync.WaitGroup // supervisors of the started ranks

	mu        sync.Mutex
	cause     *cause
	procs     []*rankProc
	nodes     *nodeGroup
	published chan struct{} // closed once the cause is told to the other nodes
	killTimer *time.Timer
	diag      *diagnosis // nil until etcd is up, or when nothing is followed
	// With Config.Elastic, the deaths of ranks (their lines, the first
	// one's code) and how many ranks exited 0.
	lost      []string
	lostCode  int
	succeeded int
	traceMu   sync.Mutex // one merge of the traces at a time
}

func newJob(cfg Config, c *console, log *slog.Logger) *job {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	j := &job{cfg: cfg, log: log, console: c, host: host}
	j.stopCtx, j.endStop = context.WithCancel(context.Background())
	j.killCtx, j.endKill = context.WithCancel(context.Background())
	return j
}

// stop records c as the reason the job ends, unless there is one already,
// and sends sig to every rank; those still running after the grace period
// are killed. It reports whether c was the first cause.
func (j *job) stop(c cause, sig syscall.Signal) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.cause != nil {
		return false
	}
	j.cause = &c
	j.endStop()
	for _, r := range j.procs {
		r.signal(sig)
	}
	j.killTimer = time.AfterFunc(j.cfg.Grace, j.kill)
	j.publishLocked()
	return true
}

// kill sends SIGKILL to every rank still running and ends every wait.
func (j *job) kill() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.endStop()
	j.endKill()
	for _, r := range j.procs {
		r.signal(syscall.SIGKILL)
	}
}

// publishLocked tells the other nodes about a local cause, once both the
// cause and the nodes' group exist. Called with j.mu held.
func (j *job) publishLocked() {
	if j.cause == nil || !j.cause.local || j.nodes == nil || j.published != nil {
		return
	}
	done := make(chan struct{})
	j.published = done
	g, c := j.nodes, *j.cause
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(j.killCtx, j.cfg.NodeTimeout)
		defer cancel()
		if err := g.publish(ctx, c.line, c.code); err != nil {
			j.log.Warn("the other nodes may not learn why this node stopped", "err", err)
		}
	}()
}

// setNodes makes the nodes' group known to the job, and watches the other
// nodes: their stop reports stop this node too.
func (j *job) setNodes(g *nodeGroup) {
	j.mu.Lock()
	j.nodes = g
	j.publishLocked()
	j.mu.Unlock()
	g.watch(func(line string, code int) {
		j.stop(cause{line: line, code: code}, syscall.SIGTERM)
	})
}

// interrupt handles a signal for cellrun: the first stops the job and is
// forwarded to the ranks, a second one kills them.
func (j *job) interrupt(sig syscall.Signal) {
	line := fmt.Sprintf("stopped by signal %d (%v)", int(sig), sig)
	if j.cfg.Nodes > 1 {
		line = fmt.Sprintf("node %d (cellrun pid %d, host %s) %s", j.cfg.NodeRank, os.Getpid(), j.host, line)
	}
	if !j.stop(cause{line: line, code: 128 + int(sig), local: true}, sig) {
		j.kill()
	}
}

// watchSignals turns the caller's signals and the end of its context into
// stop requests, until done is closed.
func (j *job) watchSignals(ctx context.Context, done <-chan struct{}) {
	ctxDone := ctx.Done()
	for {
		select {
		case sig := <-j.cfg.Signals:
			s, ok := sig.(syscall.Signal)
			if !ok {
				s = syscall.SIGTERM
			}
			if s == syscall.SIGUSR1 {
				j.requestTraces()
				continue
			}
			j.interrupt(s)
		case <-ctxDone:
			ctxDone = nil
			err := fmt.Errorf("job %q stopped: %w", j.cfg.Job, ctx.Err())
			if !j.stop(cause{line: err.Error(), code: ExitFailure, local: true, err: err}, syscall.SIGTERM) {
				j.kill()
			}
		case <-done:
			return
		}
	}
}

// spawn starts the ranks of this node and a supervisor for each. It stops
// at the first cause, including a rank that could not be started.
func (j *job) spawn(programPath string, acc access) {
	common := jobEnv(j.cfg.Env, &j.cfg, acc)
	pattern, marker := deathPattern(j.cfg.Job)
	deaths := &deathWatch{pattern: pattern, marker: marker}
	node := -1
	if j.cfg.Nodes > 1 {
		node = j.cfg.NodeRank
	}
	for local := range j.cfg.ProcsPerNode {
		rank := j.cfg.NodeRank*j.cfg.ProcsPerNode + local
		spec := rankSpec{
			rank: rank, node: node, host: j.host,
			program: programPath, args: j.cfg.Args,
			env:     rankEnv(common, rank, local, j.cfg.MetricsPort),
			console: j.console, prefix: !j.cfg.NoPrefix, logDir: j.cfg.LogDir,
			deaths: deaths,
		}
		// Starting under the lock means a stop either sees this rank or
		// happened before it would have been started.
		j.mu.Lock()
		if j.cause != nil {
			j.mu.Unlock()
			return
		}
		r, err := startRank(spec)
		if err == nil {
			j.procs = append(j.procs, r)
		}
		j.mu.Unlock()
		if err != nil {
			j.stop(cause{line: err.Error(), code: ExitFailure, local: true}, syscall.SIGTERM)
			return
		}
		j.ranks.Add(1)
		go j.supervise(r)
	}
}

// supervise waits for one rank and stops the job if it failed first.
func (j *job) supervise(r *rankProc) {
	defer j.ranks.Done()
	status, err := r.wait()
	if err != nil {
		j.log.Warn("rank output not fully logged", "rank", r.spec.rank, "err", err)
	}
	how, code, failed := exitOutcome(status)
	j.log.Debug("rank ended", "rank", r.spec.rank, "pid", r.pid, "how", how)
	if j.cfg.Elastic && (!failed || status.Signaled()) {
		j.elasticEnd(r, how, code, failed)
		return
	}
	if !failed {
		return
	}
	line := r.describe() + " " + how
	if !status.Signaled() && j.firstCause() == nil {
		// An error exit may be the consequence of another rank's failure.
		if blamed := j.blame(r, how); blamed != "" {
			line = blamed
		}
	}
	j.stop(cause{line: line, code: code, local: true}, syscall.SIGTERM)
}

// firstCause is the reason the job stopped, nil if it did not.
func (j *job) firstCause() *cause {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.cause
}

// stopKillTimer ends the grace period early: no rank is left to kill.
func (j *job) stopKillTimer() {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.killTimer != nil {
		j.killTimer.Stop()
	}
}

// release ends what is left of the job's timers and contexts.
func (j *job) release() {
	j.stopKillTimer()
	j.endStop()
	j.endKill()
}

// elasticEnd is the end of a rank of an elastic job that exited 0 or
// died: a death is said, and stops no one.
func (j *job) elasticEnd(r *rankProc, how string, code int, failed bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if !failed {
		j.succeeded++
		return
	}
	line := r.describe() + " " + how
	if len(j.lost) == 0 {
		j.lostCode = code
	}
	j.lost = append(j.lost, line)
	j.console.write(j.console.stderr, []byte("cellrun: "+line+"; the others go on (--elastic)\n"))
}

// elasticOutcome makes the deaths of an elastic job its cause when no
// rank finished.
func (j *job) elasticOutcome() {
	j.mu.Lock()
	defer j.mu.Unlock()
	if !j.cfg.Elastic || len(j.lost) == 0 || j.succeeded > 0 || j.cause != nil {
		return
	}
	j.cause = &cause{line: strings.Join(j.lost, "; "), code: j.lostCode, local: true}
}
