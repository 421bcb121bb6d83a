package launcher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rdmacell/rdmacell/bootstrap"
	"github.com/rdmacell/rdmacell/bootstrap/etcdserver"
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
// The exit code is 0 when every rank exited 0 (of the last generation,
// with MaxRestarts: see restart.go). When the job stopped early, and had
// no restart left, it is the failed rank's code (128+N for signal N),
// 128+N for a signal cellrun received, or that of the failure another
// node reported; Run then writes the one line that says why to stderr and
// returns a nil error. A
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
	sweepDeadDirs(os.TempDir(), j.log)

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
		c.write(stderr, []byte("cellrun: "+j.finalLine(cs.line)+"\n"))
		return cs.code, nil
	}
	if errors.Is(err, ErrUsage) {
		return ExitUsage, err // found only once the nodes met: they disagree on a flag
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
	if j.cfg.TraceDir != "" {
		// The ranks are told the absolute path: it must not depend on
		// where they run.
		dir, err := filepath.Abs(j.cfg.TraceDir)
		if err == nil {
			err = os.MkdirAll(dir, 0o755)
		}
		if err != nil {
			return fmt.Errorf("--trace-dir %q: %w", j.cfg.TraceDir, err)
		}
		j.cfg.TraceDir = dir
	}

	acc, client, stopEtcd, err := j.startEtcd()
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, stopEtcd()) }()

	follow, endFollow := context.WithCancel(context.Background())
	if d := j.startDiagnosis(follow, client); d != nil {
		j.mu.Lock()
		j.diag = d
		j.mu.Unlock()
		defer func() {
			endFollow()
			err = errors.Join(err, d.close())
		}()
	}
	defer endFollow()

	if j.cfg.Nodes > 1 {
		timeout := j.cfg.RendezvousTimeout
		if timeout == 0 {
			timeout = DefaultNodeRendezvous
		}
		ctx, cancel := context.WithTimeout(j.stopCtx, timeout)
		g, err := joinNodes(ctx, &j.cfg, client, acc.secret, j.host, j.log)
		cancel()
		if err != nil {
			return err
		}
		j.setNodes(g)
		defer func() { err = errors.Join(err, j.leaveNodes(g)) }()
	}

	for gen := 0; ; gen++ {
		j.spawn(prog.path, generationAccess(acc, gen), gen)
		j.ranks.Wait()
		j.elasticOutcome()
		j.mergeTraces(gen)
		// Nothing is left to kill; a running grace period must not cut
		// short the wait for the other nodes below.
		j.stopKillTimer()
		if !j.restart() {
			return nil
		}
	}
}

// startEtcd gives how the ranks reach the job (see access), how this
// cellrun reaches etcd, and what undoes both (stopping the embedded etcd
// if it serves one, removing the TLS files).
//
// The job secret comes from the join token when there is one, else it is
// drawn afresh: either way it reaches the ranks through their environment
// and never enters etcd. The etcd is, in order: an external one (--etcd),
// with the credentials of --join (node 0's embedded etcd) or of the
// --etcd-* flags, and a warning, once, if it has none at all; node 0's
// embedded etcd on --etcd-serve, with TLS and client certificates derived
// from the token (printed, when node 0 made it); or an embedded etcd on a
// unix socket only this user can reach.
func (j *job) startEtcd() (access, bootstrap.ClientConfig, func() error, error) {
	acc := access{secret: newJobSecret()}
	var token jobToken
	haveToken := j.cfg.JoinToken != ""
	if haveToken {
		token, _ = parseToken(j.cfg.JoinToken) // checked by validate
		acc.secret, acc.token = token.jobSecret(), &token
	}
	if len(j.cfg.EtcdEndpoints) > 0 {
		return j.externalEtcd(acc, token, haveToken)
	}
	if j.cfg.EtcdServe != "" && !haveToken {
		token = newToken()
		acc.secret, acc.token = token.jobSecret(), &token
		j.console.write(j.console.stderr, []byte("cellrun: start the other nodes with --join "+token.String()+
			" (it is this job's secret: hand it over as you would a password)\n"))
	}
	var srvTLS *etcdserver.TLSFiles
	if j.cfg.EtcdServe != "" {
		host := j.cfg.serveName
		if host == "" {
			host, _, _ = net.SplitHostPort(j.cfg.EtcdServe)
		}
		d, err := writeTLS(token, true, host)
		if err != nil {
			return access{}, bootstrap.ClientConfig{}, nil, err
		}
		acc.tls = d
		srvTLS = &etcdserver.TLSFiles{CertFile: d.serverCertFile, KeyFile: d.serverKeyFile, ClientCAFile: d.caFile}
	}
	ctx, cancel := context.WithTimeout(j.stopCtx, etcdStartTimeout)
	defer cancel()
	// Without --etcd-serve only this node's ranks need etcd: a unix socket
	// in the server's private directory keeps every other user out.
	srv, err := etcdserver.Start(ctx, etcdserver.Config{
		ClientAddr: j.cfg.EtcdServe, Unix: j.cfg.EtcdServe == "", TLS: srvTLS, Logger: j.log,
	})
	if err != nil {
		err = errors.Join(err, acc.tls.remove())
		if j.cfg.EtcdServe != "" {
			return access{}, bootstrap.ClientConfig{}, nil, fmt.Errorf("--etcd-serve %q: %w", j.cfg.EtcdServe, err)
		}
		return access{}, bootstrap.ClientConfig{}, nil, fmt.Errorf("embedded etcd: %w", err)
	}
	stop := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), etcdStopTimeout)
		defer cancel()
		return errors.Join(srv.Close(ctx), acc.tls.remove())
	}
	acc.endpoints = srv.Endpoints()
	client := bootstrap.ClientConfig{Endpoints: srv.Endpoints()}
	if acc.tls != nil {
		client.TLS = &bootstrap.TLSFiles{CAFile: acc.tls.caFile, CertFile: acc.tls.certFile, KeyFile: acc.tls.keyFile}
	}
	return acc, client, stop, nil
}

// externalEtcd is startEtcd for --etcd.
func (j *job) externalEtcd(acc access, token jobToken, haveToken bool) (access, bootstrap.ClientConfig, func() error, error) {
	acc.endpoints = j.cfg.EtcdEndpoints
	client := j.cfg.etcdClient()
	ownTLS := j.cfg.EtcdCA != "" || j.cfg.EtcdCert != ""
	if haveToken && !ownTLS {
		d, err := writeTLS(token, false, "")
		if err != nil {
			return access{}, bootstrap.ClientConfig{}, nil, err
		}
		acc.tls = d
		client.TLS = &bootstrap.TLSFiles{CAFile: d.caFile, CertFile: d.certFile, KeyFile: d.keyFile}
	}
	stop := acc.tls.remove
	// Node 0 of a job may come up after the others: their first contact
	// is the nodes' join, which waits for it.
	if j.cfg.Nodes == 1 {
		if err := client.Probe(j.stopCtx); err != nil {
			err = fmt.Errorf("--etcd %s: %w", strings.Join(j.cfg.EtcdEndpoints, ","), err)
			return access{}, bootstrap.ClientConfig{}, nil, errors.Join(err, stop())
		}
	}
	if client.TLS == nil && client.Username == "" {
		j.log.Warn("etcd without TLS or authentication: whoever can reach it can read and change the job's rendezvous "+
			"(the ranks' addresses, and a stop of the job); the job secret is not stored there",
			"endpoints", strings.Join(acc.endpoints, ","))
	}
	return acc, client, stop, nil
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
