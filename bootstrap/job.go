package bootstrap

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
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

// Config says which job and rank to join and how to reach etcd.
type Config struct {
	// Client reaches etcd.
	Client ClientConfig
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
	// LeaseTTL is the liveness lease; zero means DefaultLeaseTTL. etcd
	// counts in whole seconds, so it is rounded up, to at least one second.
	LeaseTTL time.Duration
	// KeyPrefix is where jobs live in etcd; empty means DefaultKeyPrefix.
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
	cfg    Config
	cli    *clientv3.Client
	keys   keyspace
	lease  clientv3.LeaseID
	ttl    time.Duration
	self   Member
	secret []byte
	log    *slog.Logger

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
// if this rank is the first. It does not wait for the other ranks: see
// WaitWorld. If etcd cannot be reached before ctx ends the error wraps
// ErrUnreachable; if a live process holds the rank it is a
// *DuplicateRankError.
func Join(ctx context.Context, cfg Config) (*Job, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cli, err := cfg.Client.newClient(ctx)
	if err != nil {
		return nil, fmt.Errorf("bootstrap: job %q rank %d: %w", cfg.Job, cfg.Rank, err)
	}
	j := &Job{
		cfg:        cfg,
		cli:        cli,
		keys:       keyspace{prefix: cfg.KeyPrefix + cfg.Job + "/"},
		ttl:        time.Duration(math.Ceil(cfg.LeaseTTL.Seconds())) * time.Second,
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
	if err := j.register(ctx); err != nil {
		j.abandon()
		return nil, err
	}
	// Renew the lease before anything else: with a short TTL, the listing
	// below must not be what lets it lapse.
	j.wg.Add(1)
	go j.keepAlive()
	if err := j.startFollowing(ctx); err != nil {
		j.abandon()
		return nil, err
	}
	j.log.Debug("joined", "host", j.self.Host, "pid", j.self.PID, "world_size", cfg.WorldSize)
	return j, nil
}

// register grants the lease, claims the rank's slot and reads the secret.
func (j *Job) register(ctx context.Context) error {
	lease, err := j.cli.Grant(ctx, int64(j.ttl/time.Second))
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("bootstrap: job %q rank %d: etcd at %v: %w: %w",
				j.cfg.Job, j.cfg.Rank, j.cfg.Client.Endpoints, ErrUnreachable, ctx.Err())
		}
		return fmt.Errorf("bootstrap: job %q rank %d: grant lease: %w", j.cfg.Job, j.cfg.Rank, err)
	}
	j.lease = lease.ID
	// The cluster may enforce a longer minimum TTL than we asked for.
	j.ttl = time.Duration(lease.TTL) * time.Second

	reg, err := json.Marshal(registration{Member: j.self, WorldSize: j.cfg.WorldSize, Lease: int64(lease.ID)})
	if err != nil {
		return fmt.Errorf("bootstrap: job %q rank %d: encode registration: %w", j.cfg.Job, j.cfg.Rank, err)
	}
	info := j.keys.info(j.cfg.Rank)
	// A stale exit marker from an earlier job with the same id must not make
	// this rank's death look like a clean exit, hence the delete.
	resp, err := j.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(info), "=", 0)).
		Then(clientv3.OpPut(info, string(reg), clientv3.WithLease(lease.ID)),
			clientv3.OpDelete(j.keys.exit(j.cfg.Rank))).
		Else(clientv3.OpGet(info)).
		Commit()
	if err != nil {
		return fmt.Errorf("bootstrap: job %q rank %d: register: %w", j.cfg.Job, j.cfg.Rank, err)
	}
	if !resp.Succeeded {
		dup := &DuplicateRankError{Job: j.cfg.Job, Rank: j.cfg.Rank}
		if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
			var other registration
			if json.Unmarshal(kvs[0].Value, &other) == nil {
				dup.Host, dup.PID = other.Host, other.PID
			}
		}
		return dup
	}

	secret := make([]byte, SecretSize)
	if _, err := rand.Read(secret); err != nil {
		return fmt.Errorf("bootstrap: job %q rank %d: make secret: %w", j.cfg.Job, j.cfg.Rank, err)
	}
	// Whoever creates the key first sets the secret; everyone reads it.
	key := j.keys.secret()
	sresp, err := j.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(secret))).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return fmt.Errorf("bootstrap: job %q rank %d: job secret: %w", j.cfg.Job, j.cfg.Rank, err)
	}
	if !sresp.Succeeded {
		kvs := sresp.Responses[0].GetResponseRange().GetKvs()
		if len(kvs) == 0 || len(kvs[0].Value) < SecretSize {
			return fmt.Errorf("bootstrap: job %q rank %d: job secret in etcd is missing or shorter than %d bytes",
				j.cfg.Job, j.cfg.Rank, SecretSize)
		}
		secret = kvs[0].Value
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
	if j.lease != 0 {
		ctx, cancel := context.WithTimeout(context.Background(), j.ttl)
		_, _ = j.cli.Revoke(ctx, j.lease)
		cancel()
	}
	_ = j.cli.Close()
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
// the job and by nobody else (anyone who can read the job's keys in etcd
// can read it). The tcp provider authenticates its connections with it.
func (j *Job) Secret() []byte { return append([]byte(nil), j.secret...) }

// Close leaves the job cleanly: it marks this rank as exited, so the others
// see a *RankExitedError rather than a *RankDeadError, revokes the lease
// (deleting everything the rank published), and stops following the job.
// The last rank to exit cleanly deletes the job's keys. If etcd does not
// answer, Close gives up on it after at most one lease TTL (the lease then
// expires on its own) and still releases everything locally. Idempotent.
func (j *Job) Close(ctx context.Context) error {
	j.closeOnce.Do(func() {
		j.mu.Lock()
		j.state.close()
		j.mu.Unlock()

		// Past one TTL the lease is gone anyway, so waiting longer on an
		// unreachable etcd gains nothing.
		cctx, cancel := context.WithTimeout(ctx, j.ttl)
		j.closeErr = j.leave(cctx)
		cancel()

		j.cancel()
		j.wg.Wait()
		// Only follow sends departures, and it has returned.
		close(j.state.departures)
		if err := j.cli.Close(); err != nil && j.closeErr == nil && !errors.Is(err, context.Canceled) {
			j.closeErr = fmt.Errorf("bootstrap: job %q rank %d: close etcd client: %w", j.cfg.Job, j.cfg.Rank, err)
		}
	})
	return j.closeErr
}

// leave marks the clean exit, revokes the lease and, if every rank has now
// exited cleanly, removes the job from etcd.
func (j *Job) leave(ctx context.Context) error {
	_, err := j.cli.Put(ctx, j.keys.exit(j.cfg.Rank), fmt.Sprint(int64(j.lease)))
	if err != nil {
		return fmt.Errorf("bootstrap: job %q rank %d: mark clean exit: %w", j.cfg.Job, j.cfg.Rank, err)
	}
	if _, err := j.cli.Revoke(ctx, j.lease); err != nil {
		return fmt.Errorf("bootstrap: job %q rank %d: revoke lease: %w", j.cfg.Job, j.cfg.Rank, err)
	}
	resp, err := j.cli.Get(ctx, j.keys.prefix+"member/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return fmt.Errorf("bootstrap: job %q rank %d: list members: %w", j.cfg.Job, j.cfg.Rank, err)
	}
	exited := 0
	for _, kv := range resp.Kvs {
		switch j.keys.parse(string(kv.Key)).kind {
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
	if _, err := j.cli.Delete(ctx, j.keys.prefix, clientv3.WithPrefix()); err != nil {
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
	// applied is the etcd revision up to which the state follows the job,
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
