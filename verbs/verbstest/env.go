package verbstest

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/rdmacell/rdmacell/verbs"
	"github.com/stretchr/testify/require"
)

// waitTimeout bounds every wait for something the suite expects to happen:
// a completion, a call that may block in a provider, a peer's answer. It is
// far above what a working provider needs, so that it never decides a
// result on a loaded machine; it only turns a hang into a failure.
const waitTimeout = 10 * time.Second

// env is the in-process fixture of one test: two devices of the provider
// (side 0 is the requester's, side 1 the responder's), a PD on each, and the
// memory the test allocated. Cleanup closes the devices and then frees the
// memory, so no engine can touch memory after it is unmapped.
type env struct {
	t    *testing.T
	p    Provider
	devs [2]verbs.Device
	pds  [2]verbs.PD
	mems []*verbs.Memory
}

func newEnv(t *testing.T, p Provider) *env {
	t.Helper()
	e := &env{t: t, p: p}
	t.Cleanup(e.close)
	for i := range e.devs {
		d, err := bounded(p.Name+" Open", p.Open)
		require.NoError(t, err, "open %s device %d", p.Name, i)
		e.devs[i] = d
		pd, err := d.AllocPD()
		require.NoError(t, err, "alloc PD on %s device %d", p.Name, i)
		e.pds[i] = pd
	}
	return e
}

func (e *env) close() {
	clean := true
	for i, d := range e.devs {
		if d == nil {
			continue
		}
		if _, err := bounded("device Close", func() (struct{}, error) { return struct{}{}, d.Close() }); err != nil {
			e.t.Errorf("close %s device %d: %v", e.p.Name, i, err)
			clean = false
		}
	}
	if !clean {
		// A device that did not close may still be placing data: leave its
		// memory mapped rather than let it fault.
		return
	}
	for _, m := range e.mems {
		if err := m.Free(); err != nil {
			e.t.Errorf("free %d bytes: %v", m.Len(), err)
		}
	}
}

// region allocates size bytes on side and registers them with access.
func (e *env) region(side, size int, access verbs.Access) verbs.MR {
	e.t.Helper()
	m, err := verbs.Alloc(size)
	require.NoError(e.t, err, "alloc %d bytes", size)
	e.mems = append(e.mems, m)
	mr, err := e.pds[side].RegMR(m.Bytes(), access)
	require.NoError(e.t, err, "register %d bytes with access %#x on side %d", size, access, side)
	return mr
}

// remoteRW is the access of regions peers write into.
const remoteRW = verbs.AccessLocalWrite | verbs.AccessRemoteWrite

// qp is a queue pair with its own send and receive CQs, so that a test can
// tell the completions of both queues apart.
type qp struct {
	verbs.QP
	send, recv verbs.CQ
}

// patientRetries is the retry count of QPs whose test is not about
// timeouts. Without retries a QP gives up after one Timeout of silence,
// which a loaded machine can cause in a large transfer; ibverbs users
// commonly set 7.
const patientRetries = 7

// qp creates a queue pair on side; cfg's CQs are filled in, and a QP
// configured with neither Timeout nor RetryCount gets patientRetries.
func (e *env) qp(side int, cfg verbs.QPConfig) *qp {
	e.t.Helper()
	if cfg.Timeout == 0 && cfg.RetryCount == 0 {
		cfg.RetryCount = patientRetries
	}
	q := &qp{}
	var err error
	q.send, err = e.devs[side].CreateCQ(256)
	require.NoError(e.t, err, "create send CQ on side %d", side)
	q.recv, err = e.devs[side].CreateCQ(256)
	require.NoError(e.t, err, "create receive CQ on side %d", side)
	cfg.SendCQ, cfg.RecvCQ = q.send, q.recv
	q.QP, err = e.pds[side].CreateQP(cfg)
	require.NoError(e.t, err, "create QP on side %d with %+v", side, cfg)
	require.Equal(e.t, verbs.StateReset, q.State(), "state of a new QP %d", q.Num())
	return q
}

// pair creates a QP on each side with cfg and connects them.
func (e *env) pair(cfg verbs.QPConfig) (a, b *qp) {
	e.t.Helper()
	a, b = e.qp(0, cfg), e.qp(1, cfg)
	connect(e.t, a, b)
	return a, b
}

// connect takes two QPs in StateReset (or StateInit) to StateRTS, connected
// to each other. Both sides make each transition at once, as two processes
// would, because a provider may wait in RTR for its peer.
func connect(t *testing.T, a, b *qp) {
	t.Helper()
	for _, q := range []*qp{a, b} {
		if q.State() == verbs.StateReset {
			require.NoError(t, modify(q, verbs.StateInit, nil), "QP %d to INIT", q.Num())
		}
	}
	ea, eb := viaJSON(t, a.Endpoint()), viaJSON(t, b.Endpoint())
	both(t, verbs.StateRTR, a, &eb, b, &ea)
	both(t, verbs.StateRTS, a, nil, b, nil)
}

// both moves a and b to state at the same time.
func both(t *testing.T, state verbs.QPState, a *qp, ra *verbs.Endpoint, b *qp, rb *verbs.Endpoint) {
	t.Helper()
	errb := make(chan error, 1)
	go func() { errb <- modify(b, state, rb) }()
	erra := modify(a, state, ra)
	var err error
	select {
	case err = <-errb:
	case <-time.After(waitTimeout):
		err = fmt.Errorf("no return from Modify within %v", waitTimeout)
	}
	require.NoError(t, erra, "QP %d to %v", a.Num(), state)
	require.NoError(t, err, "QP %d to %v", b.Num(), state)
}

// modify is q.Modify with a deadline.
func modify(q verbs.QP, state verbs.QPState, remote *verbs.Endpoint) error {
	_, err := bounded(fmt.Sprintf("Modify of QP %d to %v", q.Num(), state), func() (struct{}, error) {
		return struct{}{}, q.Modify(state, remote)
	})
	return err
}

// bounded runs f and waits for it at most waitTimeout. f keeps running
// after a timeout; the caller fails its test instead of waiting for it.
func bounded[T any](what string, f func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := f()
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-time.After(waitTimeout):
		var zero T
		return zero, fmt.Errorf("verbstest: %s did not return within %v", what, waitTimeout)
	}
}

// viaJSON passes an endpoint through JSON, as the bootstrap does.
func viaJSON(t *testing.T, ep verbs.Endpoint) verbs.Endpoint {
	t.Helper()
	b, err := json.Marshal(ep)
	require.NoError(t, err, "marshal endpoint %+v", ep)
	var out verbs.Endpoint
	require.NoError(t, json.Unmarshal(b, &out), "unmarshal endpoint %s", b)
	return out
}
