package fault_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rdmacell/rdmacell/verbs"
	"github.com/rdmacell/rdmacell/verbs/fault"
	"github.com/stretchr/testify/require"
)

// waitTimeout bounds every wait for something a test expects; it only
// turns a hang into a failure.
const waitTimeout = 10 * time.Second

// fixture is a wrapped QP a, the requester, connected to a wrapped QP b on
// another device, with a source region beside a and a target beside b.
type fixture struct {
	t            *testing.T
	devs         [2]*fault.Device
	a, b         *fault.QP
	asend, arecv verbs.CQ
	bsend, brecv verbs.CQ
	src, dst     verbs.MR
	cfg          verbs.QPConfig
	mems         []*verbs.Memory
}

// newFixture opens two wrapped devices of the provider faults are tested
// over and connects a pair of QPs created with cfg.
func newFixture(t *testing.T, cfg verbs.QPConfig) *fixture {
	t.Helper()
	if cfg.Timeout == 0 && cfg.RetryCount == 0 {
		// Patient QPs: a loaded machine must not turn a slow transfer
		// into a transport timeout in tests that are not about one.
		cfg.RetryCount = 7
	}
	f := &fixture{t: t, cfg: cfg}
	t.Cleanup(f.close)
	var pds [2]verbs.PD
	for i := range f.devs {
		d, err := openTCP()
		require.NoError(t, err)
		f.devs[i] = fault.Wrap(d)
		pds[i], err = f.devs[i].AllocPD()
		require.NoError(t, err)
	}
	f.src = f.region(pds[0], 1<<20)
	f.dst = f.region(pds[1], 1<<20)
	f.a, f.asend, f.arecv = f.qp(0, pds[0])
	f.b, f.bsend, f.brecv = f.qp(1, pds[1])
	f.connect()
	return f
}

func (f *fixture) region(pd verbs.PD, n int) verbs.MR {
	m, err := verbs.Alloc(n)
	require.NoError(f.t, err)
	f.mems = append(f.mems, m)
	mr, err := pd.RegMR(m.Bytes(), verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	require.NoError(f.t, err)
	return mr
}

func (f *fixture) qp(side int, pd verbs.PD) (*fault.QP, verbs.CQ, verbs.CQ) {
	send, err := f.devs[side].CreateCQ(64)
	require.NoError(f.t, err)
	recv, err := f.devs[side].CreateCQ(64)
	require.NoError(f.t, err)
	cfg := f.cfg
	cfg.SendCQ, cfg.RecvCQ = send, recv
	q, err := pd.CreateQP(cfg)
	require.NoError(f.t, err)
	return q.(*fault.QP), send, recv
}

// connect takes both QPs from any state to RTS, connected to each other.
func (f *fixture) connect() {
	f.t.Helper()
	for _, q := range []*fault.QP{f.a, f.b} {
		if q.State() != verbs.StateReset {
			require.NoError(f.t, q.Modify(verbs.StateErr, nil))
			require.NoError(f.t, q.Modify(verbs.StateReset, nil))
		}
		require.NoError(f.t, q.Modify(verbs.StateInit, nil))
	}
	ea, eb := f.a.Endpoint(), f.b.Endpoint()
	for _, st := range []verbs.QPState{verbs.StateRTR, verbs.StateRTS} {
		var ra, rb *verbs.Endpoint
		if st == verbs.StateRTR {
			ra, rb = &eb, &ea
		}
		errb := make(chan error, 1)
		go func() { errb <- f.b.Modify(st, rb) }()
		require.NoError(f.t, f.a.Modify(st, ra))
		select {
		case err := <-errb:
			require.NoError(f.t, err)
		case <-time.After(waitTimeout):
			f.t.Fatalf("QP %d did not reach %v within %v", f.b.Num(), st, waitTimeout)
		}
	}
}

func (f *fixture) close() {
	for _, d := range f.devs {
		if d != nil {
			require.NoError(f.t, d.Close())
		}
	}
	for _, m := range f.mems {
		require.NoError(f.t, m.Free())
	}
}

// write is a signaled WRITE of n bytes from src at off to dst at off.
func (f *fixture) write(id uint64, off, n int) *verbs.SendWR {
	return &verbs.SendWR{ID: id, Opcode: verbs.OpWrite, Flags: verbs.Signaled,
		SGL:        []verbs.SGE{{Addr: f.src.Addr() + uint64(off), Length: uint32(n), LKey: f.src.LKey()}},
		RemoteAddr: f.dst.Addr() + uint64(off), RKey: f.dst.RKey()}
}

// writeImm is write as a WRITE_WITH_IMM carrying imm.
func (f *fixture) writeImm(id uint64, off, n int, imm uint32) *verbs.SendWR {
	wr := f.write(id, off, n)
	wr.Opcode, wr.Imm = verbs.OpWriteImm, imm
	return wr
}

func (f *fixture) post(wrs ...*verbs.SendWR) {
	f.t.Helper()
	for i := 0; i+1 < len(wrs); i++ {
		wrs[i].Next = wrs[i+1]
	}
	bad, err := f.a.PostSend(wrs[0])
	require.NoError(f.t, err)
	require.Nil(f.t, bad)
}

func (f *fixture) postRecv(q verbs.QP, ids ...uint64) {
	f.t.Helper()
	for _, id := range ids {
		_, err := q.PostRecv(&verbs.RecvWR{ID: id})
		require.NoError(f.t, err)
	}
}

// collect waits for exactly n completions on cq until ctx ends.
func collect(ctx context.Context, cq verbs.CQ, n int) ([]verbs.WC, error) {
	out := make([]verbs.WC, 0, n)
	buf := make([]verbs.WC, n)
	for len(out) < n {
		k, err := cq.Wait(ctx, buf[:n-len(out)])
		if err != nil {
			return out, fmt.Errorf("got %d of %d completions %+v: %w", len(out), n, out, err)
		}
		out = append(out, buf[:k]...)
	}
	return out, nil
}

// waitWCs waits for exactly n completions on cq.
func waitWCs(t *testing.T, cq verbs.CQ, n int, what string) []verbs.WC {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	wcs, err := collect(ctx, cq, n)
	require.NoError(t, err, what)
	return wcs
}

// requireNoWC fails if cq holds a completion now.
func requireNoWC(t *testing.T, cq verbs.CQ, what string) {
	t.Helper()
	var wc [4]verbs.WC
	n := cq.Poll(wc[:])
	require.Zero(t, n, "unexpected completions on %s: %+v", what, wc[:n])
}

// requireWC checks a completion's id and status.
func requireWC(t *testing.T, wc verbs.WC, id uint64, st verbs.Status) {
	t.Helper()
	require.Equal(t, id, wc.ID, "completion %+v", wc)
	require.Equal(t, st, wc.Status, "status of wr %d: %+v", id, wc)
}

func set(b []byte, c byte) {
	for i := range b {
		b[i] = c
	}
}

// requireAll checks that every byte of b is c.
func requireAll(t *testing.T, b []byte, c byte, what string) {
	t.Helper()
	for i := range b {
		if b[i] != c {
			require.FailNowf(t, "unexpected bytes", "%s: byte %d of %d is %#02x, want %#02x", what, i, len(b), b[i], c)
		}
	}
}
