package sim

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// landing is one cell that landed at its receiver: bytes [off, off+n)
// of its flow, at time at.
type landing struct {
	off, n, at int64
}

// recordLandings makes s keep every cell that lands, by flow. A cell's
// remote address names the flow whose receive range it was written into
// (the driver grants flow i's range at (i+1)<<32).
func recordLandings(s *Sim) map[int32][]landing {
	got := map[int32][]landing{}
	s.cells.landed = func(raddr uint64, n int64) {
		fi := int32(raddr>>32) - 1
		got[fi] = append(got[fi], landing{off: int64(raddr & 0xffffffff), n: n, at: s.now})
	}
	return got
}

// checkLandings says whether every flow of s got each of its bytes
// exactly once (or at least once, with copies allowed), into its own
// range, and was handed back at both ends only once all had landed.
func checkLandings(t *testing.T, s *Sim, got map[int32][]landing, copies bool) {
	t.Helper()
	for i, fl := range s.Flows() {
		require.NotZero(t, fl.Finish, "flow %d (%d → %d, %d B) never finished", i, fl.Src, fl.Dst, fl.Size)
		ls := slices.Clone(got[int32(i)])
		slices.SortStableFunc(ls, func(a, b landing) int { return int(a.off - b.off) })
		var end, last int64
		for _, l := range ls {
			if copies && l.off < end {
				require.LessOrEqual(t, l.off+l.n, end, "flow %d: a copy must land where its first did", i)
				last = max(last, l.at)
				continue
			}
			require.Equal(t, end, l.off, "flow %d: bytes %d.. landed %s", i, end, map[bool]string{true: "twice", false: "never"}[l.off < end])
			end, last = l.off+l.n, max(last, l.at)
		}
		require.Equal(t, fl.Size, end, "flow %d: %d of %d bytes landed", i, end, fl.Size)
		// A range handed back on its final (after a hold, or without a
		// tail) may come back after the run's end, its sender's
		// completion, and stay 0.
		if fl.Arrive != 0 {
			require.GreaterOrEqual(t, fl.Arrive, last, "flow %d handed back at its receiver before its last byte landed", i)
		}
		require.GreaterOrEqual(t, fl.Finish, last, "flow %d complete at its sender before its last byte landed", i)
	}
}

// A loaded lossless fabric, in both connection models: every flow's
// bytes land exactly once, in its own receive range, before either end
// sees it complete. In the pair model host pairs carry several flows
// each, over one connection that is never closed.
func TestEveryByteLandsOnceInItsOwnRange(t *testing.T) {
	for _, conn := range ConnModels {
		t.Run(conn, func(t *testing.T) {
			cfg := k4("rdmacell")
			cfg.PFC, cfg.TokenPrio, cfg.Conn = true, true, conn
			cfg.Workload, cfg.Load, cfg.Duration = aliWorkload(t), 0.8, 300_000
			s, err := New(cfg)
			require.NoError(t, err)
			got := recordLandings(s)
			s.Run()
			require.Zero(t, s.Stats().PathResets, "no cell is sent twice without a reset")
			checkLandings(t, s, got, false)
			pairs := map[int32]int{}
			for i := range s.Flows() {
				pairs[s.cells.key(int32(i))]++
			}
			shared := 0
			for _, n := range pairs {
				if n > 1 {
					shared++
				}
			}
			require.Greater(t, shared, len(pairs)/2, "most host pairs must carry several flows")
			if conn == "pair" {
				assert.Len(t, s.cells.conns, len(pairs), "one connection per host pair")
				assert.Empty(t, s.cells.free, "no pair connection closes")
			} else {
				assert.Greater(t, len(s.cells.conns), len(pairs)/4)
			}
		})
	}
}

