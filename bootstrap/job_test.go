package bootstrap

import (
	"context"
	"errors"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runRanks runs fn for every rank of a job (over etcd each rank with its own client),
// and returns the ranks' errors indexed by rank.
func runRanks(t *testing.T, m meeting, job string, world int, fn func(context.Context, *Job) error) ([]*Job, []error) {
	t.Helper()
	ctx := testContext(t)
	jobs := make([]*Job, world)
	errs := make([]error, world)
	var wg sync.WaitGroup
	for r := range world {
		wg.Go(func() {
			j, err := Join(ctx, m.config(job, r, world))
			if err != nil {
				errs[r] = err
				return
			}
			jobs[r] = j
			errs[r] = fn(ctx, j)
		})
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, j := range jobs {
			if j != nil {
				_ = j.Close(context.Background())
			}
		}
	})
	return jobs, errs
}

func TestJobExchangeAllToAll(t *testing.T) {
	eachStore(t, func(t *testing.T, m meeting) {
		const world = 4
		jobs, errs := runRanks(t, m, "all-to-all", world, exchangeAll)
		for r, err := range errs {
			require.NoError(t, err, "rank %d", r)
		}

		members, err := jobs[2].WaitWorld(testContext(t))
		require.NoError(t, err)
		require.Len(t, members, world)
		host, err := os.Hostname()
		require.NoError(t, err)
		for r, m := range members {
			assert.Equal(t, Member{
				Rank:         r,
				Host:         host,
				PID:          os.Getpid(),
				Endpoints:    rankConfig(ClientConfig{}, "", r, world).Endpoints,
				Capabilities: []string{"shm", "tcp"},
				Info:         rankConfig(ClientConfig{}, "", r, world).Info,
			}, m)
		}
		assert.Equal(t, members[1], jobs[1].Self())
		assert.Equal(t, "all-to-all", jobs[0].ID())

		// Everyone can still leave cleanly, and the last one out cleans up.
		ctx := testContext(t)
		for _, j := range jobs {
			require.NoError(t, j.Close(ctx))
		}
		assert.Empty(t, m.list(t, DefaultKeyPrefix+"all-to-all/"), "job keys left in the store")
	})
}

func TestJobSecret(t *testing.T) {
	eachStore(t, func(t *testing.T, m meeting) {
		if m.net != nil {
			t.Skip("the ranks of a served store are given the job secret: it is never made in the store")
		}
		secrets := make(map[string][][]byte)
		for _, job := range []string{"job-a", "job-b"} {
			jobs, errs := runRanks(t, m, job, 3, func(context.Context, *Job) error { return nil })
			for r, err := range errs {
				require.NoError(t, err, "job %s rank %d", job, r)
			}
			for _, j := range jobs {
				secrets[job] = append(secrets[job], j.Secret())
			}
		}
		for job, s := range secrets {
			require.Len(t, s[0], SecretSize, job)
			assert.NotEqual(t, make([]byte, SecretSize), s[0], "job %s: secret is all zero", job)
			for r := range s {
				assert.Equal(t, s[0], s[r], "job %s rank %d sees another secret", job, r)
			}
		}
		assert.NotEqual(t, secrets["job-a"][0], secrets["job-b"][0], "two jobs share a secret")
	})
}

func TestJobMissingRank(t *testing.T) {
	eachStore(t, func(t *testing.T, m meeting) {
		const world = 4
		jobs := make([]*Job, 0, 2)
		for _, r := range []int{0, 2} {
			jobs = append(jobs, join(t, m.config("missing", r, world)))
		}
		ctx, cancel := context.WithTimeout(testContext(t), testTTL/2)
		defer cancel()
		_, err := jobs[0].WaitWorld(ctx)

		var miss *MissingRanksError
		require.ErrorAs(t, err, &miss)
		assert.Equal(t, []int{1, 3}, miss.Missing)
		assert.Equal(t, world, miss.WorldSize)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Contains(t, err.Error(), "ranks [1 3] of 4 missing")
	})
}

