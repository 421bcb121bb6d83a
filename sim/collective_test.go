package sim

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func collective(scheme, kind string, bytes int64) Config {
	cfg := k4(scheme)
	cfg.Collective = &Collective{Kind: kind, Bytes: bytes}
	return cfg
}

func TestCollectiveSchedules(t *testing.T) {
	// Ring AllReduce: 2(n−1) steps, each rank one message per chunk of a
	// block; pairwise AllToAll: n−1 messages per rank.
	for _, tc := range []struct {
		c    Collective
		msgs int
	}{
		{Collective{Kind: "allreduce", Ranks: 8, Bytes: 8 << 10}, 2 * 8 * 7},
		{Collective{Kind: "allreduce", Ranks: 4, Bytes: 4 << 20, Chunk: 256 << 10}, 2 * 4 * 3 * 4},
		{Collective{Kind: "alltoall", Ranks: 8, Bytes: 8 << 10}, 8 * 7},
	} {
		tc.c.defaults(16)
		require.NoError(t, tc.c.validate(16))
		sc := tc.c.buildSchedule(1)
		assert.Len(t, sc.flows, tc.msgs, "%+v", tc.c)
		var bytes int64
		for _, f := range sc.flows {
			bytes += f.Size
		}
		// Each rank sends 2(n−1)/n of the vector in a ring AllReduce,
		// (n−1)/n of its buffer in an AllToAll.
		n := int64(tc.c.Ranks)
		want := n * tc.c.Bytes * (n - 1) / n
		if tc.c.Kind == "allreduce" {
			want *= 2
		}
		assert.Equal(t, want, bytes, "%+v", tc.c)
	}
	bad := []Collective{
		{Kind: "broadcast", Bytes: 1 << 20},
		{Kind: "allreduce", Ranks: 17, Bytes: 1 << 20},
		{Kind: "allreduce", Bytes: 32},
		{Kind: "alltoall", Bytes: 1 << 20, Placement: "scattered"},
	}
	for _, c := range bad {
		c.defaults(16)
		assert.Error(t, c.validate(16), "%+v", c)
	}
}

// Every message starts only after what its algorithm waits for, and the
// whole collective completes, for every scheme and with the ranks
// scattered over the fabric.
func TestCollectiveHonoursDependencies(t *testing.T) {
	for _, kind := range CollectiveKinds {
		for _, sc := range Schemes {
			cfg := collective(sc, kind, 256<<10)
			cfg.Collective.Placement = "random"
			s := run(t, cfg)
			r := s.CollectiveResult()
			require.Zero(t, r.Unfinished, "%s %s", kind, sc)
			fl := s.Flows()
			for i := range fl {
				require.NotZero(t, fl[i].Arrive, "%s %s: flow %d never arrived", kind, sc, i)
				when := [depKinds]int64{fl[i].Start, fl[i].Arrive, fl[i].Finish}
				for k := range depKinds {
					for _, j := range s.sched.to[k][s.sched.off[k][i]:s.sched.off[k][i+1]] {
						require.GreaterOrEqual(t, fl[j].Start, when[k], "%s %s: flow %d started before event %d of flow %d", kind, sc, j, k, i)
					}
				}
			}
			assert.GreaterOrEqual(t, r.Slowdown, 1.0, "%s %s: no faster than without contention", kind, sc)
		}
	}
}

func TestCollectiveSameSeedSameResult(t *testing.T) {
	cfg := collective("rdmacell", "allreduce", 256<<10)
	cfg.Collective.Placement = "random"
	a, b := run(t, cfg), run(t, cfg)
	assert.Equal(t, a.Flows(), b.Flows())
	ra, rb := a.CollectiveResult(), b.CollectiveResult()
	ra.Stats.Wall, rb.Stats.Wall = 0, 0
	assert.Equal(t, ra, rb)
}

// On a K=4 fat-tree a ring over the hosts in order is contention free
// (each directed link carries at most one ring hop), so without rate
// control the baseline's AllReduce takes its ideal time, give or take
// the acknowledgements' serialization that the ideal leaves out.
func TestRingAllReduceMatchesIdeal(t *testing.T) {
	cfg := collective("ecmp", "allreduce", 1<<20)
	cfg.NoDCQCN = true
	s := run(t, cfg)
	r := s.CollectiveResult()
	require.Zero(t, r.Unfinished)
	// 2·15 steps of a 64 KiB chunk each: 66 packets, 5.5 µs on the wire,
	// plus up to 6 links.
	assert.InDelta(t, 30*(5.5e3+4e3), float64(r.Ideal), 30*3e3)
	assert.InDelta(t, 1, r.Slowdown, 0.05, "time %d ideal %d", r.Time, r.Ideal)
}

// A ring of small chunks behind one slowed host link: the rank before it
// issues sends faster than they complete, beyond the engine's MaxRanges,
// and every receiver has more messages coming than it can post at once.
// The driver holds both back in order, so each message still lands in
// the receive posted for it: every one arrives, after it was sent.
func TestPairConnectionBeyondMaxRanges(t *testing.T) {
	cfg := collective("rdmacell", "allreduce", 1<<20)
	cfg.Collective.Chunk = 4 << 10
	s, err := New(cfg)
	require.NoError(t, err)
	s.f.ports[s.f.hostPort[5]].psPerByte *= 10
	s.Run()
	r := s.CollectiveResult()
	require.Zero(t, r.Unfinished)
	assert.Greater(t, s.cells.maxWaiting, 0, "sends were held back")
	for i, f := range s.Flows() {
		require.Greater(t, f.Arrive, f.Start, "flow %d", i)
	}
}
