package bootstrap

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultLeaseTTL is the liveness lease of a rank when Config.LeaseTTL is
// zero: a dead rank is noticed by the others about this long after it died.
const DefaultLeaseTTL = 5 * time.Second

// SecretSize is the length in bytes of a job secret.
const SecretSize = 32

// Member is what a rank tells the others about itself when it registers.
type Member struct {
	Rank int    `json:"rank"`
	Host string `json:"host"`
	PID  int    `json:"pid"`
	// Endpoints are transport addresses at which the rank accepts
	// connections (e.g. the tcp provider's listen address).
	Endpoints []string `json:"endpoints,omitempty"`
	// Capabilities name the transports the rank can use, e.g. "shm", "tcp".
	Capabilities []string `json:"capabilities,omitempty"`
	// Info is opaque provider data, for instance JSON.
	Info []byte `json:"info,omitempty"`
}

// Config says which job and rank to join and where the ranks meet.
type Config struct {
	// Store is where the ranks meet. Nil means an etcd cluster reached
	// through Client, which Join connects to and Close disconnects from;
	// a Store given here is the caller's, and Close leaves it open.
	Store Store
	// Client reaches etcd when Store is nil and StoreAddr empty.
	Client ClientConfig
	// StoreAddr, when Store is nil, is the host:port of a store that a
	// rank of the job serves (see ServeStore) instead of etcd: Join
	// connects to it, proving Secret, which is then required, and waits
	// for it to listen until ctx ends. Close disconnects.
	StoreAddr string
	// ServeStore, with StoreAddr, makes this rank the one that serves the
	// store: it listens on ServeStore (e.g. ":29400") and uses the store
	// in its own memory. Its Close waits for the other ranks to leave the
	// store (each hangs up or its lease ends), at most StoreLinger.
	ServeStore  string
	StoreLinger time.Duration
	// Job is the job id: letters, digits, '.', '_' and '-'.
	Job string
	// Rank is this process's rank in [0, WorldSize).
	Rank int
	// WorldSize is the number of ranks in the job; every rank must agree.
	WorldSize int
	// Host is the name registered for this rank; empty means os.Hostname().
	Host string
	// Endpoints, Capabilities and Info are registered as given (see Member).
	Endpoints    []string
	Capabilities []string
	Info         []byte
	// Secret is the job secret, SecretSize bytes or more, handed to every
	// rank by the launcher: it then never enters the store. Nil means the
	// first rank to join makes one and the others read it from the store,
	// where anyone who can read the store can read it too.
	Secret []byte
	// LeaseTTL is the liveness lease; zero means DefaultLeaseTTL. etcd
	// counts in whole seconds, so it is rounded up, to at least one second.
	LeaseTTL time.Duration
	// KeyPrefix is where jobs live in the store; empty means DefaultKeyPrefix.
	KeyPrefix string
	// Logger receives the job's messages; nil means slog.Default().
	Logger *slog.Logger
}

var jobIDPattern = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

