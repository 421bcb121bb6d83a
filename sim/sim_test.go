package sim

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// aliCDF is the AliStorage2019 flow-size CDF (bytes, cumulative percent).
const aliCDF = `0 0
4000 22.93
8000 69.21
16000 80.61
32000 90.47
64000 93.53
128000 96.77
256000 97.53
2000000 100
`

func aliWorkload(t testing.TB) *Workload {
	w, err := ParseWorkload("ali", strings.NewReader(aliCDF))
	require.NoError(t, err)
	return w
}

func k4(scheme string) Config {
	return Config{Topology: Topology{Kind: "fattree", K: 4}, Scheme: scheme, Seed: 1}
}

func run(t testing.TB, cfg Config) *Sim {
	s, err := New(cfg)
	require.NoError(t, err)
	s.Run()
	return s
}

func TestWorkloadMeanAndSamples(t *testing.T) {
	w := aliWorkload(t)
	// The ConWeave traffic generator's average for this CDF is 40,870 B.
	assert.InDelta(t, 40870, w.Mean(), 100)
	assert.Equal(t, int64(4000), w.Sample(0.2293))
	assert.Equal(t, int64(6000), w.Sample((0.2293+0.6921)/2))
	_, err := ParseWorkload("bad", strings.NewReader("0 0\n10 50\n"))
	assert.Error(t, err)
}

func TestLoneFlowAtLineRate(t *testing.T) {
	for _, sc := range Schemes {
		t.Run(sc, func(t *testing.T) {
			cfg := k4(sc)
			cfg.Flows = []Flow{{Src: 0, Dst: 15, Size: 1_000_000, Start: 10_000}}
			cfg.Duration = 1_000_000
			s := run(t, cfg)
			fl := s.Flows()[0]
			require.NotZero(t, fl.Finish)
			fct := float64(fl.Finish - fl.Start)
			ideal := s.cfg.Ideal(fl.Size, s.f.hops(0, 15))
			assert.InDelta(t, 1, fct/ideal, 0.01, "FCT %v vs ideal %v", fct, ideal)
			r := s.Result()
			// HULA's probes take a little of the links.
			assert.InDelta(t, 1.0, r.All.Avg, 0.01)
			assert.Zero(t, r.Stats.Drops)
		})
	}
}

func TestBytesConserved(t *testing.T) {
	w := aliWorkload(t)
	for _, tc := range []struct {
		name   string
		buffer int64
		lossy  bool
	}{{"deep buffer", 0, false}, {"shallow buffer", 12_000, true}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := k4("ecmp")
			cfg.Workload, cfg.Load, cfg.Duration, cfg.BufferPerPort = w, 0.6, 300_000, tc.buffer
			cfg.RTO = 100_000
			s := run(t, cfg)
			var total int64
			for _, f := range s.Flows() {
				require.NotZero(t, f.Finish, "flow %d → %d of %d bytes never finished", f.Src, f.Dst, f.Size)
				total += f.Size
			}
			st := s.Stats()
			assert.Equal(t, total, st.BytesAcked, "every byte acknowledged exactly once")
			if !tc.lossy {
				assert.Zero(t, st.Drops)
				return
			}
			assert.NotZero(t, st.Drops)
			// Every loss was sent again: what left the hosts is what was
			// delivered, plus the retransmissions.
			assert.GreaterOrEqual(t, st.Retransmits, st.Drops)
			assert.Greater(t, st.BytesSent, total+int64(st.DropBytes)-1)
		})
	}
}

func TestSameSeedSameResult(t *testing.T) {
	w := aliWorkload(t)
	for _, sc := range []string{"conga", "rdmacell"} {
		cfg := k4(sc)
		cfg.Workload, cfg.Load, cfg.Duration = w, 0.5, 200_000
		a, b := run(t, cfg), run(t, cfg)
		assert.Equal(t, a.Flows(), b.Flows(), sc)
		sa, sb := a.Stats(), b.Stats()
		sa.Wall, sb.Wall = 0, 0
		assert.Equal(t, sa, sb, sc)
		cfg.Seed = 2
		c := run(t, cfg)
		assert.NotEqual(t, a.Flows(), c.Flows(), sc)
	}
}

// Two hosts under one ToR send 1 MB each to a host of the next ToR at
// once: the last ToR's port to the receiver is the bottleneck, and round robin between the
// two arrivals halves it, so both finish when 2 × 1 MB (with headers)
// has crossed it at line rate, plus one base RTT.
func TestTwoFlowsShareLink(t *testing.T) {
	cfg := k4("ecmp")
	cfg.NoDCQCN = true
	const size = 1_000_000
	cfg.Flows = []Flow{{Src: 0, Dst: 2, Size: size}, {Src: 1, Dst: 2, Size: size}}
	cfg.Duration = 1_000_000
	s := run(t, cfg)
	wire := float64(2 * (size + size/1000*48))
	h := float64(s.f.hops(0, 2))
	want := wire*8/100 + h*2*1000 + h*80 // serialization + propagation both ways + one MTU per hop
	for _, f := range s.Flows() {
		assert.InDelta(t, want, float64(f.Finish-f.Start), 0.01*want)
	}
}
