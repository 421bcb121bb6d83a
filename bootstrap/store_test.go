package bootstrap

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// openStore returns the store of m for direct use.
func (m meeting) open(t *testing.T) Store {
	t.Helper()
	if m.store != nil {
		return m.store
	}
	if m.net != nil {
		return m.dial()
	}
	s, err := NewEtcdStore(testContext(t), clientOf(m.srv))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// nextEvents reads one response of a watch.
func nextEvents(t *testing.T, ctx context.Context, ch <-chan WatchResponse) []Event {
	t.Helper()
	for {
		select {
		case wr, ok := <-ch:
			require.True(t, ok, "watch ended")
			require.NoError(t, wr.Err)
			require.False(t, wr.Compacted)
			if len(wr.Events) > 0 {
				return wr.Events
			}
		case <-ctx.Done():
			require.FailNow(t, "no watch event")
		}
	}
}

// Every store gives a job the same semantics; this is what Job relies on.
func TestStoreContract(t *testing.T) {
	eachStore(t, func(t *testing.T, m meeting) {
		s := m.open(t)
		ctx := testContext(t)
		const p = "/contract/"

		_, rev0, err := s.List(ctx, p)
		require.NoError(t, err)
		watch := s.Watch(ctx, p, rev0+1)

		created, _, err := s.Create(ctx, p+"a", []byte("1"), NoLease)
		require.NoError(t, err)
		assert.True(t, created)
		created, existing, err := s.Create(ctx, p+"a", []byte("2"), NoLease)
		require.NoError(t, err)
		assert.False(t, created, "Create of a key that exists")
		assert.Equal(t, []byte("1"), existing)

		lease, ttl, err := s.Grant(ctx, testTTL)
		require.NoError(t, err)
		assert.GreaterOrEqual(t, ttl, testTTL)
		require.NoError(t, s.Put(ctx, p+"b", []byte("leased"), lease))
		require.NoError(t, s.Put(ctx, "/elsewhere", []byte("x"), NoLease))

		kvs, rev, err := s.List(ctx, p)
		require.NoError(t, err)
		require.Len(t, kvs, 2)
		assert.Equal(t, p+"a", kvs[0].Key)
		assert.Equal(t, []byte("leased"), kvs[1].Value)
		assert.Greater(t, rev, rev0)

		// The watch sees this prefix's changes only, in order.
		var seen []Event
		for len(seen) < 2 {
			seen = append(seen, nextEvents(t, ctx, watch)...)
		}
		assert.Equal(t, p+"a", seen[0].KV.Key)
		assert.Equal(t, p+"b", seen[1].KV.Key)
		assert.Less(t, seen[0].KV.Revision, seen[1].KV.Revision)

		// A lease nobody renews ends, and takes its keys with it.
		ev := nextEvents(t, ctx, watch)
		require.Len(t, ev, 1)
		assert.True(t, ev[0].Deleted)
		assert.Equal(t, p+"b", ev[0].KV.Key)

		// A renewed lease lives on past its TTL.
		lease, _, err = s.Grant(ctx, testTTL)
		require.NoError(t, err)
		kctx, stop := context.WithCancel(ctx)
		renewals, err := s.KeepAlive(kctx, lease)
		require.NoError(t, err)
		require.NoError(t, s.Put(ctx, p+"c", nil, lease))
		time.Sleep(2 * testTTL)
		kvs, _, err = s.List(ctx, p+"c")
		require.NoError(t, err)
		assert.Len(t, kvs, 1, "a renewed lease expired")
		stop()
		for range renewals {
		}
		require.NoError(t, s.Revoke(ctx, lease))
		require.NoError(t, s.Delete(ctx, p, true))
		kvs, _, err = s.List(ctx, p)
		require.NoError(t, err)
		assert.Empty(t, kvs)
	})
}

// A watch that asks for history the local store no longer keeps is told
// so, as etcd does after a compaction, and the job lists again.
func TestLocalStoreCompaction(t *testing.T) {
	s := NewLocalStore()
	defer s.Close()
	ctx := testContext(t)
	for i := range localHistory + 10 {
		require.NoError(t, s.Put(ctx, "/k", []byte{byte(i)}, NoLease))
	}
	wr := <-s.Watch(ctx, "/", 1)
	assert.True(t, wr.Compacted)

	_, rev, err := s.List(ctx, "/")
	require.NoError(t, err)
	require.NoError(t, s.Put(ctx, "/k", []byte("new"), NoLease))
	wr = <-s.Watch(ctx, "/", rev+1)
	require.False(t, wr.Compacted)
	require.Len(t, wr.Events, 1)
	assert.Equal(t, []byte("new"), wr.Events[0].KV.Value)
}

// A secret given by the launcher is the job's, and never enters the store.
func TestJobGivenSecret(t *testing.T) {
	eachStore(t, func(t *testing.T, m meeting) {
		secret := []byte("0123456789abcdef0123456789abcdef")
		if m.net != nil {
			secret = testStoreSecret // the one the store was started with
		}
		cfg := m.config("given", 0, 1)
		cfg.Secret = secret
		j := join(t, cfg)
		assert.Equal(t, secret, j.Secret())
		for _, kv := range m.list(t, DefaultKeyPrefix+"given/") {
			assert.NotContains(t, string(kv.Value), string(secret), "key %s", kv.Key)
			assert.NotEqual(t, DefaultKeyPrefix+"given/secret", kv.Key)
		}
		cfg.Secret = secret[:8]
		_, err := Join(testContext(t), cfg)
		assert.ErrorContains(t, err, "secret of 8 bytes, want at least 32")
	})
}

// Published reports each rank that publishes a key for this one, once,
// whether it did so before the call or after, and ends with Close.
func TestJobPublished(t *testing.T) {
	eachStore(t, func(t *testing.T, m meeting) {
		ctx := testContext(t)
		jobs := make([]*Job, 3)
		for r := range jobs {
			jobs[r] = join(t, m.config("published", r, 3))
		}
		require.NoError(t, jobs[1].Put(ctx, 0, "hello", []byte("1")))
		require.NoError(t, jobs[1].Put(ctx, 0, "other", nil))
		_, err := jobs[0].Get(ctx, 1, "hello") // rank 0 has heard of it
		require.NoError(t, err)
		ch := jobs[0].Published("hello")
		require.Equal(t, 1, <-ch)
		require.NoError(t, jobs[2].Put(ctx, 0, "hello", nil))
		require.NoError(t, jobs[1].Put(ctx, 0, "hello", []byte("again")))
		require.Equal(t, 2, <-ch)
		require.NoError(t, jobs[0].Close(ctx))
		for r := range ch {
			t.Errorf("rank %d reported twice, or a key it did not publish", r)
		}
	})
}

// A lease that KeepAlive renews in this process survives an expiry timer
// that runs after the TTL has passed since the last renewal (on a loaded
// machine the renewing goroutine runs late), and ends at once when
// KeepAlive stops.
func TestLocalLeaseSurvivesLateRenewals(t *testing.T) {
	s := NewLocalStore().(*localStore)
	defer s.Close()
	ctx := testContext(t)
	// Long enough that no renewal runs during the test.
	lease, _, err := s.Grant(ctx, time.Hour)
	require.NoError(t, err)
	kctx, stop := context.WithCancel(ctx)
	renewals, err := s.KeepAlive(kctx, lease)
	require.NoError(t, err)
	require.NoError(t, s.Put(ctx, "/kept", nil, lease))

	s.mu.Lock()
	s.leases[lease].deadline = time.Now().Add(-time.Second)
	s.mu.Unlock()
	s.expire(lease) // what the timer does
	kvs, _, err := s.List(ctx, "/kept")
	require.NoError(t, err)
	require.Len(t, kvs, 1, "a kept lease ended when its renewal ran late")

	stop()
	for range renewals {
	}
	for {
		kvs, _, err = s.List(ctx, "/kept")
		require.NoError(t, err)
		if len(kvs) == 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the lease did not end after KeepAlive stopped")
		case <-time.After(time.Millisecond):
		}
	}
}
