package flight

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestSummarizeNamesTheRankThatHasNotEntered(t *testing.T) {
	now := time.Now()
	start := now.Add(-61 * time.Second)
	world := []int{0, 1, 2}
	waiting := func(rank, peer int) Status {
		op := Op{Comm: 1, Seq: 4, Name: "AllReduce", Start: start, State: Running, Step: 0, Peer: peer, Dir: Recv}
		return Status{Rank: rank, Comms: []CommStatus{{ID: 1, Ranks: world, Last: &op, Open: []Op{op}}}}
	}
	done := Op{Comm: 1, Seq: 3, Name: "AllReduce", Start: start.Add(-time.Second), End: start, State: Done}
	sts := []Status{waiting(0, 2), waiting(1, 0), {Rank: 2, Comms: []CommStatus{{ID: 1, Ranks: world, Last: &done}}}}
	require.Equal(t, []string{"rank 2 has not entered AllReduce #4; ranks 0, 1 have waited in it for 1m1s"}, Summarize(3, sts, now))

	// Rank 2 does not answer at all.
	require.Equal(t, []string{"rank 2 did not answer (stopped, or not in the job any more)"}[0],
		Summarize(3, sts[:2], now)[len(Summarize(3, sts[:2], now))-1])
}

func TestSummarizeNamesThePathWaitedOn(t *testing.T) {
	now := time.Now()
	world := []int{0, 1}
	op := func(peer int) Op {
		return Op{Comm: 1, Seq: 9, Name: "Broadcast", Start: now.Add(-90 * time.Second), State: Running, Step: 2, Peer: peer, Dir: Recv}
	}
	a, b := op(1), op(0)
	sts := []Status{
		{Rank: 0, Comms: []CommStatus{{ID: 1, Ranks: world, Last: &a, Open: []Op{a}, Paths: []PeerPaths{{Peer: 1, Links: []LinkStatus{
			{Name: "bulk", Paths: []PathStatus{{Path: 0, State: "up"}, {Path: 2, State: "resetting", Attempts: 4}}}}}}}}},
		{Rank: 1, Comms: []CommStatus{{ID: 1, Ranks: world, Last: &b, Open: []Op{b}}}},
	}
	require.Equal(t, []string{
		"rank 0 waits in Broadcast #9 for rank 1 (to send to it, step 2; bulk path 2 resetting, 4 attempts)",
		"rank 1 waits in Broadcast #9 for rank 0 (to send to it, step 2)",
	}, Summarize(2, sts, now))
}
