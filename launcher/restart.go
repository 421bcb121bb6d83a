package launcher

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/rdmacell/rdmacell/bootstrap"
)

// With --max-restarts N, a job whose rank failed is started again, whole,
// up to N times (torchrun's meaning). Each start is a generation, numbered
// from 0; after a failure cellrun stops the other ranks as it always does,
// waits until every rank of the generation has exited, waits
// --restart-delay, and starts the next generation.
//
// A generation is a rendezvous of its own: its ranks join the job
// "<job>.gG" (generation 0 keeps the bare job id), so that they never see
// the keys the previous generation left in etcd — registrations whose
// leases have not expired yet, a dead rank's slot, barrier arrivals,
// connection info of processes that are gone; node 0's cellrun deletes
// those keys before the next generation starts. A job id per generation
// needs nothing of the ranks beyond the environment contract, where a key
// prefix per generation would have needed a new variable read by
// bootstrap. Each generation also gets a new secret, so that a straggler of
// an earlier one cannot authenticate to the new ranks: drawn afresh on one
// node, derived from the join token and the generation on many.
//
// In a multi-node job every node restarts: the node whose rank failed
// tells the others, as it does without restarts, that the generation stops
// and that the cause may be restarted; each node stops its ranks, and the
// nodes then pass the launchers' "restart" barrier, whose n-th pass starts
// generation n, before they start their ranks. The nodes' stop reports are
// kept per generation, and all nodes must have the same --max-restarts
// (checked when they join), so they all make the same decision. What a
// restart cannot cure is final: a signal to cellrun, a node whose cellrun
// died, the caller's context.

// generationJob is the job id the ranks of generation gen join.
func generationJob(job string, gen int) string {
	if gen == 0 {
		return job
	}
	return job + ".g" + strconv.Itoa(gen)
}

// generationKey is a launchers' key of generation gen.
func generationKey(key string, gen int) string {
	if gen == 0 {
		return key
	}
	return key + "/g" + strconv.Itoa(gen)
}

// generationDir is where generation gen's ranks write their traces: the
// first generation in dir itself, as without restarts.
func generationDir(dir string, gen int) string {
	if gen == 0 || dir == "" {
		return dir
	}
	return filepath.Join(dir, "g"+strconv.Itoa(gen))
}

// linePrefix starts every output line of a rank: "[3] ", or "[g1 3] " for
// generation 1 on.
func linePrefix(rank, gen int) []byte {
	if gen == 0 {
		return []byte("[" + strconv.Itoa(rank) + "] ")
	}
	return []byte("[g" + strconv.Itoa(gen) + " " + strconv.Itoa(rank) + "] ")
}

// generationAccess is how the ranks of generation gen reach the job: as
// generation 0's, with a secret of its own.
func generationAccess(acc access, gen int) access {
	switch {
	case gen == 0:
	case acc.token != nil:
		acc.secret = acc.token.derive("job secret of generation "+strconv.Itoa(gen), len(acc.secret))
	default:
		acc.secret = newJobSecret()
	}
	return acc
}

// restart is called once every rank of the running generation has exited.
// It reports whether the job starts again: the generation failed with a
// cause a restart may cure and restarts are left. If so it has moved the
// job to the next generation (a new cause may then stop it), printed why,
// waited --restart-delay and, with several nodes, met the others.
func (j *job) restart() bool {
	if j.gen >= j.cfg.MaxRestarts {
		return false
	}
	j.mu.Lock()
	c, published, nodes, stopCtx := j.cause, j.published, j.nodes, j.stopCtx
	j.mu.Unlock()
	if c == nil && nodes != nil {
		// This node's ranks succeeded, but another node's may still fail
		// this generation, which would restart every node.
		if err := nodes.waitOutcomes(stopCtx, j.gen, j.cfg.NodeTimeout); err != nil && stopCtx.Err() == nil {
			j.log.Warn("the other nodes may not learn that this node's ranks are done", "err", err)
		}
		j.mu.Lock()
		c, published = j.cause, j.published
		j.mu.Unlock()
	}
	if c == nil {
		return false
	}
	if published != nil {
		<-published // the other nodes learn of the failure first; bounded by the node timeout
	}

	j.mu.Lock()
	if !c.restart {
		j.mu.Unlock()
		return false
	}
	j.gen++
	gen := j.gen
	j.failures = append(j.failures, c.line)
	j.endStop()
	j.endKill()
	j.cause, j.procs, j.published, j.killTimer = nil, nil, nil, nil
	j.stopCtx, j.endStop = context.WithCancel(context.Background())
	j.killCtx, j.endKill = context.WithCancel(context.Background())
	stopCtx = j.stopCtx
	j.mu.Unlock()

	line := fmt.Sprintf("cellrun: %s; restart %d of %d: the job starts again as generation %d", c.line, gen, j.cfg.MaxRestarts, gen)
	if j.cfg.RestartDelay > 0 {
		line += " in " + j.cfg.RestartDelay.String()
	}
	j.console.write(j.console.stderr, []byte(line+"\n"))
	if nodes != nil {
		nodes.endWatch()
	}
	if j.cfg.TraceDir != "" {
		if err := os.MkdirAll(generationDir(j.cfg.TraceDir, gen), 0o755); err != nil {
			j.stop(cause{line: fmt.Sprintf("generation %d: --trace-dir: %v", gen, err), code: ExitFailure, local: true}, syscall.SIGTERM)
			return false
		}
	}
	select {
	case <-time.After(j.cfg.RestartDelay):
	case <-stopCtx.Done():
		return false // stopped meanwhile, by a signal
	}
	if nodes != nil {
		// The others may still be stopping their ranks (a grace period)
		// and waiting their delay; a node that left or died ends the wait
		// early.
		ctx, cancel := context.WithTimeout(stopCtx, j.cfg.Grace+j.cfg.RestartDelay+2*j.cfg.NodeTimeout)
		err := nodes.job.Barrier(ctx, restartBarrier)
		cancel()
		if err != nil {
			j.stop(cause{line: fmt.Sprintf("generation %d did not start: the nodes did not all come back for it: %v", gen, err),
				code: c.code, local: true}, syscall.SIGTERM)
			return false
		}
		j.watchNodes(nodes, gen)
	}
	if j.diag != nil {
		j.forget(j.diag, gen-1)
		j.diag.followJob(generationJob(j.cfg.Job, gen))
	}
	return true
}

// forget deletes what generation gen left in etcd under its job id: the
// slots of the ranks that died (until their leases end), the exit
// markers of those that left, their notes. Every rank of it has exited,
// on every node, by the time the next generation starts; without this an
// external etcd would keep a job's keys for every restart. Node 0 does
// it, with the store it follows the notes in.
func (j *job) forget(d *diagnosis, gen int) {
	if j.cfg.NodeRank != 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), etcdStopTimeout)
	defer cancel()
	prefix := bootstrap.DefaultKeyPrefix + generationJob(j.cfg.Job, gen) + "/"
	if err := d.store.Delete(ctx, prefix, true); err != nil {
		j.log.Warn("cellrun: cannot delete the keys of the last generation", "prefix", prefix, "err", err)
	}
}

// finalLine is the one line that says why the job ended, given the line
// of the cause: after restarts it says so, and the lines before it said
// what the earlier generations failed of.
func (j *job) finalLine(line string) string {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.gen == 0 {
		return line
	}
	return fmt.Sprintf("%s (generation %d, after %d of --max-restarts %d)", line, j.gen, len(j.failures), j.cfg.MaxRestarts)
}
