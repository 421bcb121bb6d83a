package driver

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/verbs"
	"github.com/rdmacell/rdmacell/verbs/fault"
	"github.com/rdmacell/rdmacell/verbs/shm"
	"github.com/rdmacell/rdmacell/verbs/tcp"
)

// testTimeout bounds every wait of the tests. It is far above what a
// working connection needs, even on a loaded machine: it only turns a
// hang into a failure.
const testTimeout = 60 * time.Second

var testSecret = []byte("rdmacell driver test secret")

type provider struct {
	name string
	open func() (verbs.Device, error)
}

var providers = []provider{
	{"shm", func() (verbs.Device, error) { return shm.Open(shm.Options{}) }},
	{"tcp", func() (verbs.Device, error) { return tcp.Open(tcp.Options{Secret: testSecret, Logger: quiet}) }},
}

// quiet drops the log lines of connections the tests break on purpose.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// end is one side of an in-process connection: a device of the provider
// wrapped by the fault injector, a PD, the connection and its memory.
type end struct {
	t    testing.TB
	name string
	dev  verbs.Device // the fault wrapper, unless opened plain
	pd   verbs.PD
	conn *Conn
	mrs  []verbs.MR
	mems []*verbs.Memory
}

// pair is a connection between two devices of one process.
type pair struct {
	a, b *end
}

// testConfig is the base configuration of the tests.
func testConfig() Config {
	return Config{Paths: 4, ResetTimeout: 10 * time.Second, Logger: quiet}
}

// pipe returns two exchangers that swap what they are given, and
// confirm as comm's do.
func pipe() (Exchanger, Exchanger) { return slowPipe(0) }

// slowPipe is pipe, but b takes a's setup only after delay, as an end
// whose exchange runs on a loaded machine does.
func slowPipe(delay time.Duration) (a, b Confirmer) {
	ab, ba := make(chan []byte, 1), make(chan []byte, 1)
	upAB, upBA := make(chan struct{}, 1), make(chan struct{}, 1)
	return &pipeEnd{out: ab, in: ba, upOut: upAB, upIn: upBA},
		&pipeEnd{out: ba, in: ab, upOut: upBA, upIn: upAB, delay: delay}
}

type pipeEnd struct {
	out, in     chan []byte
	upOut, upIn chan struct{}
	delay       time.Duration
}

func (p *pipeEnd) Exchange(ctx context.Context, local []byte) ([]byte, error) {
	p.out <- local
	time.Sleep(p.delay)
	select {
	case r := <-p.in:
		return r, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (p *pipeEnd) Confirm(ctx context.Context) error {
	p.upOut <- struct{}{}
	select {
	case <-p.upIn:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func openEnd(t testing.TB, p provider, name string) *end {
	return openEndWith(t, p, name, true)
}

// openEndWith opens a device of the provider, wrapped by the fault
// injector if wrap.
func openEndWith(t testing.TB, p provider, name string, wrap bool) *end {
	t.Helper()
	d, err := p.open()
	require.NoError(t, err, "open %s device", p.name)
	if wrap {
		d = fault.Wrap(d)
	}
	e := &end{t: t, name: name, dev: d}
	e.pd, err = e.dev.AllocPD()
	require.NoError(t, err)
	return e
}

// newPair connects two ends with cfg (Peer is set per end). Cleanup
// closes both connections, then the devices, then frees the memory, and
// checks that no goroutine is left behind.
func newPair(t testing.TB, p provider, cfg Config) *pair {
	return newPairWith(t, p, cfg, true)
}

// newPairWith is newPair over devices wrapped by the fault injector only
// if wrap.
func newPairWith(t testing.TB, p provider, cfg Config, wrap bool) *pair {
	t.Helper()
	before := runtime.NumGoroutine()
	return dialPair(t, before, openEndWith(t, p, "A", wrap), openEndWith(t, p, "B", wrap), cfg)
}

// dialPair connects ends a and b with cfg. Cleanup closes both
// connections, then the devices, then frees the memory, and checks that
// no more goroutines run than before.
func dialPair(t testing.TB, before int, a, b *end, cfg Config) *pair {
	t.Helper()
	return dialPairEach(t, before, a, b, cfg, cfg)
}

// dialPairEach is dialPair with a configuration for each end.
func dialPairEach(t testing.TB, before int, a, b *end, cfgA, cfgB Config) *pair {
	t.Helper()
	pr := &pair{a: a, b: b}
	t.Cleanup(func() {
		for _, e := range []*end{pr.a, pr.b} {
			if e.conn != nil {
				require.NoError(t, closeBounded(e.conn), "close connection of %s", e.name)
			}
		}
		for _, e := range []*end{pr.a, pr.b} {
			for _, mr := range e.mrs {
				require.NoError(t, mr.Close())
			}
			require.NoError(t, e.dev.Close())
			for _, m := range e.mems {
				require.NoError(t, m.Free())
			}
		}
		checkGoroutines(t, before)
	})
	xa, xb := pipe()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var wg sync.WaitGroup
	var errA, errB error
	for _, side := range []struct {
		e    *end
		peer string
		x    Exchanger
		err  *error
		cfg  Config
	}{{pr.a, "B", xa, &errA, cfgA}, {pr.b, "A", xb, &errB, cfgB}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := side.cfg
			c.Peer, c.Device, c.PD = side.peer, side.e.dev, side.e.pd
			side.e.conn, *side.err = Dial(ctx, c, side.x)
		}()
	}
	wg.Wait()
	require.NoError(t, errA, "dial from A")
	require.NoError(t, errB, "dial from B")
	return pr
}

// closeBounded closes c, failing instead of hanging.
func closeBounded(c *Conn) error {
	done := make(chan error, 1)
	go func() { done <- c.Close() }()
	select {
	case err := <-done:
		return err
	case <-time.After(testTimeout):
		return fmt.Errorf("Close of the connection to %s did not return within %v", c.Peer(), testTimeout)
	}
}

// checkGoroutines waits until no more goroutines run than before, and
// fails with their stacks if some stay.
func checkGoroutines(t testing.TB, before int) {
	t.Helper()
	deadline := time.Now().Add(testTimeout / 4)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		t.Fatalf("%d goroutines left behind (%d before):\n%s", n-before, before, strings.TrimSpace(string(buf)))
	}
}

// region allocates n bytes off the heap and registers them for local and
// remote write.
func (e *end) region(n int) verbs.MR {
	e.t.Helper()
	m, err := verbs.Alloc(n)
	require.NoError(e.t, err, "alloc %d bytes", n)
	e.mems = append(e.mems, m)
	mr, err := e.pd.RegMR(m.Bytes(), verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	require.NoError(e.t, err)
	e.mrs = append(e.mrs, mr)
	return mr
}

// qp returns the fault wrapper of path i's QP.
func (e *end) qp(i int) *fault.QP { return e.conn.paths[i].qp.(*fault.QP) }

// fill writes the pattern of seed into b, eight bytes at a time.
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

// firstDiff returns the first offset where a and b differ, or -1.
func firstDiff(a, b []byte) int {
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	const chunk = 1 << 16
	for off := 0; off < len(a); off += chunk {
		end := min(off+chunk, len(a))
		if string(a[off:end]) != string(b[off:end]) {
			for i := off; i < end; i++ {
				if a[i] != b[i] {
					return i
				}
			}
		}
	}
	return -1
}

// bounded returns a context that ends after testTimeout.
func bounded(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}
