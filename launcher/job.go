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
	// restart is set when a new generation may cure it: a rank that
	// failed, here or on another node. A signal to cellrun, a node that
	// died, a context that ended are final.
	restart bool
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

	mu sync.Mutex
	// gen is the generation running: 0 until the first restart. What
	// follows up to diag is that generation's and starts afresh with the
	// next one (see restart.go); a cause, a kill or a report that names an
	// earlier generation is stale and ignored.
	gen       int
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
	// failures are the lines of the causes that earlier generations were
	// restarted after, oldest first.
	failures []string
	traceMu  sync.Mutex // one merge of the traces at a time
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

// stop records c as the reason the running generation ends, unless there
// is one already, and sends sig to every rank; those still running after
// the grace period are killed. It reports whether c was the first cause.
// A final cause that comes second makes the first one final too: a
// signal to cellrun while it stops the ranks means no restart.
func (j *job) stop(c cause, sig syscall.Signal) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.stopLocked(j.gen, c, sig)
}

// stopIn is stop for a cause that belongs to generation gen: nothing, if
// that generation is over.
func (j *job) stopIn(gen int, c cause, sig syscall.Signal) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.stopLocked(gen, c, sig)
}

func (j *job) stopLocked(gen int, c cause, sig syscall.Signal) bool {
	if gen != j.gen {
		return false
	}
	if j.cause != nil {
		if !c.restart {
			j.cause.restart = false
		}
		return false
	}
	j.cause = &c
	j.endStop()
	for _, r := range j.procs {
		r.signal(sig)
	}
	j.killTimer = time.AfterFunc(j.cfg.Grace, func() { j.killIn(gen) })
	j.publishLocked()
	return true
}

// kill sends SIGKILL to every rank still running and ends every wait; the
// job is not restarted.
func (j *job) kill() {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.cause != nil {
		j.cause.restart = false
	}
	j.killLocked()
}

// killIn is the end of generation gen's grace period.
func (j *job) killIn(gen int) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if gen == j.gen {
		j.killLocked()
	}
}

func (j *job) killLocked() {
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
	g, c, gen, kill := j.nodes, *j.cause, j.gen, j.killCtx
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(kill, j.cfg.NodeTimeout)
		defer cancel()
		if err := g.publish(ctx, gen, stopReport{Line: c.line, Code: c.code, Restart: c.restart}); err != nil {
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
	gen := j.gen
	j.mu.Unlock()
	g.watchSelf(func(line string, code int) {
		j.stop(cause{line: line, code: code}, syscall.SIGTERM)
	})
	j.watchNodes(g, gen)
}

// watchNodes follows the other nodes' stop reports of generation gen.
func (j *job) watchNodes(g *nodeGroup, gen int) {
	g.watch(gen, func(rep stopReport) {
		j.stopIn(gen, cause{line: rep.Line, code: rep.Code, restart: rep.Restart}, syscall.SIGTERM)
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

// spawn starts the ranks of generation gen on this node and a supervisor
// for each. It stops at the first cause, including a rank that could not
// be started.
func (j *job) spawn(programPath string, acc access, gen int) {
	common := jobEnv(j.cfg.Env, &j.cfg, acc, gen)
	pattern, marker := deathPattern(generationJob(j.cfg.Job, gen))
	deaths := &deathWatch{pattern: pattern, marker: marker}
	node := -1
	if j.cfg.Nodes > 1 {
		node = j.cfg.NodeRank
	}
	for local := range j.cfg.ProcsPerNode {
		rank := j.cfg.NodeRank*j.cfg.ProcsPerNode + local
		spec := rankSpec{
			rank: rank, node: node, host: j.host, gen: gen,
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
	j.stopIn(r.spec.gen, cause{line: line, code: code, local: true, restart: true}, syscall.SIGTERM)
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