// A shallow lossy fabric that resets paths: cells are given up and sent
// again, so a byte may land twice, but only where its first copy did,
// and never after its flow was handed back.
func TestBytesLandInTheirRangeThroughResets(t *testing.T) {
	cfg := k4("rdmacell")
	cfg.Workload, cfg.Load, cfg.Duration = aliWorkload(t), 0.8, 300_000
	cfg.BufferPerPort, cfg.RTO, cfg.MinSoftTimeout = 30_000, 100_000, 100_000
	s, err := New(cfg)
	require.NoError(t, err)
	got := recordLandings(s)
	s.Run()
	st := s.Stats()
	require.NotZero(t, st.Drops, "the case must lose packets")
	require.NotZero(t, st.PathResets, "the case must reset paths")
	checkLandings(t, s, got, true)
}

// More flows between one pair, all at once, than a connection holds
// ranges (pairRanges): the sender holds the rest back in order, the
// receiver posts each range once an older one is handed back, and
// every flow still lands in the range posted for it. Their sizes
// differ, so a send written into another flow's range would not fit
// it. Each flow's completion is its own range's, not the connection's
// in order: at the sender, small flows queued after a large one
// complete before it.
func TestPairConnectionQueuesFlowsInArrivalOrder(t *testing.T) {
	cfg := k4("rdmacell")
	cfg.Duration = 1_000_000
	for i := range 3 * pairRanges {
		// Start times out of index order: the order is arrival's.
		cfg.Flows = append(cfg.Flows, Flow{Src: 0, Dst: 15, Size: int64(1000 + 997*(i%7)), Start: int64(10_000 - i%5)})
	}
	cfg.Flows = append(cfg.Flows, Flow{Src: 0, Dst: 15, Size: 2_000_000, Start: 9_000})
	s, err := New(cfg)
	require.NoError(t, err)
	got := recordLandings(s)
	s.Run()
	checkLandings(t, s, got, false)
	require.Len(t, s.cells.conns, 1)
	assert.Greater(t, s.cells.maxWaiting, 0, "sends were held back")
	big := s.Flows()[len(cfg.Flows)-1]
	before := 0
	for _, fl := range s.Flows()[:3*pairRanges] {
		if fl.Finish < big.Finish {
			before++
		}
	}
	assert.Greater(t, before, 0, "flows sent after the large one complete before it")
}

// No flow completes faster than its bytes cross the first link at line
// rate and the propagation there and back allows, in any RDMACell scheme
// and either model. (The ideal of the slowdown is not such a bound: it
// counts a full MTU's store-and-forward per hop and an RC ACK, where a
// flow's last packet may be shorter and a token is smaller.)
func TestFCTNotBelowLineRate(t *testing.T) {
	for _, sc := range []string{"rdmacell", "rdmacell-ecmp", "rdmacell-spray"} {
		for _, conn := range ConnModels {
			cfg := k4(sc)
			cfg.Conn, cfg.TokenPrio = conn, true
			cfg.Workload, cfg.Load, cfg.Duration = aliWorkload(t), 0.5, 200_000
			s := run(t, cfg)
			for i, fl := range s.Flows() {
				require.NotZero(t, fl.Finish, "%s/%s flow %d", sc, conn, i)
				pkts := (fl.Size + int64(s.cfg.MTU) - 1) / int64(s.cfg.MTU)
				bound := float64(fl.Size+pkts*int64(s.cfg.Header))*8/s.cfg.Gbps + float64(2*int64(s.f.hops(fl.Src, fl.Dst))*s.cfg.LinkDelay)
				require.GreaterOrEqual(t, float64(fl.Finish-fl.Start), bound, "%s/%s flow %d of %d B", sc, conn, i, fl.Size)
			}
		}
	}
}

