package etcdserver

import (
	"context"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/bootstrap"
)

// testTimeout bounds every wait of a test, so that a bug fails the test
// rather than hanging it.
const testTimeout = 20 * time.Second

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// requireServes checks that a client of srv's endpoints can write a key
// and read it back.
func requireServes(t *testing.T, srv *Server) {
	t.Helper()
	ctx := testContext(t)
	st, err := bootstrap.NewEtcdStore(ctx, bootstrap.ClientConfig{Endpoints: srv.Endpoints()})
	require.NoError(t, err)
	defer st.Close()
	require.NoError(t, st.Put(ctx, "/test/"+t.Name(), []byte("served"), bootstrap.NoLease))
	kvs, _, err := st.List(ctx, "/test/"+t.Name())
	require.NoError(t, err)
	require.Len(t, kvs, 1)
	assert.Equal(t, "served", string(kvs[0].Value))
}

func TestServerStartsAndRemovesItsDataDir(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	ctx := testContext(t)

	start := time.Now()
	srv, err := Start(ctx, Config{Logger: quietLogger()})
	require.NoError(t, err)
	t.Logf("embedded etcd ready in %v at %v", time.Since(start), srv.Endpoints())

	require.Len(t, srv.Endpoints(), 1)
	assert.True(t, strings.HasPrefix(srv.Endpoints()[0], "http://127.0.0.1:"), srv.Endpoints()[0])
	assert.NotContains(t, srv.Endpoints()[0], ":0", "endpoint must carry the bound port")
	dirs, err := os.ReadDir(tmp)
	require.NoError(t, err)
	require.Len(t, dirs, 1, "one data dir while running")

	requireServes(t, srv)

	require.NoError(t, srv.Close(ctx))
	require.NoError(t, srv.Close(ctx), "Close is idempotent")
	dirs, err = os.ReadDir(tmp)
	require.NoError(t, err)
	assert.Empty(t, dirs, "data dir left behind")
}

func TestServerGivenAddresses(t *testing.T) {
	ctx := testContext(t)
	dataDir := t.TempDir()
	srv, err := Start(ctx, Config{
		ClientAddr: freeAddr(t),
		PeerAddr:   "127.0.0.1:0",
		DataDir:    dataDir,
		Logger:     quietLogger(),
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close(context.Background()) })

	requireServes(t, srv)
	require.NoError(t, srv.Close(ctx))
	_, err = os.Stat(dataDir)
	assert.NoError(t, err, "a data dir the caller gave is the caller's to remove")
}

func TestServerAllInterfaces(t *testing.T) {
	ctx := testContext(t)
	srv, err := Start(ctx, Config{ClientAddr: "0.0.0.0:0", Logger: quietLogger()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close(context.Background()) })
	assert.True(t, strings.HasPrefix(srv.Endpoints()[0], "http://127.0.0.1:"), srv.Endpoints()[0])
	requireServes(t, srv)
}

func TestServerBadConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no port", Config{ClientAddr: "127.0.0.1"}, `ClientAddr "127.0.0.1": want host:port`},
		{"host name", Config{PeerAddr: "example.com:2380"}, "must be an IP address"},
		{"tls without key", Config{TLS: &TLSFiles{CertFile: "c.pem"}}, "needs CertFile and KeyFile"},
		{"unix with address", Config{Unix: true, ClientAddr: "127.0.0.1:0"}, "a server on a unix socket has no address"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.Logger = quietLogger()
			t.Setenv("TMPDIR", t.TempDir())
			_, err := Start(testContext(t), tt.cfg)
			require.ErrorContains(t, err, tt.want)
			dirs, err := os.ReadDir(os.Getenv("TMPDIR"))
			require.NoError(t, err)
			assert.Empty(t, dirs, "data dir left behind")
		})
	}
}

// freeAddr returns a loopback address no one listened on a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}
