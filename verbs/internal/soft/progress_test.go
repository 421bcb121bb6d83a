package soft

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/verbs"
)

// TestCQProgressRunsOnPoll: a provider's progress hook runs at every Poll
// and Wait, and completions it pushes are returned by that same call.
func TestCQProgressRunsOnPoll(t *testing.T) {
	cq, err := NewCQ(4)
	require.NoError(t, err)
	calls := 0
	cq.SetProgress(func() {
		calls++
		if calls == 2 {
			cq.Push(verbs.WC{ID: 7})
		}
	})
	require.False(t, cq.Passive(), "polling does work")
	wc := make([]verbs.WC, 1)
	require.Zero(t, cq.Poll(wc))
	n, err := cq.Wait(context.Background(), wc)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, uint64(7), wc[0].ID)
	require.Equal(t, 2, calls)

	cq.SetProgress(nil)
	require.Zero(t, cq.Poll(wc))
	require.Equal(t, 2, calls)
	require.True(t, cq.Passive(), "polling only looks")
}