// validate checks the configuration and fills in defaults.
func (c *Config) validate() error {
	if !jobIDPattern.MatchString(c.Job) {
		return fmt.Errorf("bootstrap: job id %q: want letters, digits, '.', '_' or '-'", c.Job)
	}
	if c.WorldSize < 1 {
		return fmt.Errorf("bootstrap: job %q: world size %d, want at least 1", c.Job, c.WorldSize)
	}
	if c.Rank < 0 || c.Rank >= c.WorldSize {
		return fmt.Errorf("bootstrap: job %q: rank %d, want 0 <= rank < world size %d", c.Job, c.Rank, c.WorldSize)
	}
	if c.LeaseTTL < 0 {
		return fmt.Errorf("bootstrap: job %q rank %d: lease TTL %v, want > 0 (or 0 for the default)", c.Job, c.Rank, c.LeaseTTL)
	}
	if c.StoreAddr != "" && c.Store == nil && c.Secret == nil {
		return fmt.Errorf("bootstrap: job %q rank %d: the store at %s needs the job secret (Config.Secret)", c.Job, c.Rank, c.StoreAddr)
	}
	if c.ServeStore != "" && c.StoreAddr == "" {
		return fmt.Errorf("bootstrap: job %q rank %d: serving the store on %s needs StoreAddr, where the other ranks reach it", c.Job, c.Rank, c.ServeStore)
	}
	if c.StoreLinger < 0 {
		return fmt.Errorf("bootstrap: job %q rank %d: store linger %v, want > 0 (or 0 for the default)", c.Job, c.Rank, c.StoreLinger)
	}
	if c.StoreLinger == 0 {
		c.StoreLinger = DefaultStoreLinger
	}
	if c.Secret != nil && len(c.Secret) < SecretSize {
		return fmt.Errorf("bootstrap: job %q rank %d: secret of %d bytes, want at least %d", c.Job, c.Rank, len(c.Secret), SecretSize)
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	if c.KeyPrefix == "" {
		c.KeyPrefix = DefaultKeyPrefix
	}
	if c.Host == "" {
		h, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("bootstrap: job %q rank %d: host name: %w", c.Job, c.Rank, err)
		}
		c.Host = h
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

// registration is the value of a rank's info key.
type registration struct {
	Member
	WorldSize int   `json:"world_size"`
	Lease     int64 `json:"lease"`
}

// Job is one rank's membership of a job. Its methods are safe for concurrent
// use, except that calls of Barrier with the same name must not overlap.
type Job struct {
	cfg      Config
	store    Store
	ownStore bool // Join opened it, Close closes it
	keys     keyspace
	lease    LeaseID
	ttl      time.Duration
	self     Member
	secret   []byte
	log      *slog.Logger

	// ctx lives until Close and stops the background goroutines.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu    sync.Mutex
	state *state
	// barrierGen is the last generation this rank entered, per barrier name.
	barrierGen map[string]int64

	degradeOnce sync.Once
	activity    activity
	closeOnce   sync.Once
	closeErr    error
}

// Join registers cfg.Rank in the job and reads the job secret, creating it
// if this rank is the first (unless cfg.Secret gives it). It does not wait
// for the other ranks: see WaitWorld. If the store cannot be reached before
// ctx ends the error wraps ErrUnreachable; if a live process holds the
// rank it is a *DuplicateRankError.
func Join(ctx context.Context, cfg Config) (*Job, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	store, own := cfg.Store, false
	if store == nil {
		var err error
		if store, err = openStore(ctx, &cfg); err != nil {
			return nil, fmt.Errorf("bootstrap: job %q rank %d: %w", cfg.Job, cfg.Rank, err)
		}
		own = true
	}
	j := &Job{
		cfg:        cfg,
		store:      store,
		ownStore:   own,
		keys:       keyspace{prefix: cfg.KeyPrefix + cfg.Job + "/"},
		ttl:        cfg.LeaseTTL,
		barrierGen: make(map[string]int64),
		log:        cfg.Logger.With("component", "bootstrap", "job", cfg.Job, "rank", cfg.Rank),
		self: Member{
			Rank:         cfg.Rank,
			Host:         cfg.Host,
			PID:          os.Getpid(),
			Endpoints:    slices.Clone(cfg.Endpoints),
			Capabilities: slices.Clone(cfg.Capabilities),
			Info:         slices.Clone(cfg.Info),
		},
	}
	j.ctx, j.cancel = context.WithCancel(context.Background())
	j.state = newState(cfg.Job, cfg.Rank, cfg.WorldSize, j.keys)
	if err := j.grant(ctx); err != nil {
		j.abandon()
		return nil, err
	}
	// Renew the lease before anything else: with a short TTL on a busy
	// machine, registering and listing must not be what lets it lapse.
	j.wg.Add(1)
	go j.keepAlive()
	if err := j.register(ctx); err != nil {
		j.abandon()
		return nil, err
	}
	if err := j.startFollowing(ctx); err != nil {
		j.abandon()
		return nil, err
	}
	j.log.Debug("joined", "host", j.self.Host, "pid", j.self.PID, "world_size", cfg.WorldSize)
	return j, nil
}

// grant takes the rank's lease.
func (j *Job) grant(ctx context.Context) error {
	lease, ttl, err := j.store.Grant(ctx, j.ttl)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("bootstrap: job %q rank %d: %s: %w: %w",
				j.cfg.Job, j.cfg.Rank, j.store.Describe(), ErrUnreachable, ctx.Err())
		}
		return fmt.Errorf("bootstrap: job %q rank %d: grant lease: %w", j.cfg.Job, j.cfg.Rank, err)
	}
	// The store may enforce a longer minimum TTL than we asked for.
	j.lease, j.ttl = lease, ttl
	return nil
}

