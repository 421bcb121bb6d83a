package collectives

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/flight"
)

// Every operation is recorded in the flight recorder of its P2P: name,
// sequence, type, size, the algorithm it ran, the peers it waited on, and
// how it ended; a mismatch is recorded as a failure.
func TestOperationsAreRecorded(t *testing.T) {
	w := newWorld(t, 3, Options{Algorithm: Ring})
	ctx := context.Background()
	w.ok(t, "two operations", func(r int, g *Group) error {
		buf := make([]float32, 5)
		if err := AllReduce(ctx, g, buf, buf, Sum); err != nil {
			return err
		}
		return Barrier(ctx, g)
	})
	errs := w.run(func(r int, g *Group) error {
		n := 4
		if r == 1 {
			n = 5
		}
		buf := make([]int32, n)
		return AllReduce(ctx, g, buf, buf, Sum)
	})
	for r := range 3 {
		require.Error(t, errs[r], "rank %d", r)
		ops := w.mem.Endpoint(r).Recorder().Ops()
		require.Len(t, ops, 3, "rank %d", r)
		ar, bar, bad := ops[0], ops[1], ops[2]
		require.Equal(t, "AllReduce", ar.Name)
		require.Equal(t, uint64(0), ar.Seq)
		require.Equal(t, "ring", ar.Algorithm)
		require.Equal(t, "float32", ar.DType)
		require.Equal(t, int64(5), ar.Count)
		require.Equal(t, int64(20), ar.Bytes)
		require.Equal(t, flight.Done, ar.State)
		require.ElementsMatch(t, []int{(r + 1) % 3, (r + 2) % 3}, ar.Peers(), "rank %d waited on both neighbours", r)
		require.False(t, ar.End.Before(ar.Start))

		require.Equal(t, "Barrier", bar.Name)
		require.Equal(t, uint64(1), bar.Seq)
		require.Equal(t, flight.Done, bar.State)

		require.Equal(t, uint64(2), bad.Seq)
		require.Equal(t, flight.Failed, bad.State)
		require.Contains(t, bad.Err, "disagree")
		require.Empty(t, w.mem.Endpoint(r).Recorder().Open(nil), "nothing left open")
	}
}

// A Gather is recorded with the algorithm it ran and the peers it waited
// on: a linear one's root waits on every rank, the others on the root
// (without the fingerprint exchange, whose waits are recorded too).
func TestGatherIsRecorded(t *testing.T) {
	w := newWorld(t, 3, Options{Algorithm: Linear, SkipVerify: true})
	ctx := context.Background()
	w.ok(t, "Gather", func(r int, g *Group) error {
		return Gather(ctx, g, make([]int64, 4), pick(r == 1, make([]int64, 12), nil), 1)
	})
	for r := range 3 {
		ops := w.mem.Endpoint(r).Recorder().Ops()
		require.Len(t, ops, 1, "rank %d", r)
		require.Equal(t, "Gather", ops[0].Name)
		require.Equal(t, "linear", ops[0].Algorithm)
		require.Equal(t, int64(4), ops[0].Count)
		require.Equal(t, flight.Done, ops[0].State)
		want := []int{1}
		if r == 1 {
			want = []int{0, 2}
		}
		require.ElementsMatch(t, want, ops[0].Peers(), "rank %d", r)
	}
}
