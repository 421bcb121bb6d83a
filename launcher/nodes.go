package launcher

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/rdmacell/rdmacell/bootstrap"
)

// nodesKeyPrefix is where the cellrun processes of multi-node jobs meet:
// apart from the ranks' own jobs, so that a launcher group and the ranks'
// job can share the job id without sharing keys.
const nodesKeyPrefix = "/rdmacell/launchers/"

// failureKey is what a node publishes for each other node when the job has
// to stop because of it; generation G > 0 uses failureKey/gG (see
// generationKey), so that a report of an earlier generation is never
// taken for one of the running generation.
const failureKey = "failure"

// restartBarrier is the barrier every node passes before it starts the
// next generation: its n-th pass starts generation n.
const restartBarrier = "restart"

// departureKey is never published: waiting for it is waiting until the node
// leaves the group.
const departureKey = "departure"

// Pacing of the join of a node's cellrun: a single attempt is kept short
// because a fresh client is the quickest way to find an etcd that came up
// meanwhile (node 0 may start after the others).
const (
	joinAttempt    = 2 * time.Second
	joinRetryDelay = 200 * time.Millisecond
)

// stopReport is the value published under failureKey: the line every node
// prints, and the code every node exits with.
type stopReport struct {
	Line string `json:"line"`
	Code int    `json:"code"`
	// Restart says the failure may be cured by a new generation (a rank
	// failed), when the job has restarts left.
	Restart bool `json:"restart,omitempty"`
	// Done, instead of a failure, says that every rank of the node
	// exited 0. A node tells the others so only when the job could still
	// restart: one node's failure then restarts the nodes whose ranks are
	// done too.
	Done bool `json:"done,omitempty"`
}

// nodeInfo is what a node's cellrun registers for the others: the
// settings every node must share, checked once all have joined.
type nodeInfo struct {
	MaxRestarts int `json:"max_restarts"`
}

// nodeGroup is this cellrun's membership of the job's launcher group, one
// member per node.
type nodeGroup struct {
	job  *bootstrap.Job
	self int
	log  *slog.Logger

	cancel   context.CancelFunc // stops the watchers of the running generation
	watchers sync.WaitGroup
	// known is closed once every other node's outcome of the running
	// generation is known: its stop report, its Done, or its death.
	known chan struct{}
}

