package soft

import (
	"context"
	"testing"
	"time"

	"github.com/rdmacell/rdmacell/verbs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCQKeepsOrderAndGrows(t *testing.T) {
	cq, err := NewCQ(2)
	require.NoError(t, err)
	for i := range 5 {
		cq.Push(verbs.WC{ID: uint64(i)})
	}
	wc := make([]verbs.WC, 3)
	require.Equal(t, 3, cq.Poll(wc))
	cq.Push(verbs.WC{ID: 5})
	got := []uint64{wc[0].ID, wc[1].ID, wc[2].ID}
	n := cq.Poll(wc)
	for _, w := range wc[:n] {
		got = append(got, w.ID)
	}
	assert.Equal(t, []uint64{0, 1, 2, 3, 4, 5}, got)
	assert.Zero(t, cq.Poll(wc))
}

func TestCQWait(t *testing.T) {
	cq, err := NewCQ(4)
	require.NoError(t, err)
	wc := make([]verbs.WC, 1)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = cq.Wait(ctx, wc)
	assert.ErrorIs(t, err, context.DeadlineExceeded)

	go cq.Push(verbs.WC{ID: 42})
	ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	n, err := cq.Wait(ctx2, wc)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	assert.EqualValues(t, 42, wc[0].ID)

	go cq.Close()
	_, err = cq.Wait(ctx2, wc)
	assert.ErrorIs(t, err, verbs.ErrClosed)
}

func TestCQPollDoesNotAllocate(t *testing.T) {
	cq, err := NewCQ(16)
	require.NoError(t, err)
	wc := make([]verbs.WC, 4)
	allocs := testing.AllocsPerRun(100, func() {
		cq.Push(verbs.WC{ID: 1})
		cq.Poll(wc)
	})
	assert.Zero(t, allocs)
}

func TestMRTableChecks(t *testing.T) {
	m, err := verbs.Alloc(8192)
	require.NoError(t, err)
	defer m.Free()
	var tab MRTable
	ro, err := tab.Register(m.Bytes()[:4096], 0)
	require.NoError(t, err)
	rw, err := tab.Register(m.Bytes()[4096:], verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	require.NoError(t, err)
	require.NotEqual(t, ro.RKey(), rw.RKey())

	b, _, st := tab.Remote(rw.RKey(), rw.Addr()+10, 20, verbs.AccessRemoteWrite)
	require.Equal(t, verbs.StatusSuccess, st)
	assert.Len(t, b, 20)
	assert.Equal(t, rw.Addr()+10, verbs.AddrOf(b))

	cases := []struct {
		name string
		key  uint32
		addr uint64
		n    uint64
	}{
		{"no remote write", ro.RKey(), ro.Addr(), 1},
		{"unknown key", rw.RKey() + 1, rw.Addr(), 1},
		{"below region", rw.RKey(), rw.Addr() - 1, 1},
		{"past the end", rw.RKey(), rw.Addr() + 4000, 97},
		{"length wraps", rw.RKey(), rw.Addr() + 1, ^uint64(0)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, st := tab.Remote(c.key, c.addr, c.n, verbs.AccessRemoteWrite)
			assert.Equal(t, verbs.StatusRemoteAccess, st)
		})
	}

	_, st = tab.Local(verbs.SGE{Addr: ro.Addr(), Length: 1, LKey: ro.LKey()}, true)
	assert.Equal(t, verbs.StatusLocalProtection, st, "receive into a region without local write")
	_, st = tab.Local(verbs.SGE{Addr: ro.Addr(), Length: 4096, LKey: ro.LKey()}, false)
	assert.Equal(t, verbs.StatusSuccess, st)

	require.NoError(t, rw.Close())
	assert.Error(t, rw.Close())
	_, _, st = tab.Remote(rw.RKey(), rw.Addr(), 1, verbs.AccessRemoteWrite)
	assert.Equal(t, verbs.StatusRemoteAccess, st, "deregistered")
	_, err = tab.Register(m.Bytes(), verbs.AccessRemoteWrite)
	assert.ErrorIs(t, err, verbs.ErrInvalidArgument, "remote write without local write")
}

func TestRecvQueue(t *testing.T) {
	q := NewRecvQueue(2, 1)
	sge := []verbs.SGE{{Addr: 1, Length: 2, LKey: 3}}
	_, err := q.Post(&verbs.RecvWR{ID: 1, SGL: sge, Next: &verbs.RecvWR{ID: 2}}, nil)
	require.NoError(t, err)
	bad, err := q.Post(&verbs.RecvWR{ID: 3}, nil)
	assert.ErrorIs(t, err, verbs.ErrQueueFull)
	assert.EqualValues(t, 3, bad.ID)
	_, err = q.Post(&verbs.RecvWR{ID: 4, SGL: make([]verbs.SGE, 2)}, nil)
	assert.ErrorIs(t, err, verbs.ErrInvalidArgument)

	sge[0].Length = 99 // the queue holds its own copy, as an RNIC holds the WQE
	var s RecvSlot
	require.True(t, q.Take(0, &s))
	assert.EqualValues(t, 1, s.ID)
	assert.Equal(t, []verbs.SGE{{Addr: 1, Length: 2, LKey: 3}}, s.SGL)

	cq, _ := NewCQ(4)
	q.Flush(cq, 7)
	wc := make([]verbs.WC, 4)
	require.Equal(t, 1, cq.Poll(wc))
	assert.Equal(t, verbs.WC{ID: 2, Status: verbs.StatusWRFlush, Opcode: verbs.OpRecv, QPN: 7}, wc[0])
	assert.False(t, q.Take(0, &s))

	go func() {
		time.Sleep(5 * time.Millisecond)
		_, _ = q.Post(&verbs.RecvWR{ID: 9}, nil)
	}()
	require.True(t, q.Take(10*time.Second, &s), "a receive posted while waiting is taken")
	assert.EqualValues(t, 9, s.ID)
}