// register claims the rank's slot under its lease and reads the secret.
func (j *Job) register(ctx context.Context) error {
	lease := j.lease
	reg, err := json.Marshal(registration{Member: j.self, WorldSize: j.cfg.WorldSize, Lease: int64(lease)})
	if err != nil {
		return fmt.Errorf("bootstrap: job %q rank %d: encode registration: %w", j.cfg.Job, j.cfg.Rank, err)
	}
	created, existing, err := j.store.Create(ctx, j.keys.info(j.cfg.Rank), reg, lease)
	if err != nil {
		return fmt.Errorf("bootstrap: job %q rank %d: register: %w", j.cfg.Job, j.cfg.Rank, err)
	}
	if !created {
		dup := &DuplicateRankError{Job: j.cfg.Job, Rank: j.cfg.Rank}
		var other registration
		if json.Unmarshal(existing, &other) == nil {
			dup.Host, dup.PID = other.Host, other.PID
		}
		return dup
	}
	// A stale exit marker from an earlier job with the same id must not
	// make this rank's death look like a clean exit. The marker names the
	// lease it ended, so until it is gone it matches nothing of ours.
	if err := j.store.Delete(ctx, j.keys.exit(j.cfg.Rank), false); err != nil {
		return fmt.Errorf("bootstrap: job %q rank %d: register: %w", j.cfg.Job, j.cfg.Rank, err)
	}

	if j.cfg.Secret != nil {
		j.secret = slices.Clone(j.cfg.Secret)
		return nil
	}
	secret := make([]byte, SecretSize)
	if _, err := rand.Read(secret); err != nil {
		return fmt.Errorf("bootstrap: job %q rank %d: make secret: %w", j.cfg.Job, j.cfg.Rank, err)
	}
	// Whoever creates the key first sets the secret; everyone reads it.
	created, existing, err = j.store.Create(ctx, j.keys.secret(), secret, NoLease)
	if err != nil {
		return fmt.Errorf("bootstrap: job %q rank %d: job secret: %w", j.cfg.Job, j.cfg.Rank, err)
	}
	if !created {
		if len(existing) < SecretSize {
			return fmt.Errorf("bootstrap: job %q rank %d: job secret in the store is missing or shorter than %d bytes",
				j.cfg.Job, j.cfg.Rank, SecretSize)
		}
		secret = existing
	}
	j.secret = secret
	return nil
}

// abandon undoes a Join that failed halfway.
func (j *Job) abandon() {
	j.mu.Lock()
	j.state.close() // a lease revoked on purpose is no news
	j.mu.Unlock()
	j.cancel()
	j.wg.Wait()
	if j.lease != NoLease {
		ctx, cancel := context.WithTimeout(context.Background(), j.ttl)
		_ = j.store.Revoke(ctx, j.lease)
		cancel()
	}
	if j.ownStore {
		_ = j.store.Close()
	}
}

// Rank is this process's rank.
func (j *Job) Rank() int { return j.cfg.Rank }

// WorldSize is the number of ranks in the job.
func (j *Job) WorldSize() int { return j.cfg.WorldSize }

// ID is the job id.
func (j *Job) ID() string { return j.cfg.Job }

// Self is what this rank registered. Its slices must not be modified.
func (j *Job) Self() Member { return j.self }

// Secret is the job secret, SecretSize random bytes shared by every rank of
// the job and by nobody else: given by the launcher (Config.Secret), or
// made by the first rank and kept in the store, where anyone who can read
// the job's keys can read it. The tcp provider authenticates its
// connections with it.
func (j *Job) Secret() []byte { return append([]byte(nil), j.secret...) }