// joinNodes joins the launcher group and waits, until ctx ends, for every
// node to join. A node's rank already held by someone else is retried for
// one node timeout: it may be the lease of a cellrun of an earlier run of
// the job that was killed.
func joinNodes(ctx context.Context, cfg *Config, client bootstrap.ClientConfig, secret []byte, host string, log *slog.Logger) (*nodeGroup, error) {
	info, err := json.Marshal(nodeInfo{MaxRestarts: cfg.MaxRestarts})
	if err != nil {
		return nil, fmt.Errorf("node %d: encode its settings: %w", cfg.NodeRank, err)
	}
	bc := bootstrap.Config{
		Info:      info,
		Client:    client,
		Secret:    secret, // unused by the launchers, but kept out of the store
		Job:       cfg.Job,
		Rank:      cfg.NodeRank,
		WorldSize: cfg.Nodes,
		Host:      host,
		LeaseTTL:  cfg.NodeTimeout,
		KeyPrefix: nodesKeyPrefix,
		Logger:    log,
	}
	var job *bootstrap.Job
	var firstDup time.Time
	for {
		attempt, cancel := context.WithTimeout(ctx, joinAttempt)
		j, err := bootstrap.Join(attempt, bc)
		cancel()
		if err == nil {
			job = j
			break
		}
		var dup *bootstrap.DuplicateRankError
		switch {
		case ctx.Err() != nil:
			return nil, fmt.Errorf("node %d: join the nodes of job %q: %w", cfg.NodeRank, cfg.Job, errors.Join(err, ctx.Err()))
		case errors.As(err, &dup):
			if firstDup.IsZero() {
				firstDup = time.Now()
			}
			if time.Since(firstDup) > cfg.NodeTimeout+time.Second {
				return nil, fmt.Errorf("--node-rank %d of job %q is taken by the cellrun with pid %d on host %s: %w",
					cfg.NodeRank, cfg.Job, dup.PID, dup.Host, err)
			}
		case !errors.Is(err, bootstrap.ErrUnreachable):
			var unknown x509.UnknownAuthorityError
			if errors.As(err, &unknown) && cfg.JoinToken != "" {
				err = fmt.Errorf("%w (is --join the token of node 0?)", err)
			}
			return nil, fmt.Errorf("node %d: join the nodes of job %q: %w", cfg.NodeRank, cfg.Job, err)
		}
		log.Debug("etcd not ready for the nodes' rendezvous yet, retrying", "err", err)
		select {
		case <-time.After(joinRetryDelay):
		case <-ctx.Done():
		}
	}
	members, err := job.WaitWorld(ctx)
	if err != nil {
		_ = job.Close(context.Background())
		var missing *bootstrap.MissingRanksError
		if errors.As(err, &missing) {
			return nil, fmt.Errorf("job %q: nodes %v of --nnodes %d did not start their cellrun in time: %w",
				cfg.Job, missing.Missing, cfg.Nodes, err)
		}
		return nil, fmt.Errorf("job %q: nodes' rendezvous: %w", cfg.Job, err)
	}
	// Every node has seen every other's settings once all pass this
	// barrier: a node that refuses them and leaves cannot strand another
	// still waiting for the world.
	if err := job.Barrier(ctx, "joined"); err != nil {
		_ = job.Close(context.Background())
		return nil, fmt.Errorf("job %q: nodes' rendezvous: %w", cfg.Job, err)
	}
	if err := checkSameSettings(cfg, members); err != nil {
		leave, cancel := context.WithTimeout(context.Background(), 2*cfg.NodeTimeout)
		defer cancel()
		if cfg.EtcdServe != "" {
			// The others see it too and leave; they need this node's
			// etcd until then.
			waitDepartures(leave, job, cfg.Nodes-1)
		}
		_ = job.Close(leave)
		return nil, err
	}
	return &nodeGroup{job: job, self: cfg.NodeRank, log: log}, nil
}

// waitDepartures waits until n other members have left job, or ctx ends.
func waitDepartures(ctx context.Context, job *bootstrap.Job, n int) {
	for n > 0 {
		select {
		case _, ok := <-job.Departures():
			if !ok {
				return
			}
			n--
		case <-ctx.Done():
			return
		}
	}
}

// checkSameSettings refuses a job whose nodes disagree on what they must
// share: with different --max-restarts, one node would start a new
// generation that another never joins.
func checkSameSettings(cfg *Config, members []bootstrap.Member) error {
	for _, m := range members {
		var info nodeInfo
		if err := json.Unmarshal(m.Info, &info); err != nil {
			return fmt.Errorf("job %q: node %d (host %s, cellrun pid %d) registered settings cellrun cannot read (another version?): %w",
				cfg.Job, m.Rank, m.Host, m.PID, err)
		}
		if info.MaxRestarts != cfg.MaxRestarts {
			return &FlagError{Flag: "--max-restarts", Value: strconv.Itoa(cfg.MaxRestarts),
				Want: fmt.Sprintf("the same on every node: node %d (host %s) has %d", m.Rank, m.Host, info.MaxRestarts)}
		}
	}
	return nil
}

// watch reports, through stop, the first reason another node gives for
// stopping generation gen of the job, or the death of its cellrun. A node
// that leaves cleanly is no news: its ranks all succeeded. The watchers
// run until the node leaves, or until endWatch.
func (g *nodeGroup) watch(gen int, stop func(stopReport)) {
	ctx, cancel := context.WithCancel(context.Background())
	g.cancel = cancel
	var outcomes sync.WaitGroup
	for node := range g.job.WorldSize() {
		if node == g.self {
			continue
		}
		g.watchers.Add(1)
		outcomes.Add(1)
		go func() {
			defer g.watchers.Done()
			g.watchNode(ctx, node, generationKey(failureKey, gen), stop, outcomes.Done)
		}()
	}
	known := make(chan struct{})
	g.known = known
	go func() { outcomes.Wait(); close(known) }()
}

