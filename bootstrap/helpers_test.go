package bootstrap

import (
	"bufio"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/bootstrap/etcdserver"
)

// testTimeout bounds every wait of a test, so that a bug fails the test
// rather than hanging it.
const testTimeout = 20 * time.Second

// testTTL keeps failure detection quick in tests.
const testTTL = time.Second

// Environment of a rank run as a child process of the test binary.
const (
	envChild     = "BOOTSTRAP_TEST_CHILD"
	envEndpoints = "BOOTSTRAP_TEST_ENDPOINTS"
	envStore     = "BOOTSTRAP_TEST_STORE"  // a served store's address
	envSecret    = "BOOTSTRAP_TEST_SECRET" // its secret, in hex
	envJob       = "BOOTSTRAP_TEST_JOB"
	envRank      = "BOOTSTRAP_TEST_RANK"
	envWorld     = "BOOTSTRAP_TEST_WORLD"
)

func TestMain(m *testing.M) {
	if os.Getenv(envChild) != "" {
		os.Exit(childMain())
	}
	os.Exit(m.Run())
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// startServer starts an embedded etcd that the test stops at its end.
func startServer(t *testing.T) *etcdserver.Server {
	t.Helper()
	ctx := testContext(t)
	s, err := etcdserver.Start(ctx, etcdserver.Config{Logger: quietLogger()})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close(context.Background())) })
	return s
}

// clientOf is a configuration that reaches srv from this machine.
func clientOf(srv *etcdserver.Server) ClientConfig { return ClientConfig{Endpoints: srv.Endpoints()} }

// rankConfig is the configuration of one rank of a test job.
func rankConfig(cc ClientConfig, job string, rank, world int) Config {
	return Config{
		Client:       cc,
		Job:          job,
		Rank:         rank,
		WorldSize:    world,
		Endpoints:    []string{fmt.Sprintf("10.0.0.%d:7000", rank)},
		Capabilities: []string{"shm", "tcp"},
		Info:         []byte(fmt.Sprintf(`{"rank":%d}`, rank)),
		LeaseTTL:     testTTL,
		Logger:       quietLogger(),
	}
}

// join joins a rank and closes it at the end of the test.
func join(t *testing.T, cfg Config) *Job {
	t.Helper()
	j, err := Join(testContext(t), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = j.Close(context.Background()) })
	return j
}

// exchangeRounds is how often exchangeAll passes the barrier at its end.
const exchangeRounds = 3

// exchangeAll is what every rank of a test job does: wait for the world,
// publish two paths' worth of connection info for every peer, read the
// peers' info for itself, and pass a barrier several times.
func exchangeAll(ctx context.Context, j *Job) error {
	members, err := j.WaitWorld(ctx)
	if err != nil {
		return err
	}
	if len(members) != j.WorldSize() {
		return fmt.Errorf("rank %d: world of %d members, want %d", j.Rank(), len(members), j.WorldSize())
	}
	for r, m := range members {
		if m.Rank != r || m.PID == 0 || m.Host == "" || len(m.Capabilities) == 0 {
			return fmt.Errorf("rank %d: member %d is %+v", j.Rank(), r, m)
		}
	}
	for peer := range j.WorldSize() {
		for path := range 2 {
			if err := j.Put(ctx, peer, qpKey(path), []byte(qpInfo(j.Rank(), peer, path))); err != nil {
				return err
			}
		}
	}
	for peer := range j.WorldSize() {
		for path := range 2 {
			got, err := j.Get(ctx, peer, qpKey(path))
			if err != nil {
				return err
			}
			if want := qpInfo(peer, j.Rank(), path); string(got) != want {
				return fmt.Errorf("rank %d: from rank %d path %d got %q, want %q", j.Rank(), peer, path, got, want)
			}
		}
	}
	for range exchangeRounds {
		if err := j.Barrier(ctx, "step"); err != nil {
			return err
		}
	}
	return nil
}

func qpKey(path int) string { return "qp/" + strconv.Itoa(path) }

func qpInfo(from, to, path int) string { return fmt.Sprintf("qpn %d->%d path %d", from, to, path) }