// One flow: the pair model is the per-flow model, to the nanosecond, as
// the receiver's range is posted RecvLead ahead in both. Two flows one
// after the other with no lead: the per-flow model's second connection
// waits for its grant to cross the fabric again, the pair's had its
// range posted when the first was (its grant written just after the
// first's, which may cost the first the grant's serialization).
func TestPairModelIsPerFlowModelWithoutSetup(t *testing.T) {
	one := func(conn string, recvLead int64, flows ...Flow) []Flow {
		cfg := k4("rdmacell")
		cfg.Conn, cfg.NoDCQCN, cfg.RecvLead, cfg.Duration = conn, true, recvLead, 2_000_000
		cfg.Flows = flows
		return run(t, cfg).Flows()
	}
	fct := func(f Flow) int64 { return f.Finish - f.Start }
	for _, size := range []int64{3000, 1_000_000} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			a := Flow{Src: 0, Dst: 15, Size: size, Start: 10_000}
			p, f := one("pair", 0, a), one("flow", 0, a)
			assert.Equal(t, f[0].Finish, p[0].Finish)
			assert.Equal(t, f[0].Arrive, p[0].Arrive)

			b := a
			b.Start = 1_000_000
			p, f = one("pair", 1, a, b), one("flow", 1, a, b)
			require.InDelta(t, fct(f[0]), fct(p[0]), 50, "the first flow pays the setup in both")
			require.InDelta(t, fct(f[0]), fct(f[1]), 50, "per flow, the second pays it again")
			setup := fct(f[1]) - fct(p[1])
			// The setup is one grant crossing host 0 → 15's six links:
			// 1 µs each, and a write of a few dozen bytes.
			assert.GreaterOrEqual(t, setup, int64(6_000), "the pair's second flow finds its range posted")
			assert.Less(t, setup, int64(6_100))
		})
	}
}

// A pair-model run is a function of its Config: the same seed gives the
// same flows and counters, another seed others.
func TestPairModelDeterministic(t *testing.T) {
	cfg := k4("rdmacell")
	cfg.PFC, cfg.TokenPrio = true, true
	cfg.Workload, cfg.Load, cfg.Duration = aliWorkload(t), 0.8, 200_000
	a, b := run(t, cfg), run(t, cfg)
	require.Equal(t, "pair", a.cfg.Conn)
	assert.Equal(t, a.Flows(), b.Flows())
	sa, sb := a.Stats(), b.Stats()
	sa.Wall, sb.Wall = 0, 0
	assert.Equal(t, sa, sb)
	cfg.Seed = 2
	assert.NotEqual(t, a.Flows(), run(t, cfg).Flows())
}

func TestConnModelValidated(t *testing.T) {
	cfg := k4("rdmacell")
	cfg.Flows = []Flow{{Src: 0, Dst: 1, Size: 1}}
	cfg.Conn = "qp"
	_, err := New(cfg)
	assert.ErrorContains(t, err, `connection model "qp"`)
	cfg = collective("rdmacell", "alltoall", 1<<16)
	cfg.Conn = "flow"
	_, err = New(cfg)
	assert.ErrorContains(t, err, "pair connections")
}

// A baseline in the pair model: one QP per host pair carries the pair's
// flows one after the other, and every byte is acknowledged once.
func TestBaselinePairModelOneQPPerPair(t *testing.T) {
	cfg := k4("ecmp")
	cfg.Conn, cfg.PFC = "pair", true
	cfg.Workload, cfg.Load, cfg.Duration = aliWorkload(t), 0.8, 300_000
	s := run(t, cfg)
	qpOf := map[int32]int32{}
	var total int64
	for i, fl := range s.Flows() {
		require.NotZero(t, fl.Finish, "flow %d", i)
		k := fl.Src*int32(s.f.hosts) + fl.Dst
		if q, ok := qpOf[k]; ok {
			require.Equal(t, q, fl.qp, "flow %d: its pair's QP", i)
		}
		qpOf[k] = fl.qp
		total += fl.Size
	}
	assert.Len(t, s.qps, len(qpOf), "one QP per host pair")
	assert.Equal(t, total, s.Stats().BytesAcked)
	cfg.Conn = ""
	assert.Equal(t, "flow", run(t, cfg).cfg.Conn, "by default a baseline's flows have QPs of their own")
}
