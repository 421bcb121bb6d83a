package comm

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/rdmacell/rdmacell/bootstrap"
)

// Init joins the job: it registers with the bootstrap, waits for every
// rank, opens the transports and passes a setup barrier. It returns the
// world communicator. All of it is bounded by ctx and by
// Options.RendezvousTimeout. Peers are connected later, each when an
// operation first needs it (see connect.go).
//
// With zero Options (WorldSize 0), Init reads the launcher's environment
// (see OptionsFromEnv); fields set in opts other than the rank, world
// size, job and etcd ones then override the environment's. With a world
// size given, Init reads no environment at all.
func Init(ctx context.Context, opts Options) (*Comm, error) {
	if opts.WorldSize == 0 {
		env, err := OptionsFromEnv()
		if err != nil {
			return nil, err
		}
		opts = overlay(env, opts)
	}
	if err := opts.resolve(); err != nil {
		return nil, err
	}
	w := newWorld(opts, newLogger(opts.Logger, opts.Debug))
	if err := w.listenMetrics(); err != nil {
		return nil, fmt.Errorf("comm: rank %d of job %q: init: %w", opts.Rank, opts.Job, err)
	}
	ctx, cancel := context.WithTimeout(ctx, opts.RendezvousTimeout)
	defer cancel()
	if err := w.start(ctx); err != nil {
		w.setFailure(err)
		_ = w.release(err)
		return nil, fmt.Errorf("comm: rank %d of job %q: init: %w", opts.Rank, opts.Job, err)
	}
	w.serveMetrics()
	w.log.Debug("communicator ready", "world_size", w.size, "host", w.host,
		"local_rank", w.localRank, "local_size", w.localSize)
	return w.comm, nil
}

// overlay returns env with the fields set in o.
func overlay(env, o Options) Options {
	if o.LocalWorldSize != 0 {
		env.LocalRank, env.LocalWorldSize = o.LocalRank, o.LocalWorldSize
	}
	over(&env.RendezvousTimeout, o.RendezvousTimeout)
	over(&env.LeaseTTL, o.LeaseTTL)
	over(&env.Host, o.Host)
	over(&env.Transport, o.Transport)
	over(&env.Paths, o.Paths)
	over(&env.CellSize, o.CellSize)
	over(&env.Policy, o.Policy)
	over(&env.TCPAddr, o.TCPAddr)
	over(&env.Debug, o.Debug)
	over(&env.CloseTimeout, o.CloseTimeout)
	over(&env.IBV, o.IBV)
	over(&env.Logger, o.Logger)
	over(&env.Store, o.Store)
	over(&env.Timeout, o.Timeout)
	over(&env.StallReport, o.StallReport)
	over(&env.TraceDir, o.TraceDir)
	over(&env.FlightOps, o.FlightOps)
	over(&env.MetricsAddr, o.MetricsAddr)
	if o.Secret != nil {
		env.Secret = o.Secret
	}
	if o.tcpSecret != nil {
		env.tcpSecret = o.tcpSecret
	}
	if o.wrapDevice != nil {
		env.wrapDevice = o.wrapDevice
	}
	return env
}

// over sets *dst to v unless v is the zero value: an option given
// explicitly overrides the environment's.
func over[T comparable](dst *T, v T) {
	var zero T
	if v != zero {
		*dst = v
	}
}

// start does the work of Init.
func (w *world) start(ctx context.Context) error {
	o := &w.opts
	// Each phase's time is logged at debug level: where setup time goes
	// differs with the world size and the load of the machine.
	t0 := time.Now()
	phase := func(name string) { w.log.Debug("init: "+name, "after", time.Since(t0).Round(time.Microsecond)) }
	job, err := bootstrap.Join(ctx, bootstrap.Config{
		Store:        o.Store,
		Client:       o.Etcd,
		StoreAddr:    o.StoreAddr,
		ServeStore:   o.ServeStore,
		Secret:       o.Secret,
		Job:          o.Job,
		Rank:         o.Rank,
		WorldSize:    o.WorldSize,
		Host:         o.Host,
		Capabilities: []string{string(TransportShm), string(TransportTCP)},
		LeaseTTL:     o.LeaseTTL,
		Logger:       w.logger(""),
	})
	if err != nil {
		return err
	}
	w.job = job
	w.host = job.Self().Host
	phase("joined")
	members, err := job.WaitWorld(ctx)
	if err != nil {
		return err
	}
	phase("world complete")
	w.peers = make([]*peer, w.size)
	for r, m := range members {
		p := newPeer(w, r)
		p.host, p.pid, p.self = m.Host, m.PID, r == w.rank
		w.peers[r] = p
		if p.self {
			close(p.exited)
		} else {
			p.queueHelloLocked() // no one else has p yet
			go p.run()
		}
	}
	w.wg.Add(1)
	go w.watchDepartures()
	w.startWatchdog()

	if err := w.openDevices(); err != nil {
		return err
	}
	for _, p := range w.peers {
		if !p.self {
			w.wg.Add(1)
			go w.watchAborts(p)
		}
	}
	// Every rank listens before any connects to it.
	if err := job.Barrier(ctx, "comm/setup"); err != nil {
		return err
	}
	phase("setup barrier passed")
	w.wg.Add(1)
	go w.answerDials()
	ranks := make([]int, w.size)
	for i := range ranks {
		ranks[i] = i
	}
	c, err := w.newComm(worldID, ranks)
	if err != nil {
		return err
	}
	if o.LocalWorldSize > 0 {
		c.localRank, c.localSize = o.LocalRank, o.LocalWorldSize
	}
	w.localRank, w.localSize = c.localRank, c.localSize
	w.comm = c
	return nil
}

// openDevices picks each peer's transport and opens the devices needed.
func (w *world) openDevices() error {
	var need [numDevices]bool
	for _, p := range w.peers {
		if p.self {
			continue
		}
		d, err := w.pick(p)
		if err != nil {
			return &OptionError{Field: "Transport", Value: strconv.Quote(string(w.opts.Transport)),
				Want: fmt.Sprintf("auto, tcp or ibv: %v", err)}
		}
		p.dev = d
		need[d] = true
	}
	for i, pr := range providers {
		if !need[i] {
			continue
		}
		d, err := pr.open(w)
		if err != nil {
			return fmt.Errorf("open %s: %w", pr.transport, err)
		}
		if w.opts.wrapDevice != nil {
			d = w.opts.wrapDevice(d)
		}
		w.devs[i] = d
	}
	for i, d := range w.devs {
		if d == nil {
			continue
		}
		pd, err := d.AllocPD()
		if err != nil {
			return fmt.Errorf("%s: allocate protection domain: %w", device(i), err)
		}
		w.mem.pds[i] = pd
	}
	return nil
}
