package comm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/bootstrap"
	"github.com/rdmacell/rdmacell/bootstrap/etcdserver"
)

// testTimeout bounds every wait of a test. It is far above what a working
// communicator needs, even on a loaded machine: it only turns a hang into
// a failure.
const testTimeout = 60 * time.Second

// testTTL keeps failure detection quick in tests of failures; the others
// use a longer lease, which a loaded machine does not let lapse.
const (
	testTTL   = time.Second
	steadyTTL = 5 * time.Second
)

func bounded(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

func quietLogger() *slog.Logger {
	if os.Getenv(EnvDebug) != "" {
		return nil
	}
	return slog.New(slog.DiscardHandler)
}

// startServer starts an embedded etcd that the test stops at its end.
func startServer(t testing.TB) *etcdserver.Server {
	t.Helper()
	// Temporary files of the server and of the ranks go to a directory of
	// the test's own, which must be empty again at its end.
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	s, err := etcdserver.Start(bounded(t), etcdserver.Config{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, s.Close(context.Background()))
		left, err := os.ReadDir(tmp)
		require.NoError(t, err)
		require.Empty(t, left, "temporary files left behind")
	})
	return s
}

var jobSeq atomic.Int64

// jobID returns a job id unique to this test run.
func jobID(t testing.TB) string {
	name := strings.NewReplacer("/", "-", " ", "_", "#", "-").Replace(t.Name())
	return fmt.Sprintf("%s-%d-%d", name, os.Getpid(), jobSeq.Add(1))
}

// testOptions are the options of rank r of an in-process test job that
// meets in srv's etcd.
func testOptions(srv *etcdserver.Server, job string, rank, world int, transport Transport) Options {
	o := localOptions(nil, job, rank, world, transport)
	o.Etcd = bootstrap.ClientConfig{Endpoints: srv.Endpoints()}
	return o
}

// localOptions are the options of rank r of an in-process test job that
// meets in store.
func localOptions(store bootstrap.Store, job string, rank, world int, transport Transport) Options {
	return Options{
		Rank:              rank,
		WorldSize:         world,
		Job:               job,
		Store:             store,
		RendezvousTimeout: 30 * time.Second,
		LeaseTTL:          steadyTTL,
		Transport:         transport,
		Paths:             2,
		CloseTimeout:      10 * time.Second,
		Logger:            quietLogger(),
	}
}

// startComms runs Init for every rank of a job in this process, meeting
// in a local store, and returns the communicators; the test's cleanup
// closes them and checks that goroutines and file descriptors are back to
// where they were.
func startComms(t testing.TB, world int, transport Transport, mod func(*Options)) []*Comm {
	t.Helper()
	baseG, baseFD := runtime.NumGoroutine(), openFDs(t)
	t.Cleanup(func() {
		checkGoroutines(t, baseG)
		checkFDs(t, baseFD)
	})
	store := bootstrap.NewLocalStore()
	t.Cleanup(func() { _ = store.Close() })
	job := jobID(t)
	return initAll(t, world, func(r int) Options { return localOptions(store, job, r, world, transport) }, mod)
}

// startJob is startComms meeting in an embedded etcd, for tests of what
// etcd does; it also returns the server.
func startJob(t testing.TB, world int, transport Transport, mod func(*Options)) (*etcdserver.Server, []*Comm) {
	t.Helper()
	baseG, baseFD := runtime.NumGoroutine(), openFDs(t)
	t.Cleanup(func() {
		checkGoroutines(t, baseG)
		checkFDs(t, baseFD)
	})
	srv := startServer(t)
	job := jobID(t)
	return srv, initAll(t, world, func(r int) Options { return testOptions(srv, job, r, world, transport) }, mod)
}

// initAll runs Init for every rank at once, with options(r) edited by mod.
func initAll(t testing.TB, world int, options func(int) Options, mod func(*Options)) []*Comm {
	t.Helper()
	comms := make([]*Comm, world)
	errs := make([]error, world)
	var wg sync.WaitGroup
	for r := range world {
		wg.Go(func() {
			o := options(r)
			if mod != nil {
				mod(&o)
			}
			comms[r], errs[r] = Init(bounded(t), o)
		})
	}
	wg.Wait()
	t.Cleanup(func() { closeAll(t, comms) })
	for r, err := range errs {
		require.NoError(t, err, "Init of rank %d", r)
	}
	return comms
}

// closeAll closes every communicator at once, as the ranks of a job do.
func closeAll(t testing.TB, comms []*Comm) {
	t.Helper()
	done := make(chan struct{})
	errs := make([]error, len(comms))
	go func() {
		var wg sync.WaitGroup
		for i, c := range comms {
			if c != nil {
				wg.Go(func() { errs[i] = c.Close() })
			}
		}
		wg.Wait()
		close(done)
	}()
	start := time.Now()
	defer func() { t.Logf("closed %d communicators in %v", len(comms), time.Since(start)) }()
	select {
	case <-done:
	case <-time.After(testTimeout):
		t.Fatalf("Close did not return within %v", testTimeout)
	}
	for i, err := range errs {
		require.NoError(t, err, "Close of rank %d", i)
	}
}

// onEach runs f for every rank concurrently and fails the test with
// every rank's error: the first rank to fail is often not the one that
// broke.
func onEach(t testing.TB, comms []*Comm, f func(c *Comm) error) {
	t.Helper()
	errs := make([]error, len(comms))
	var wg sync.WaitGroup
	for i, c := range comms {
		wg.Go(func() {
			if err := f(c); err != nil {
				errs[i] = fmt.Errorf("rank %d: %w", i, err)
			}
		})
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
}

// checkGoroutines waits until no more goroutines run than before, and
// fails with their stacks if some stay.
func checkGoroutines(t testing.TB, before int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		t.Fatalf("%d goroutines left behind (%d before):\n%s", n-before, before, buf)
	}
}

// openFDs counts this process's open file descriptors.
func openFDs(t testing.TB) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count open files: %v", err)
	}
	return len(ents)
}

// checkFDs waits until the open file descriptors are back to before:
// memory files, sockets and shared segments were all released.
func checkFDs(t testing.TB, before int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	n := openFDs(t)
	for n > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		n = openFDs(t)
	}
	require.LessOrEqual(t, n, before, "file descriptors left open")
}

// fill writes the pattern of seed into b.
func fill(b []byte, seed uint64) {
	x := seed*0x9E3779B97F4A7C15 + 1
	i := 0
	for ; i+8 <= len(b); i += 8 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		binary.LittleEndian.PutUint64(b[i:], x)
	}
	for ; i < len(b); i++ {
		b[i] = byte(seed) ^ byte(i)
	}
}

// pattern returns n bytes of the pattern of seed.
func pattern(n int, seed uint64) []byte {
	b := make([]byte, n)
	fill(b, seed)
	return b
}

// firstDiff returns the first offset where a and b differ, or -1.
func firstDiff(a, b []byte) int {
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}
