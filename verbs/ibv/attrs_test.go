package ibv

import (
	"testing"
	"time"

	"github.com/rdmacell/rdmacell/verbs"
	"github.com/stretchr/testify/require"
)

func TestAckTimeoutCode(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want uint8
	}{
		{0, 18},           // the 1s default: 4.096µs × 2^18 ≈ 1.07s
		{time.Second, 18}, // 2^17 would be 0.54s, too short
		{100 * time.Millisecond, 15},
		{1, 1}, // the shortest the field expresses: 8.192µs
		{8192 * time.Nanosecond, 1},
		{8193 * time.Nanosecond, 2},
		{ackTimeoutUnit << 31, 31},
	}
	for _, tt := range tests {
		got, err := ackTimeoutCode(tt.d)
		require.NoError(t, err, "%v", tt.d)
		require.Equal(t, tt.want, got, "code of %v", tt.d)
		if tt.d > 0 {
			require.GreaterOrEqual(t, ackTimeoutUnit<<got, tt.d, "code %d waits at least %v", got, tt.d)
		}
	}
	for _, d := range []time.Duration{-1, ackTimeoutUnit<<31 + 1} {
		_, err := ackTimeoutCode(d)
		require.ErrorIs(t, err, verbs.ErrInvalidArgument, "%v", d)
	}
}

func TestRNRTimerCode(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want uint8
	}{
		{0, 14}, // the 1ms default: 1.28ms
		{time.Millisecond, 14},
		{1280 * time.Microsecond, 14},
		{1, 1},
		{10 * time.Microsecond, 1},
		{11 * time.Microsecond, 2},
		{200 * time.Millisecond, 29},
		{491520 * time.Microsecond, 31},
		{500 * time.Millisecond, 0}, // code 0 is the longest, 655.36ms
		{rnrTimerCode0, 0},
	}
	for _, tt := range tests {
		got, err := rnrTimerCode(tt.d)
		require.NoError(t, err, "%v", tt.d)
		require.Equal(t, tt.want, got, "code of %v", tt.d)
	}
	for i := 2; i < len(rnrTimerSteps); i++ {
		require.Greater(t, rnrTimerSteps[i], rnrTimerSteps[i-1], "RNR timer steps increase at code %d", i)
	}
	for _, d := range []time.Duration{-1, rnrTimerCode0 + 1} {
		_, err := rnrTimerCode(d)
		require.ErrorIs(t, err, verbs.ErrInvalidArgument, "%v", d)
	}
}

func TestQPParams(t *testing.T) {
	lim := deviceLimits{maxQPWR: 4096, maxSGE: 16}
	p, err := qpParamsOf(&verbs.QPConfig{}, lim)
	require.NoError(t, err)
	require.Equal(t, qpParams{maxSendWR: 1024, maxRecvWR: 1024, maxSGE: 4, timeout: 18, minRNR: 14}, p, "defaults")

	p, err = qpParamsOf(&verbs.QPConfig{MaxSendWR: 4, MaxRecvWR: 8, MaxSGE: 2, Timeout: 100 * time.Millisecond,
		RetryCount: 7, RNRRetry: 7, MinRNRTimer: 200 * time.Millisecond, FlowLabel: 0xfffff}, lim)
	require.NoError(t, err)
	require.Equal(t, qpParams{maxSendWR: 4, maxRecvWR: 8, maxSGE: 2, timeout: 15, retry: 7, rnrRetry: 7, minRNR: 29, flowLabel: 0xfffff}, p)

	bad := []struct {
		name string
		cfg  verbs.QPConfig
	}{
		{"send queue beyond the device", verbs.QPConfig{MaxSendWR: 4096}},
		{"receive queue beyond the device", verbs.QPConfig{MaxRecvWR: 4097}},
		{"negative queue", verbs.QPConfig{MaxSendWR: -1}},
		{"too many SGEs", verbs.QPConfig{MaxSGE: 17}},
		{"retry count of 8", verbs.QPConfig{RetryCount: 8}},
		{"negative retry count", verbs.QPConfig{RetryCount: -1}},
		{"RNR retry of 8", verbs.QPConfig{RNRRetry: 8}},
		{"flow label of 21 bits", verbs.QPConfig{FlowLabel: 0x100000}},
		{"negative timeout", verbs.QPConfig{Timeout: -time.Second}},
		{"RNR timer beyond 655ms", verbs.QPConfig{MinRNRTimer: time.Second}},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			_, err := qpParamsOf(&tt.cfg, lim)
			require.ErrorIs(t, err, verbs.ErrInvalidArgument)
		})
	}
}

func TestMTU(t *testing.T) {
	for _, b := range []int{256, 512, 1024, 2048, 4096} {
		e, ok := mtuEnum(b)
		require.True(t, ok, "%d", b)
		require.Equal(t, b, mtuBytes(e), "round trip of %d", b)
	}
	for _, b := range []int{0, 128, 1500, 8192} {
		_, ok := mtuEnum(b)
		require.False(t, ok, "%d", b)
	}
	require.Zero(t, mtuBytes(0))
	require.Zero(t, mtuBytes(6))
}
