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

// A head copy's token is expected after the path's delay from its post,
// or once its bytes have drained behind the previous token; the margin
// past that is the tokens' usual lateness plus four deviations, floored.
func TestEstimatorExpectation(t *testing.T) {
	var e estimator
	e.init(1000, 100)
	require.Zero(t, e.expect(0, 0, 1000), "nothing measured: no expectation")
	require.Zero(t, e.lateMargin(), "no lateness measured: no margin")

	e.bw, e.delay, e.samples = 1e9, 5000, 2 // 1 byte/ns, 5 µs
	require.Equal(t, int64(15_000), e.expect(10_000, 0, 1000), "an idle path: the delay after the post")
	require.Equal(t, int64(24_000), e.expect(10_000, 20_000, 4000), "a busy path: the bytes behind the previous token")

	e.sampleLate(16_000, 15_000) // first: late 1000, deviation 500
	require.Equal(t, int64(1000+4*500), e.lateMargin())
	e.sampleLate(15_000, 15_000) // on time: deviation += (1000-500)/4, late -= 1000/8
	require.Equal(t, int64(875+4*625), e.lateMargin())
	for range 100 {
		e.sampleLate(15_000, 15_000)
	}
	require.Equal(t, int64(100), e.lateMargin(), "tokens on time: the floor")
	e.sampleLate(1, 0) // no expectation: not a sample
	require.Equal(t, int64(100), e.lateMargin())
}
