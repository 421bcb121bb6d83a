package shm

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/verbs"
)

// waitLimit bounds every wait of a test; tests never assert on timing.
const waitLimit = 20 * time.Second

// node is one side of a test connection: a device with a PD, a CQ shared
// by sends and receives, a QP and a registered buffer.
type node struct {
	dev *Device
	pd  verbs.PD
	cq  verbs.CQ
	qp  verbs.QP
	mem *verbs.Memory
	mr  verbs.MR
}

func openDevice(t testing.TB) *Device {
	t.Helper()
	d, err := Open(Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, d.Close()) })
	return d
}

// newNode creates a QP on d with a buffer of size bytes registered with
// access, and moves the QP to INIT.
func newNode(t testing.TB, d *Device, size int, access verbs.Access, cfg verbs.QPConfig) *node {
	t.Helper()
	n := &node{dev: d}
	var err error
	n.pd, err = d.AllocPD()
	require.NoError(t, err)
	n.cq, err = d.CreateCQ(64)
	require.NoError(t, err)
	cfg.SendCQ, cfg.RecvCQ = n.cq, n.cq
	n.qp, err = n.pd.CreateQP(cfg)
	require.NoError(t, err)
	n.mem, err = verbs.Alloc(size)
	require.NoError(t, err)
	n.mr, err = n.pd.RegMR(n.mem.Bytes(), access)
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = n.qp.Close()
		_ = n.mr.Close()
		_ = n.mem.Free()
	})
	require.NoError(t, n.qp.Modify(verbs.StateInit, nil))
	return n
}

const rw = verbs.AccessLocalWrite | verbs.AccessRemoteWrite

// connect brings both QPs to RTS, each pointed at the other.
func connect(t testing.TB, a, b *node) {
	t.Helper()
	ea, eb := a.qp.Endpoint(), b.qp.Endpoint()
	require.NoError(t, a.qp.Modify(verbs.StateRTR, &eb))
	require.NoError(t, b.qp.Modify(verbs.StateRTR, &ea))
	require.NoError(t, a.qp.Modify(verbs.StateRTS, nil))
	require.NoError(t, b.qp.Modify(verbs.StateRTS, nil))
}

// pair returns two connected nodes on two devices of this process.
func pair(t testing.TB, size int, cfg verbs.QPConfig) (a, b *node) {
	t.Helper()
	a = newNode(t, openDevice(t), size, rw, cfg)
	b = newNode(t, openDevice(t), size, rw, cfg)
	connect(t, a, b)
	return a, b
}

// waitWC returns the next n completions of cq.
func waitWC(t testing.TB, cq verbs.CQ, n int) []verbs.WC {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	out := make([]verbs.WC, 0, n)
	buf := make([]verbs.WC, n)
	for len(out) < n {
		k, err := cq.Wait(ctx, buf[:n-len(out)])
		require.NoError(t, err, "waiting for %d completions, have %v", n, out)
		out = append(out, buf[:k]...)
	}
	return out
}

// noWC asserts that cq holds no completion now.
func noWC(t testing.TB, cq verbs.CQ) {
	t.Helper()
	var wc [4]verbs.WC
	n := cq.Poll(wc[:])
	require.Zero(t, n, "unexpected completions %v", wc[:n])
}

func sge(mr verbs.MR, off, n int) []verbs.SGE {
	return []verbs.SGE{{Addr: mr.Addr() + uint64(off), Length: uint32(n), LKey: mr.LKey()}}
}

func write(id uint64, src verbs.MR, srcOff int, dst verbs.MR, dstOff, n int) *verbs.SendWR {
	return &verbs.SendWR{ID: id, Opcode: verbs.OpWrite, Flags: verbs.Signaled, SGL: sge(src, srcOff, n),
		RemoteAddr: dst.Addr() + uint64(dstOff), RKey: dst.RKey()}
}

func writeImm(id uint64, src verbs.MR, srcOff int, dst verbs.MR, dstOff, n int, imm uint32) *verbs.SendWR {
	wr := write(id, src, srcOff, dst, dstOff, n)
	wr.Opcode, wr.Imm = verbs.OpWriteImm, imm
	return wr
}

func post(t testing.TB, qp verbs.QP, wr *verbs.SendWR) {
	t.Helper()
	bad, err := qp.PostSend(wr)
	require.NoError(t, err)
	require.Nil(t, bad)
}

func postRecv(t testing.TB, qp verbs.QP, id uint64, sgl ...verbs.SGE) {
	t.Helper()
	bad, err := qp.PostRecv(&verbs.RecvWR{ID: id, SGL: sgl})
	require.NoError(t, err)
	require.Nil(t, bad)
}

func fill(b []byte, seed byte) {
	for i := range b {
		b[i] = seed + byte(i*7)
	}
}