// Close leaves the job cleanly: it marks this rank as exited, so the others
// see a *RankExitedError rather than a *RankDeadError, revokes the lease
// (deleting everything the rank published), and stops following the job.
// The last rank to exit cleanly deletes the job's keys. If the store does
// not answer, Close gives up on it after at most one lease TTL (the lease
// then expires on its own) and still releases everything locally.
// Idempotent.
func (j *Job) Close(ctx context.Context) error {
	j.closeOnce.Do(func() {
		j.mu.Lock()
		j.state.close()
		j.mu.Unlock()

		// Past one TTL the lease is gone anyway, so waiting longer on an
		// unreachable store gains nothing.
		cctx, cancel := context.WithTimeout(ctx, j.ttl)
		j.closeErr = j.leave(cctx)
		cancel()

		j.cancel()
		j.wg.Wait()
		// Only follow sends departures, and it has returned.
		close(j.state.departures)
		j.mu.Lock()
		for _, pub := range j.state.published {
			close(pub.ch)
		}
		j.state.published = nil
		j.mu.Unlock()
		if !j.ownStore {
			return
		}
		if err := j.store.Close(); err != nil && j.closeErr == nil && !errors.Is(err, context.Canceled) {
			j.closeErr = fmt.Errorf("bootstrap: job %q rank %d: close %s: %w", j.cfg.Job, j.cfg.Rank, j.store.Describe(), err)
		}
	})
	return j.closeErr
}

// leave marks the clean exit, revokes the lease and, if every rank has now
// exited cleanly, removes the job from the store.
func (j *Job) leave(ctx context.Context) error {
	err := j.store.Put(ctx, j.keys.exit(j.cfg.Rank), []byte(fmt.Sprint(int64(j.lease))), NoLease)
	if err != nil {
		return fmt.Errorf("bootstrap: job %q rank %d: mark clean exit: %w", j.cfg.Job, j.cfg.Rank, err)
	}
	if err := j.store.Revoke(ctx, j.lease); err != nil {
		return fmt.Errorf("bootstrap: job %q rank %d: revoke lease: %w", j.cfg.Job, j.cfg.Rank, err)
	}
	kvs, _, err := j.store.List(ctx, j.keys.prefix+"member/")
	if err != nil {
		return fmt.Errorf("bootstrap: job %q rank %d: list members: %w", j.cfg.Job, j.cfg.Rank, err)
	}
	exited := 0
	for _, kv := range kvs {
		switch j.keys.parse(kv.Key).kind {
		case kindInfo:
			return nil // someone is still running
		case kindExit:
			exited++
		}
	}
	if exited < j.cfg.WorldSize {
		return nil // someone died: leave the markers for the post-mortem
	}
	// Only ranks that are gone could still read these keys, so racing with
	// another last rank doing the same is harmless.
	if err := j.store.Delete(ctx, j.keys.prefix, true); err != nil {
		return fmt.Errorf("bootstrap: job %q rank %d: remove job keys: %w", j.cfg.Job, j.cfg.Rank, err)
	}
	return nil
}

// Activity counts what woke this rank's background goroutines since Join.
// Once the ranks have connected, a job whose membership does not change
// should only ever renew its lease: a rank that is idle in etcd terms
// wakes up once per renewal (about every third of the lease TTL) and for
// nothing else.
type Activity struct {
	// Renewals counts the lease renewals etcd confirmed. It also measures
	// time in the units that matter to liveness: three renewals span
	// about one lease TTL.
	Renewals uint64
	// WatchResponses counts the responses of the watch on the job's keys,
	// each a wake-up of the goroutine that follows the job, whether or
	// not it carried a change.
	WatchResponses uint64
	// WatchRestarts counts the watches started again after one ended.
	WatchRestarts uint64
}

// activity is the live form of Activity.
type activity struct {
	renewals, watchResponses, watchRestarts atomic.Uint64
	// applied is the store revision up to which the state follows the job,
	// so that tests can tell when every change has arrived.
	applied atomic.Int64
}

// Activity returns what woke this rank's background goroutines so far.
func (j *Job) Activity() Activity {
	return Activity{
		Renewals:       j.activity.renewals.Load(),
		WatchResponses: j.activity.watchResponses.Load(),
		WatchRestarts:  j.activity.watchRestarts.Load(),
	}
}
