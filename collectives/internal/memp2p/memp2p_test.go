package memp2p

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rdmacell/rdmacell/comm"
	"github.com/stretchr/testify/require"
)

func TestOrderedMatching(t *testing.T) {
	w := New(2)
	a, b := w.Endpoint(0), w.Endpoint(1)
	ctx := context.Background()
	r1, err := b.Irecv(0, 7, make([]byte, 4))
	require.NoError(t, err)
	s1, err := a.Isend(1, 7, []byte("abc"))
	require.NoError(t, err)
	s2, err := a.Isend(1, 8, []byte("xy"))
	require.NoError(t, err)
	n, err := r1.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	buf := make([]byte, 2)
	r2, err := b.Irecv(0, 8, buf)
	require.NoError(t, err)
	_, err = r2.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, "xy", string(buf))
	for _, s := range []comm.Request{s1, s2} {
		_, err = s.Wait(ctx)
		require.NoError(t, err)
	}
	require.Zero(t, w.Pending())
}

func TestMismatchAndLength(t *testing.T) {
	w := New(2)
	a, b := w.Endpoint(0), w.Endpoint(1)
	ctx := context.Background()
	_, err := a.Isend(1, 1, []byte("a"))
	require.NoError(t, err)
	r, err := b.Irecv(0, 2, make([]byte, 1))
	require.NoError(t, err)
	_, err = r.Wait(ctx)
	var me *comm.MismatchError
	require.ErrorAs(t, err, &me)
	require.Equal(t, comm.MismatchError{Rank: 1, Peer: 0, Want: 2, Got: 1}, *me)

	s, err := a.Isend(1, 3, []byte("long"))
	require.NoError(t, err)
	r, err = b.Irecv(0, 3, make([]byte, 2))
	require.NoError(t, err)
	_, err = r.Wait(ctx)
	require.ErrorIs(t, err, ErrTooLong)
	_, err = s.Wait(ctx)
	require.ErrorIs(t, err, ErrTooLong)
}

func TestWaitHonoursContext(t *testing.T) {
	w := New(2)
	r, err := w.Endpoint(0).Irecv(1, 1, nil)
	require.NoError(t, err)
	done, _, _ := r.Test()
	require.False(t, done)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, err = r.Wait(ctx)
	require.True(t, errors.Is(err, context.DeadlineExceeded))
	_, err = w.Endpoint(0).Isend(0, 1, nil)
	require.Error(t, err, "a rank is not its own peer")
}

func TestAllocFree(t *testing.T) {
	w := New(1)
	e := w.Endpoint(0)
	b, err := e.Alloc(100)
	require.NoError(t, err)
	require.Equal(t, 100, w.Allocated())
	require.NoError(t, e.Free(b))
	require.Error(t, e.Free(b))
	require.Zero(t, w.Allocated())
	_, err = e.Alloc(0)
	require.Error(t, err)
}
