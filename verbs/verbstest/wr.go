package verbstest

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rdmacell/rdmacell/verbs"
	"github.com/stretchr/testify/require"
)

// sge names n bytes at off in mr.
func sge(mr verbs.MR, off, n int) verbs.SGE {
	return verbs.SGE{Addr: mr.Addr() + uint64(off), Length: uint32(n), LKey: mr.LKey()}
}

// target is remote memory: a region of a peer in this process (a
// verbs.MR) or of a peer process.
type target interface {
	Addr() uint64
	RKey() uint32
}

// remote is a region of a peer process.
type remote struct {
	addr uint64
	rkey uint32
}

func (r remote) Addr() uint64 { return r.addr }
func (r remote) RKey() uint32 { return r.rkey }

// write is a signaled WRITE of n bytes from src at soff to dst at doff. A
// zero n gives an empty scatter-gather list.
func write(id uint64, src verbs.MR, soff, n int, dst target, doff int) *verbs.SendWR {
	wr := &verbs.SendWR{ID: id, Opcode: verbs.OpWrite, Flags: verbs.Signaled,
		RemoteAddr: dst.Addr() + uint64(doff), RKey: dst.RKey()}
	if n > 0 {
		wr.SGL = []verbs.SGE{sge(src, soff, n)}
	}
	return wr
}

// writeImm is write as a WRITE_WITH_IMM carrying imm.
func writeImm(id uint64, src verbs.MR, soff, n int, dst target, doff int, imm uint32) *verbs.SendWR {
	wr := write(id, src, soff, n, dst, doff)
	wr.Opcode, wr.Imm = verbs.OpWriteImm, imm
	return wr
}

// unsignaled clears wr's Signaled flag.
func unsignaled(wr *verbs.SendWR) *verbs.SendWR {
	wr.Flags &^= verbs.Signaled
	return wr
}

// chain links wrs in order and returns the first.
func chain(wrs ...*verbs.SendWR) *verbs.SendWR {
	for i := 0; i+1 < len(wrs); i++ {
		wrs[i].Next = wrs[i+1]
	}
	return wrs[0]
}

// post posts a send chain that must be accepted whole.
func post(t *testing.T, q verbs.QP, wr *verbs.SendWR) {
	t.Helper()
	bad, err := q.PostSend(wr)
	require.NoError(t, err, "post send wr %d on QP %d", wr.ID, q.Num())
	require.Nil(t, bad, "bad wr after a successful post on QP %d", q.Num())
}

// postRecvs posts one receive per id, with an empty scatter-gather list.
func postRecvs(t *testing.T, q verbs.QP, ids ...uint64) {
	t.Helper()
	for _, id := range ids {
		bad, err := q.PostRecv(&verbs.RecvWR{ID: id})
		require.NoError(t, err, "post receive %d on QP %d", id, q.Num())
		require.Nil(t, bad)
	}
}

// collect waits for exactly n completions on cq, until ctx ends.
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

// waitWCs waits up to waitTimeout for exactly n completions on cq. It
// waits in another goroutine, so that a Wait ignoring its context fails
// the test instead of hanging it.
func waitWCs(t *testing.T, cq verbs.CQ, n int, what string) []verbs.WC {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	type result struct {
		wcs []verbs.WC
		err error
	}
	ch := make(chan result, 1)
	go func() {
		wcs, err := collect(ctx, cq, n)
		ch <- result{wcs, err}
	}()
	select {
	case r := <-ch:
		require.NoError(t, r.err, "waiting for %s", what)
		return r.wcs
	case <-time.After(waitTimeout + time.Second):
		require.FailNowf(t, "CQ Wait ignored its context", "waiting for %s: Wait still blocked %v after its deadline", what, time.Second)
		return nil
	}
}

// waitGroup waits for wg like wg.Wait, failing the test if that takes
// longer than waitTimeout.
func waitGroup(t *testing.T, wg *sync.WaitGroup, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(waitTimeout + time.Second):
		require.FailNowf(t, "goroutines did not finish", "%s: still running after %v", what, waitTimeout)
	}
}

// waitWC waits for one completion.
func waitWC(t *testing.T, cq verbs.CQ, what string) verbs.WC {
	t.Helper()
	return waitWCs(t, cq, 1, what)[0]
}

// requireNoWC fails if cq holds a completion now.
func requireNoWC(t *testing.T, cq verbs.CQ, what string) {
	t.Helper()
	var wc [4]verbs.WC
	n := cq.Poll(wc[:])
	require.Zero(t, n, "unexpected completions on %s: %+v", what, wc[:n])
}

// requireOK checks a successful completion of wr id with opcode op on qpn.
func requireOK(t *testing.T, wc verbs.WC, id uint64, op verbs.Opcode, qpn uint32) {
	t.Helper()
	require.Equal(t, verbs.StatusSuccess, wc.Status, "status of wr %d: %+v", id, wc)
	require.Equal(t, id, wc.ID, "completion id: %+v", wc)
	require.Equal(t, op, wc.Opcode, "opcode of wr %d: %+v", id, wc)
	require.Equal(t, qpn, wc.QPN, "QP number of wr %d: %+v", id, wc)
}

// requireStatus checks the status of a failed completion. The opcode of
// an error completion is undefined in ibverbs, so it is not checked.
func requireStatus(t *testing.T, wc verbs.WC, id uint64, st verbs.Status, qpn uint32) {
	t.Helper()
	require.Equal(t, id, wc.ID, "completion id: %+v", wc)
	require.Equal(t, st, wc.Status, "status of wr %d: %+v", id, wc)
	require.Equal(t, qpn, wc.QPN, "QP number of wr %d: %+v", id, wc)
}

// fill writes a pseudo-random pattern determined by seed into b, so that
// two processes can produce the same bytes without sending them.
func fill(b []byte, seed uint64) {
	x := seed
	next := func() uint64 { // splitmix64
		x += 0x9e3779b97f4a7c15
		z := x
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		return z ^ (z >> 31)
	}
	i := 0
	for ; i+8 <= len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], next())
	}
	if i < len(b) {
		var tail [8]byte
		binary.LittleEndian.PutUint64(tail[:], next())
		copy(b[i:], tail[:])
	}
}

// set fills b with c.
func set(b []byte, c byte) {
	for i := range b {
		b[i] = c
	}
}

// requireBytes compares large buffers without printing them: it reports
// the first differing offset and how many bytes differ.
func requireBytes(t *testing.T, want, got []byte, what string) {
	t.Helper()
	require.Equal(t, len(want), len(got), "length of %s", what)
	if bytes.Equal(want, got) {
		return
	}
	first, diff := -1, 0
	for i := range want {
		if want[i] != got[i] {
			if first < 0 {
				first = i
			}
			diff++
		}
	}
	if diff > 0 {
		require.FailNowf(t, "bytes differ", "%s: %d of %d bytes differ, first at offset %d (want %#02x, got %#02x)",
			what, diff, len(want), first, want[first], got[first])
	}
}

// requireAll checks that every byte of b is c.
func requireAll(t *testing.T, b []byte, c byte, what string) {
	t.Helper()
	for i := range b {
		if b[i] != c {
			require.FailNowf(t, "memory touched", "%s: byte %d of %d is %#02x, want %#02x", what, i, len(b), b[i], c)
		}
	}
}
