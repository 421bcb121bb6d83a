package cell

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSerialArithmetic(t *testing.T) {
	for _, tc := range []struct {
		a, b   uint32
		diff   int32
		before bool
	}{
		{5, 3, 2, false},
		{3, 5, -2, true},
		{0, 1<<32 - 1, 1, false},
		{1<<32 - 1, 0, -1, true},
		{10, 1<<32 - 10, 20, false},
		{7, 7, 0, false},
	} {
		require.Equal(t, tc.diff, seqDiff(tc.a, tc.b), "%d - %d", tc.a, tc.b)
		require.Equal(t, tc.before, seqBefore(tc.a, tc.b), "%d before %d", tc.a, tc.b)
	}
	require.True(t, inWindow(2, 1<<32-3, 8))
	require.True(t, inWindow(1<<32-3, 1<<32-3, 8))
	require.False(t, inWindow(5, 1<<32-3, 8))
	require.False(t, inWindow(1<<32-4, 1<<32-3, 8))
}

// The RTT estimator follows RFC 6298 with α = 1/8, β = 1/4 and
// T_soft = RTT_avg + 4·RTT_var, floored.
func TestEstimator(t *testing.T) {
	var e estimator
	e.init(1000, 500)
	require.Equal(t, int64(1000+4*500), e.softTimeout(), "before samples: 3 × the initial RTT")

	e.sample(800) // first sample: avg = 800, var = 400
	require.Equal(t, int64(800), e.srtt)
	require.Equal(t, int64(400), e.rttvar)
	e.sample(1600) // var += (|1600−800| − 400)/4 = 500; avg += (1600−800)/8 = 900
	require.Equal(t, int64(500), e.rttvar)
	require.Equal(t, int64(900), e.srtt)
	require.Equal(t, int64(900+4*500), e.softTimeout())

	for range 200 {
		e.sample(100)
	}
	require.Equal(t, int64(500), e.softTimeout(), "the floor holds")

	e.rate(1000, 1000) // 1 byte/ns
	require.Equal(t, int64(1e9), e.bw)
	e.rate(1000, 2000)
	require.Equal(t, int64(1e9-(1e9-5e8)/4), e.bw)
	e.rate(0, 0) // ignored
	require.Equal(t, int64(875e6), e.bw)
}

// The BDP counts what the path holds at its best RTT, less the cell that
// RTT timed, so that the cell size does not feed on itself.
func TestEstimatorBDP(t *testing.T) {
	var e estimator
	e.init(1000, 0)
	require.Zero(t, e.bdp())
	e.rate(10000, 10000) // 1 byte/ns
	e.minimum(15000, 10000)
	e.minimum(12000, 10000) // 10 µs on the wire, 2 µs of delay
	e.minimum(13000, 4000)
	require.Equal(t, int64(2000), e.bdp())
}