// childMain runs one rank in a child process: it joins, exchanges with the
// others, prints "ready <secret>", reports every departure it sees as
// "departed <rank> dead|clean <host> <pid>", and closes cleanly on "close"
// (or end of input) from the parent.
func childMain() int {
	rank, err1 := strconv.Atoi(os.Getenv(envRank))
	world, err2 := strconv.Atoi(os.Getenv(envWorld))
	if err := errors.Join(err1, err2); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	cfg := rankConfig(ClientConfig{Endpoints: strings.Split(os.Getenv(envEndpoints), ",")}, os.Getenv(envJob), rank, world)
	if addr := os.Getenv(envStore); addr != "" {
		secret, err := hex.DecodeString(os.Getenv(envSecret))
		if err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			return 2
		}
		cfg.StoreAddr, cfg.Secret = addr, secret
	}
	j, err := Join(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	if err := exchangeAll(ctx, j); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	var out sync.Mutex
	say := func(format string, args ...any) {
		out.Lock()
		defer out.Unlock()
		fmt.Printf(format+"\n", args...)
	}
	say("ready %s", hex.EncodeToString(j.Secret()))

	reported := make(chan struct{})
	go func() {
		defer close(reported)
		for err := range j.Departures() {
			say("%s", departureLine(err))
		}
	}()
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() && in.Text() != "close" {
		// Anything else from the parent is ignored.
	}
	if err := j.Close(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	<-reported
	return 0
}

// departureLine renders a departure for the parent to parse.
func departureLine(err error) string {
	var dead *RankDeadError
	var exited *RankExitedError
	switch {
	case errors.As(err, &dead):
		return fmt.Sprintf("departed %d dead %s %d", dead.Rank, dead.Host, dead.PID)
	case errors.As(err, &exited):
		return fmt.Sprintf("departed %d clean %s %d", exited.Rank, exited.Host, exited.PID)
	default:
		return "departed ? " + err.Error()
	}
}

// lines delivers the lines of r on a channel, closed at end of input.
func lines(r io.Reader) <-chan string {
	ch := make(chan string, 16)
	go func() {
		defer close(ch)
		s := bufio.NewScanner(r)
		for s.Scan() {
			ch <- s.Text()
		}
	}()
	return ch
}

// nextDeparture waits for the next departure reported by j.
func nextDeparture(ctx context.Context, t *testing.T, j *Job) error {
	t.Helper()
	select {
	case err, ok := <-j.Departures():
		require.True(t, ok, "departures closed")
		return err
	case <-ctx.Done():
		require.FailNow(t, "no departure reported", "rank %d: %v", j.Rank(), ctx.Err())
		return nil
	}
}

// meeting is where the ranks of a test job meet: an embedded etcd, each
// rank with its own client; one local store; or a served store, each rank
// with its own connection, given the job secret.
type meeting struct {
	srv   *etcdserver.Server
	store Store
	net   *StoreServer
	t     *testing.T
}

// testStoreSecret is the secret of the served stores of tests.
var testStoreSecret = []byte("a test job's secret of 32 bytes!")

// eachStore runs fn once over etcd, once over a local store and once over
// a served store.
func eachStore(t *testing.T, fn func(*testing.T, meeting)) {
	t.Run("etcd", func(t *testing.T) { fn(t, meeting{srv: startServer(t), t: t}) })
	t.Run("local", func(t *testing.T) {
		s := NewLocalStore()
		t.Cleanup(func() { _ = s.Close() })
		fn(t, meeting{store: s, t: t})
	})
	t.Run("net", func(t *testing.T) { fn(t, meeting{net: startStoreServer(t), t: t}) })
}

// startStoreServer serves a store on loopback until the test ends.
func startStoreServer(t *testing.T) *StoreServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv, err := ServeStore(ln, testStoreSecret, quietLogger())
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		require.NoError(t, srv.Close(ctx))
	})
	return srv
}

// dial opens a connection of its own to the served store.
func (m meeting) dial() Store {
	m.t.Helper()
	s, err := DialStore(testContext(m.t), m.net.Addr().String(), testStoreSecret)
	require.NoError(m.t, err)
	m.t.Cleanup(func() { _ = s.Close() })
	return s
}

// config is the configuration of one rank of a test job.
func (m meeting) config(job string, rank, world int) Config {
	var cc ClientConfig
	if m.srv != nil {
		cc = clientOf(m.srv)
	}
	c := rankConfig(cc, job, rank, world)
	c.Store = m.store
	if m.net != nil {
		// As a job started by a scheduler does: the rank connects itself,
		// with the secret it was given.
		c.StoreAddr, c.Secret = m.net.Addr().String(), testStoreSecret
	}
	return c
}

// list returns the keys under prefix.
func (m meeting) list(t *testing.T, prefix string) []KeyValue {
	kvs, _ := m.listing(t, prefix)
	return kvs
}

// revision is the store's revision now.
func (m meeting) revision(t *testing.T) int64 {
	_, rev := m.listing(t, "/")
	return rev
}

func (m meeting) listing(t *testing.T, prefix string) ([]KeyValue, int64) {
	t.Helper()
	ctx := testContext(t)
	s := m.store
	if m.net != nil {
		s = m.dial()
	} else if s == nil {
		var err error
		s, err = NewEtcdStore(ctx, clientOf(m.srv))
		require.NoError(t, err)
		defer s.Close()
	}
	kvs, rev, err := s.List(ctx, prefix)
	require.NoError(t, err)
	return kvs, rev
}
