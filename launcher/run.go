package launcher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/rdmacell/rdmacell/bootstrap"
)

// Bounds of cellrun's own dealings with etcd.
const (
	etcdStartTimeout = 30 * time.Second
	etcdStopTimeout  = 10 * time.Second
)

// Run runs this node's share of the job described by cfg: it prepares the
// program and etcd, joins the other nodes, starts the ranks and supervises
// them until they have all exited. Their output goes to stdout and stderr.
//
// The exit code is 0 when every rank exited 0. When the job stopped early
// it is the failed rank's code (128+N for signal N), 128+N for a signal
// cellrun received, or that of the failure another node reported; Run then
// writes the one line that says why to stderr and returns a nil error. A
// non-nil error means the job could not run (ExitUsage for a bad Config,
// matching ErrUsage; ExitFailure otherwise) or ctx ended; the caller reports
// it.
func Run(ctx context.Context, cfg Config, stdout, stderr io.Writer) (int, error) {
	if err := cfg.validate(); err != nil {
		return ExitUsage, err
	}
	if err := checkMachineLimits(cfg.ProcsPerNode, len(cfg.EtcdEndpoints) == 0); err != nil {
		return ExitUsage, err
	}
	c := &console{stdout: stdout, stderr: stderr}
	log := cfg.Logger
	if log == nil {
		level := slog.LevelWarn
		if cfg.Debug != "" {
			level = slog.LevelDebug
		}
		log = slog.New(slog.NewTextHandler(consoleWriter{c, stderr}, &slog.HandlerOptions{Level: level}))
	}
	j := newJob(cfg, c, log.With("component", "launcher", "job", cfg.Job, "node", cfg.NodeRank))

	done := make(chan struct{})
	defer close(done)
	go j.watchSignals(ctx, done)

	err := j.run()
	j.release()
	if cs := j.firstCause(); cs != nil {
		switch {
		case cs.err != nil:
			return ExitFailure, errors.Join(cs.err, err)
		case err != nil:
			// Set-up steps fail when the stop interrupts them; that is
			// the stop's doing, not news.
			j.log.Debug("set-up ended by the stop", "err", err)
		}
		c.write(stderr, []byte("cellrun: "+cs.line+"\n"))
		return cs.code, nil
	}
	if err != nil {
		return ExitFailure, err
	}
	return 0, nil
}

// run goes through the job's steps; each clean-up runs on every way out.
func (j *job) run() (err error) {
	prog, err := prepareProgram(j.stopCtx, j.cfg.Program, j.console.stderr)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, prog.cleanup()) }()

	if j.cfg.LogDir != "" {
		if err := os.MkdirAll(j.cfg.LogDir, 0o755); err != nil {
			return fmt.Errorf("--log-dir %q: %w", j.cfg.LogDir, err)
		}
	}

	endpoints, client, stopEtcd, err := j.startEtcd()
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, stopEtcd()) }()

	if j.cfg.Nodes > 1 {
		timeout := j.cfg.RendezvousTimeout
		if timeout == 0 {
			timeout = DefaultNodeRendezvous
		}
		ctx, cancel := context.WithTimeout(j.stopCtx, timeout)
		g, err := joinNodes(ctx, &j.cfg, client, j.host, j.log)
		cancel()
		if err != nil {
			return err
		}
		j.setNodes(g)
		defer func() { err = errors.Join(err, j.leaveNodes(g)) }()
	}

	j.spawn(prog.path, endpoints)
	j.ranks.Wait()
	// Nothing is left to kill; a running grace period must not cut short
	// the wait for the other nodes below.
	j.stopKillTimer()
	return nil
}

// startEtcd gives the endpoints the ranks use, how this cellrun reaches
// them, and how to stop the embedded etcd if it serves one.
func (j *job) startEtcd() ([]string, bootstrap.ClientConfig, func() error, error) {
	if len(j.cfg.EtcdEndpoints) > 0 {
		client := j.cfg.etcdClient()
		// Node 0 of a job may come up after the others: their first
		// contact is the nodes' join, which waits for it.
		if j.cfg.Nodes == 1 {
			if err := client.Probe(j.stopCtx); err != nil {
				return nil, bootstrap.ClientConfig{}, nil, fmt.Errorf("--etcd %s: %w", strings.Join(j.cfg.EtcdEndpoints, ","), err)
			}
		}
		return j.cfg.EtcdEndpoints, client, func() error { return nil }, nil
	}
	ctx, cancel := context.WithTimeout(j.stopCtx, etcdStartTimeout)
	defer cancel()
	// Without --etcd-serve only this node's ranks need etcd: a unix socket
	// in the server's private directory keeps every other user out.
	srv, err := bootstrap.StartServer(ctx, bootstrap.ServerConfig{
		ClientAddr: j.cfg.EtcdServe, Unix: j.cfg.EtcdServe == "", Logger: j.log,
	})
	if err != nil {
		if j.cfg.EtcdServe != "" {
			return nil, bootstrap.ClientConfig{}, nil, fmt.Errorf("--etcd-serve %q: %w", j.cfg.EtcdServe, err)
		}
		return nil, bootstrap.ClientConfig{}, nil, fmt.Errorf("embedded etcd: %w", err)
	}
	stop := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), etcdStopTimeout)
		defer cancel()
		return srv.Close(ctx)
	}
	return srv.Endpoints(), srv.ClientConfig(), stop, nil
}

// leaveNodes ends this node's part in the nodes' group once its ranks are
// gone: the stop report, if any, is delivered first; a node serving etcd
// then waits for the others to leave, since they need it until then (a
// second signal cuts that short).
func (j *job) leaveNodes(g *nodeGroup) error {
	j.mu.Lock()
	published := j.published
	j.mu.Unlock()
	if published != nil {
		<-published // bounded by the node timeout
	}
	if j.cfg.EtcdServe != "" {
		j.log.Debug("waiting for the other nodes to leave before stopping etcd")
		_ = g.waitOthers(j.killCtx)
		// A report that arrived meanwhile may be our own signal's.
		j.mu.Lock()
		published = j.published
		j.mu.Unlock()
		if published != nil {
			<-published
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), j.cfg.NodeTimeout)
	defer cancel()
	return g.close(ctx)
}

// consoleWriter writes whole log records to the console, so that they do
// not tear the ranks' lines.
type consoleWriter struct {
	c *console
	w io.Writer
}

func (cw consoleWriter) Write(p []byte) (int, error) {
	cw.c.write(cw.w, p)
	return len(p), nil
}
