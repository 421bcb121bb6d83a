package bootstrap

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/bootstrap/etcdserver"
)

func TestJoinEtcdUnreachable(t *testing.T) {
	addr := freeAddr(t)
	tests := []struct {
		name string
		cc   ClientConfig
	}{
		{"plain", ClientConfig{Endpoints: []string{addr}}},
		// Authenticating happens while connecting: a dial timeout far past
		// the join's deadline must not hold the join up.
		{"auth", ClientConfig{Endpoints: []string{addr}, Username: "u", Password: "p", DialTimeout: time.Hour}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(testContext(t), time.Second)
			defer cancel()
			_, err := Join(ctx, rankConfig(tt.cc, "nowhere", 0, 2))
			require.ErrorIs(t, err, ErrUnreachable)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			assert.Contains(t, err.Error(), addr)
			assert.Contains(t, err.Error(), "rank 0")
		})
	}
}

// degradeLog counts the degraded-liveness warnings of one rank.
type degradeLog struct {
	mu    sync.Mutex
	count int
	first chan struct{}
}

func newDegradeLog() *degradeLog { return &degradeLog{first: make(chan struct{})} }

func (d *degradeLog) Enabled(context.Context, slog.Level) bool { return true }
func (d *degradeLog) WithAttrs([]slog.Attr) slog.Handler       { return d }
func (d *degradeLog) WithGroup(string) slog.Handler            { return d }

func (d *degradeLog) Handle(_ context.Context, r slog.Record) error {
	if r.Level < slog.LevelWarn || !strings.Contains(r.Message, "lost contact with the store") {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.count++
	if d.count == 1 {
		close(d.first)
	}
	return nil
}

func (d *degradeLog) n() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.count
}

func TestJobSurvivesEtcdLoss(t *testing.T) {
	ctx := testContext(t)
	srv, err := etcdserver.Start(ctx, etcdserver.Config{Logger: quietLogger()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close(context.Background()) })

	const world = 2
	logs := make([]*degradeLog, world)
	jobs := make([]*Job, world)
	for r := range world {
		logs[r] = newDegradeLog()
		cfg := rankConfig(clientOf(srv), "etcd-loss", r, world)
		cfg.Logger = slog.New(logs[r])
		jobs[r] = join(t, cfg)
	}
	var wg sync.WaitGroup
	errs := make([]error, world)
	for r, j := range jobs {
		wg.Go(func() { errs[r] = exchangeAll(ctx, j) })
	}
	wg.Wait()
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
	secret := jobs[0].Secret()

	require.NoError(t, srv.Close(ctx))

	for r, j := range jobs {
		// Everything already exchanged is still there, without etcd.
		members, err := j.WaitWorld(ctx)
		require.NoError(t, err)
		assert.Len(t, members, world)
		got, err := j.Get(ctx, 1-r, qpKey(1))
		require.NoError(t, err)
		assert.Equal(t, qpInfo(1-r, r, 1), string(got))
		assert.Equal(t, secret, j.Secret())

		// Losing etcd is logged, and is not mistaken for a rank's death.
		select {
		case <-logs[r].first:
		case <-ctx.Done():
			require.FailNow(t, "degraded liveness never logged", "rank %d", r)
		}
		assert.Nil(t, j.Departed(1-r))
	}

	// Close gives up on etcd after about a TTL instead of hanging.
	for _, j := range jobs {
		err := j.Close(ctx)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "mark clean exit")
		var departures []error
		for d := range j.Departures() {
			departures = append(departures, d)
		}
		assert.Empty(t, departures)
	}
	for r, l := range logs {
		assert.Equal(t, 1, l.n(), "rank %d: degraded liveness logged %d times", r, l.n())
	}
}
