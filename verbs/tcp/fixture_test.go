package tcp

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/rdmacell/rdmacell/internal/syncbuf"
	"github.com/rdmacell/rdmacell/verbs"
	"github.com/rdmacell/rdmacell/verbs/internal/soft"
	"github.com/stretchr/testify/require"
)

// waitLimit bounds every wait of these tests; it only turns a hang into a
// failure and never decides a result.
const waitLimit = 10 * time.Second

var secret = []byte("0123456789abcdef-test-secret")

// env owns the devices and memory of one test. Its cleanup closes the
// devices before it frees the memory, so no receiver writes into an
// unmapped region.
type env struct {
	t    testing.TB
	devs []*Device
	mems []*verbs.Memory
}

func newEnv(t testing.TB) *env {
	e := &env{t: t}
	t.Cleanup(func() {
		for _, d := range e.devs {
			require.NoError(t, d.Close())
		}
		for _, m := range e.mems {
			require.NoError(t, m.Free())
		}
	})
	return e
}

// device opens a device with the test secret unless opts has one, logging
// into the returned buffer.
func (e *env) device(opts Options) (*Device, *PD, *syncbuf.Buffer) {
	e.t.Helper()
	if opts.Secret == nil {
		opts.Secret = secret
	}
	lb := &syncbuf.Buffer{}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(lb, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	d, err := Open(opts)
	require.NoError(e.t, err)
	e.devs = append(e.devs, d)
	pd, err := d.AllocPD()
	require.NoError(e.t, err)
	return d, pd.(*PD), lb
}

func (e *env) region(pd *PD, size int, access verbs.Access) verbs.MR {
	e.t.Helper()
	m, err := verbs.Alloc(size)
	require.NoError(e.t, err)
	e.mems = append(e.mems, m)
	mr, err := pd.RegMR(m.Bytes(), access)
	require.NoError(e.t, err)
	return mr
}

// tqp is a QP with its own CQs.
type tqp struct {
	*QP
	send, recv *soft.CQ
}

func (e *env) qp(pd *PD, cfg verbs.QPConfig) *tqp {
	e.t.Helper()
	s, err := pd.d.CreateCQ(1024)
	require.NoError(e.t, err)
	r, err := pd.d.CreateCQ(1024)
	require.NoError(e.t, err)
	cfg.SendCQ, cfg.RecvCQ = s, r
	q, err := pd.CreateQP(cfg)
	require.NoError(e.t, err)
	return &tqp{QP: q.(*QP), send: s.(*soft.CQ), recv: r.(*soft.CQ)}
}

// connect takes a and b from RESET or INIT to RTS, towards each other.
func connect(t testing.TB, a, b *tqp) {
	t.Helper()
	for _, q := range []*tqp{a, b} {
		if q.State() == verbs.StateReset {
			require.NoError(t, q.Modify(verbs.StateInit, nil))
		}
	}
	ea, eb := a.Endpoint(), b.Endpoint()
	require.NoError(t, a.Modify(verbs.StateRTR, &eb))
	require.NoError(t, b.Modify(verbs.StateRTR, &ea))
	require.NoError(t, a.Modify(verbs.StateRTS, nil))
	require.NoError(t, b.Modify(verbs.StateRTS, nil))
}

// pair opens two devices and connects a QP with cfg on each.
func (e *env) pair(cfg verbs.QPConfig) (a, b *tqp, pa, pb *PD) {
	e.t.Helper()
	_, pa, _ = e.device(Options{})
	_, pb, _ = e.device(Options{})
	a, b = e.qp(pa, cfg), e.qp(pb, cfg)
	connect(e.t, a, b)
	return a, b, pa, pb
}

func waitWCs(t testing.TB, cq verbs.CQ, n int) []verbs.WC {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	out := make([]verbs.WC, 0, n)
	buf := make([]verbs.WC, n)
	for len(out) < n {
		k, err := cq.Wait(ctx, buf[:n-len(out)])
		require.NoError(t, err, "waiting for %d completions, have %+v", n, out)
		out = append(out, buf[:k]...)
	}
	return out
}

// waitState waits until q is in state st.
func waitState(t testing.TB, q *QP, st verbs.QPState) {
	t.Helper()
	deadline := time.After(waitLimit)
	for {
		q.mu.Lock()
		cur, ch := q.state, q.changed
		q.mu.Unlock()
		if cur == st {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			require.FailNowf(t, "state", "qp %d in %s, want %s", q.qpn, cur, st)
		}
	}
}

// waitFor polls cond until it holds, for conditions with no channel to
// wait on.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			require.FailNow(t, "timed out waiting for "+what)
		}
		time.Sleep(time.Millisecond)
	}
}

func sgeOf(mr verbs.MR, off, n int) verbs.SGE {
	return verbs.SGE{Addr: mr.Addr() + uint64(off), Length: uint32(n), LKey: mr.LKey()}
}

func writeWR(id uint64, op verbs.Opcode, src verbs.MR, soff, n int, dst verbs.MR, doff int) *verbs.SendWR {
	wr := &verbs.SendWR{ID: id, Opcode: op, Flags: verbs.Signaled, RemoteAddr: dst.Addr() + uint64(doff), RKey: dst.RKey()}
	if n > 0 {
		wr.SGL = []verbs.SGE{sgeOf(src, soff, n)}
	}
	return wr
}

func pattern(b []byte, seed byte) {
	for i := range b {
		b[i] = byte(i*31) ^ seed
	}
}

func setAll(b []byte, c byte) {
	for i := range b {
		b[i] = c
	}
}

func requireAll(t testing.TB, b []byte, c byte, what string) {
	t.Helper()
	for i := range b {
		if b[i] != c {
			require.FailNowf(t, "memory touched", "%s: byte %d is %#x, want %#x", what, i, b[i], c)
		}
	}
}

// drain reads and discards r in the background, returning what it read
// once r ends.
func drain(r io.Reader) <-chan []byte {
	ch := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(r)
		ch <- b
	}()
	return ch
}