// endWatch stops the watchers of the generation that ended.
func (g *nodeGroup) endWatch() {
	if g.cancel != nil {
		g.cancel()
	}
	g.watchers.Wait()
}

// watchSelf stops the job when this cellrun's own lease ends (etcd lost
// for longer than --node-timeout): the other nodes take this node for dead
// and stop their ranks, so carrying on alone is pointless. The departures
// channel is closed by close, which ends this goroutine.
func (g *nodeGroup) watchSelf(stop func(line string, code int)) {
	go func() {
		for err := range g.job.Departures() {
			var dead *bootstrap.RankDeadError
			if errors.As(err, &dead) && dead.Rank == g.self {
				stop(fmt.Sprintf("node %d (cellrun pid %d, host %s) lost etcd for longer than its --node-timeout: the other nodes take it for dead",
					g.self, dead.PID, dead.Host), ExitFailure)
			}
		}
	}()
}

// watchNode waits for node's stop report under key, then for node to
// leave.
// leave; known is called once the node's outcome is known (or the watch
// ends).
func (g *nodeGroup) watchNode(ctx context.Context, node int, key string, stop func(stopReport), known func()) {
	knownOnce := sync.OnceFunc(known)
	defer knownOnce()
	value, err := g.job.Get(ctx, node, key)
	if err == nil {
		var rep stopReport
		switch jerr := json.Unmarshal(value, &rep); {
		case jerr == nil && rep.Done:
			// Its ranks succeeded: whatever happens to its cellrun now is
			// no failure of the job, but node 0 keeps etcd up until it
			// leaves.
			knownOnce()
			_, _ = g.job.Get(ctx, node, departureKey)
			return
		case jerr != nil || rep.Line == "" || rep.Code == 0:
			rep = stopReport{Line: fmt.Sprintf("node %d reported a failure cellrun cannot read: %q", node, value), Code: ExitFailure}
		}
		stop(rep)
		knownOnce()
		// The node is still tearing down: it needs etcd until it leaves.
		_, err = g.job.Get(ctx, node, departureKey)
	}
	var dead *bootstrap.RankDeadError
	switch {
	case err == nil:
	case errors.As(err, &dead):
		stop(stopReport{Line: fmt.Sprintf("node %d (cellrun pid %d, host %s) died: nothing heard from it for its --node-timeout",
			node, dead.PID, dead.Host), Code: ExitFailure})
	default:
		// A clean exit, our own leaving, or the end of the generation.
	}
}

// publish tells every other node why generation gen of the job stops.
func (g *nodeGroup) publish(ctx context.Context, gen int, rep stopReport) error {
	value, err := json.Marshal(rep)
	if err != nil {
		return fmt.Errorf("encode stop report: %w", err)
	}
	var errs []error
	for node := range g.job.WorldSize() {
		if node != g.self {
			errs = append(errs, g.job.Put(ctx, node, generationKey(failureKey, gen), value))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("tell the other nodes that the job stops: %w", err)
	}
	return nil
}

// waitOutcomes tells the other nodes that this node's ranks of generation
// gen are done, and waits until every other node's outcome of it is known
// or ctx ends (a stop report ends it through the job's stop context).
func (g *nodeGroup) waitOutcomes(ctx context.Context, gen int, publishTimeout time.Duration) error {
	pctx, cancel := context.WithTimeout(ctx, publishTimeout)
	err := g.publish(pctx, gen, stopReport{Done: true})
	cancel()
	if err != nil {
		return err
	}
	select {
	case <-g.known:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// waitOthers waits until every other node has left the group (or told why
// the job stops, or died), or until ctx ends. Node 0 serving etcd does
// this before it takes etcd away.
func (g *nodeGroup) waitOthers(ctx context.Context) error {
	done := make(chan struct{})
	go func() { g.watchers.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// close leaves the group cleanly and stops the watchers.
func (g *nodeGroup) close(ctx context.Context) error {
	err := g.job.Close(ctx)
	g.endWatch()
	if err != nil {
		return fmt.Errorf("leave the nodes' group: %w", err)
	}
	return nil
}
