package ibv

import (
	"testing"

	"github.com/rdmacell/rdmacell/verbs"
	"github.com/stretchr/testify/require"
)

func TestRing(t *testing.T) {
	r := newRing(4, 1)
	require.Equal(t, 4, r.room())
	for i := range 4 {
		require.Equal(t, uint64(i), r.push(wrSlot{id: uint64(100 + i), op: verbs.OpWrite, n: uint32(i)}))
	}
	require.Zero(t, r.room(), "MaxSendWR requests outstanding")

	// Requests 0 and 1 were unsignaled: the completion of 2 retires them.
	s, ok := r.complete(2)
	require.True(t, ok)
	require.Equal(t, wrSlot{id: 102, op: verbs.OpWrite, n: 2}, s)
	require.Equal(t, 3, r.room())
	_, ok = r.complete(1)
	require.False(t, ok, "a sequence number already retired")
	_, ok = r.complete(9)
	require.False(t, ok, "a sequence number never posted")

	// The spare slot takes a marker beyond the caller's room.
	for range 3 {
		r.push(wrSlot{id: 1})
	}
	require.Zero(t, r.room())
	m := r.push(wrSlot{marker: true})
	require.Equal(t, 5, r.outstanding())
	s, ok = r.complete(m)
	require.True(t, ok)
	require.True(t, s.marker)
	require.Equal(t, 4, r.room())

	// A refused post is forgotten.
	a := r.push(wrSlot{id: 7})
	r.push(wrSlot{id: 8})
	r.unpush(1)
	require.Equal(t, 1, r.outstanding())
	s, ok = r.complete(a)
	require.True(t, ok)
	require.Equal(t, uint64(7), s.id)

	// A reset discards; completions of the old incarnation are stale.
	old := r.push(wrSlot{id: 9})
	r.reset()
	require.Equal(t, 4, r.room())
	_, ok = r.complete(old)
	require.False(t, ok, "completion of a request discarded by a reset")
	next := r.push(wrSlot{id: 10})
	require.Greater(t, next, old, "sequence numbers never repeat across resets")
}