func TestJobDuplicateRank(t *testing.T) {
	eachStore(t, func(t *testing.T, m meeting) {
		first := m.config("dup", 1, 2)
		first.Host = "node-a"
		join(t, first)

		second := m.config("dup", 1, 2)
		second.Host = "node-b"
		_, err := Join(testContext(t), second)
		var dup *DuplicateRankError
		require.ErrorAs(t, err, &dup)
		assert.Equal(t, DuplicateRankError{Job: "dup", Rank: 1, Host: "node-a", PID: os.Getpid()}, *dup)
		assert.Contains(t, err.Error(), "rank 1 is already registered by host node-a")
	})
}

func TestJobWorldSizeMismatch(t *testing.T) {
	eachStore(t, func(t *testing.T, m meeting) {
		j := join(t, m.config("sizes", 0, 2))
		join(t, m.config("sizes", 1, 3))
		_, err := j.WaitWorld(testContext(t))
		require.ErrorIs(t, err, ErrWorldSize)
		assert.Contains(t, err.Error(), "rank 1")
	})
}

func TestJobInvalidConfig(t *testing.T) {
	cc := ClientConfig{Endpoints: []string{"127.0.0.1:1"}}
	tests := []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"bad job id", func(c *Config) { c.Job = "a/b" }, `job id "a/b"`},
		{"empty job id", func(c *Config) { c.Job = "" }, `job id ""`},
		{"no world", func(c *Config) { c.WorldSize = 0 }, "world size 0"},
		{"rank too big", func(c *Config) { c.Rank = 4 }, "rank 4, want 0 <= rank < world size 4"},
		{"negative rank", func(c *Config) { c.Rank = -1 }, "rank -1"},
		{"negative ttl", func(c *Config) { c.LeaseTTL = -1 }, "lease TTL"},
		{"no endpoints", func(c *Config) { c.Client.Endpoints = nil }, "no etcd endpoints"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := rankConfig(cc, "job", 1, 4)
			tt.edit(&cfg)
			_, err := Join(testContext(t), cfg)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestJobPeerArguments(t *testing.T) {
	eachStore(t, func(t *testing.T, m meeting) {
		j := join(t, m.config("args", 0, 1))
		ctx := testContext(t)
		assert.ErrorContains(t, j.Put(ctx, 1, "k", nil), "put for rank 1: want 0 <= rank < world size 1")
		_, err := j.Get(ctx, -1, "k")
		assert.ErrorContains(t, err, "get from rank -1")
		assert.ErrorContains(t, j.Put(ctx, 0, "", nil), "empty key")
		assert.ErrorContains(t, j.Barrier(ctx, ""), "empty name")
	})
}

func TestJobGetWaitsForPut(t *testing.T) {
	eachStore(t, func(t *testing.T, m meeting) {
		a := join(t, m.config("wait", 0, 2))
		b := join(t, m.config("wait", 1, 2))
		ctx := testContext(t)

		got := make(chan []byte, 1)
		errc := make(chan error, 1)
		go func() {
			v, err := b.Get(ctx, 0, "late/key")
			got <- v
			errc <- err
		}()
		require.NoError(t, a.Put(ctx, 1, "late/key", []byte("value")))
		require.NoError(t, <-errc)
		assert.Equal(t, []byte("value"), <-got)
	})
}

func TestJobBarrierMissingRank(t *testing.T) {
	eachStore(t, func(t *testing.T, m meeting) {
		a := join(t, m.config("barrier", 0, 3))
		b := join(t, m.config("barrier", 1, 3))
		c := join(t, m.config("barrier", 2, 3))

		ctx := testContext(t)
		done := make(chan error, 1)
		go func() { done <- b.Barrier(ctx, "setup") }()

		short, cancel := context.WithTimeout(ctx, testTTL/2)
		defer cancel()
		err := a.Barrier(short, "setup")
		var miss *MissingRanksError
		require.ErrorAs(t, err, &miss)
		assert.Equal(t, []int{2}, miss.Missing)
		assert.Contains(t, err.Error(), `barrier "setup" generation 1`)
		// Rank 0 did arrive, so its leaving does not break the barrier for
		// rank 1; rank 2 leaving without arriving does, at once.
		require.NoError(t, a.Close(ctx))
		require.NoError(t, c.Close(ctx))
		err = <-done
		var exited *RankExitedError
		require.ErrorAs(t, err, &exited)
		assert.Equal(t, 2, exited.Rank)
	})
}

func TestJobCleanExit(t *testing.T) {
	eachStore(t, func(t *testing.T, m meeting) {
		a := join(t, m.config("clean", 0, 2))
		b := join(t, m.config("clean", 1, 2))
		ctx := testContext(t)
		_, err := a.WaitWorld(ctx)
		require.NoError(t, err)
		require.Nil(t, a.Departed(1))

		require.NoError(t, b.Close(ctx))
		require.NoError(t, b.Close(ctx), "Close is idempotent")

		err = nextDeparture(ctx, t, a)
		var exited *RankExitedError
		require.ErrorAs(t, err, &exited)
		assert.Equal(t, RankExitedError{Job: "clean", Rank: 1, Host: b.Self().Host, PID: os.Getpid()}, *exited)
		var dead *RankDeadError
		assert.False(t, errors.As(err, &dead), "a clean exit reported as a death")
		assert.Equal(t, err, a.Departed(1))

		// Waiting on a rank that is gone fails at once, naming it.
		_, err = a.Get(ctx, 1, "never")
		require.ErrorAs(t, err, &exited)
		assert.Contains(t, err.Error(), `get "never" from rank 1`)

		// After Close: ErrClosed, and the departures channel is closed.
		require.ErrorIs(t, b.Put(ctx, 0, "k", nil), ErrClosed)
		require.ErrorIs(t, b.Barrier(ctx, "x"), ErrClosed)
		_, err = b.Get(ctx, 0, "k")
		require.ErrorIs(t, err, ErrClosed)
		_, open := <-b.Departures()
		assert.False(t, open)
	})
}

func TestJobLeaseLost(t *testing.T) {
	eachStore(t, func(t *testing.T, m meeting) {
		a := join(t, m.config("lost", 0, 2))
		b := join(t, m.config("lost", 1, 2))
		ctx := testContext(t)
		_, err := a.WaitWorld(ctx)
		require.NoError(t, err)

		// Rank 1 vanishes without a word: it stops renewing its lease,
		// which runs out, as when its process dies.
		b.cancel()

		err = nextDeparture(ctx, t, a)
		var dead *RankDeadError
		require.ErrorAs(t, err, &dead)
		assert.Equal(t, RankDeadError{Job: "lost", Rank: 1, Host: b.Self().Host, PID: os.Getpid()}, *dead)
		assert.Contains(t, err.Error(), "rank 1 (host "+b.Self().Host)
	})
}

func TestJobCloseLeavesNoGoroutines(t *testing.T) {
	eachStore(t, func(t *testing.T, m meeting) {
		ctx := testContext(t)
		// Let the server settle, then count: what a job starts, Close must end.
		warm := join(t, m.config("warm-up", 0, 1))
		require.NoError(t, warm.Close(ctx))
		before := settledGoroutines(ctx, 0)

		jobs, errs := runRanks(t, m, "goroutines", 3, exchangeAll)
		for r, err := range errs {
			require.NoError(t, err, "rank %d", r)
		}
		for _, j := range jobs {
			require.NoError(t, j.Close(ctx))
		}
		after := settledGoroutines(ctx, before)
		if after > before {
			buf := make([]byte, 1<<20)
			t.Logf("goroutines:\n%s", buf[:runtime.Stack(buf, true)])
		}
		assert.LessOrEqual(t, after, before, "goroutines left after Close")
	})
}

// settledGoroutines waits until at most target goroutines run (any number
// when target is 0 and the count has stopped moving) and returns the count;
// at ctx's end it returns what runs then.
func settledGoroutines(ctx context.Context, target int) int {
	last := -1
	for {
		n := runtime.NumGoroutine()
		if (target > 0 && n <= target) || (target == 0 && n == last) || ctx.Err() != nil {
			return n
		}
		last = n
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
		}
	}
}
