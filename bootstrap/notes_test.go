package bootstrap

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestNotesReachEveryRankAndAWatcher(t *testing.T) {
	eachStore(t, func(t *testing.T, m meeting) {
		ctx := testContext(t)
		a := join(t, m.config("notes", 0, 2))
		b := join(t, m.config("notes", 1, 2))

		_, v0 := b.Notes("stall")
		require.NoError(t, a.Note(ctx, "stall", []byte("round 1")))
		v1, err := b.WaitNotes(ctx, "stall", v0)
		require.NoError(t, err)
		require.Greater(t, v1, v0)
		notes, _ := b.Notes("stall")
		require.Equal(t, map[int][]byte{0: []byte("round 1")}, notes)

		require.NoError(t, b.Note(ctx, "status/x", []byte("b's")))
		require.NoError(t, a.Note(ctx, "stall", []byte("round 2")))
		_, err = b.WaitNotes(ctx, "stall", v1)
		require.NoError(t, err)
		notes, _ = b.Notes("stall")
		require.Equal(t, []byte("round 2"), notes[0])
		_, err = a.WaitNotes(ctx, "status/x", 0)
		require.NoError(t, err)
		notes, _ = a.Notes("status/x")
		require.Equal(t, map[int][]byte{1: []byte("b's")}, notes, "a name with a slash")
	})
}

func TestWatchNotesFromOutsideTheJob(t *testing.T) {
	st := NewLocalStore()
	t.Cleanup(func() { _ = st.Close() })
	m := meeting{store: st, t: t}
	ctx := testContext(t)
	a := join(t, m.config("watched", 0, 1))
	require.NoError(t, a.Note(ctx, "status", []byte("before")))

	ch, err := WatchNotes(ctx, st, "", "watched")
	require.NoError(t, err)
	require.NoError(t, a.Note(ctx, "status", []byte("after")))
	for _, want := range []string{"before", "after"} {
		select {
		case ev := <-ch:
			require.Equal(t, NoteEvent{Rank: 0, Name: "status", Value: []byte(want)}, ev)
		case <-time.After(10 * time.Second):
			t.Fatalf("no note %q", want)
		}
	}
}

func TestDecideTakesTheFirstProposal(t *testing.T) {
	eachStore(t, func(t *testing.T, m meeting) {
		ctx := testContext(t)
		a := join(t, m.config("decide", 0, 2))
		b := join(t, m.config("decide", 1, 2))
		got, err := b.Decide(ctx, "shrink/1", []byte("0,1"))
		require.NoError(t, err)
		require.Equal(t, []byte("0,1"), got)
		got, err = a.Decide(ctx, "shrink/1", []byte("0"))
		require.NoError(t, err)
		require.Equal(t, []byte("0,1"), got, "the first proposal stands")
		got, err = a.Decide(ctx, "shrink/2", []byte("0"))
		require.NoError(t, err)
		require.Equal(t, []byte("0"), got, "another name is another decision")
	})
}
