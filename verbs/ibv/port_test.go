package ibv

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestChoosePort(t *testing.T) {
	cands := []portCandidate{
		{"mlx5_0", 1, 1, linkLayerEthernet}, // DOWN
		{"mlx5_1", 1, portActive, linkLayerEthernet},
		{"mlx5_1", 2, portActive, linkLayerEthernet},
		{"ib0", 1, portActive, linkLayerInfiniBand},
	}
	tests := []struct {
		name   string
		device string
		port   int
		want   portCandidate
	}{
		{"first active", "", 0, cands[1]},
		{"named device", "ib0", 0, cands[3]},
		{"named port", "mlx5_1", 2, cands[2]},
		{"port of any device", "", 2, cands[2]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := choosePort(cands, tt.device, tt.port)
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}

	_, err := choosePort(cands, "mlx5_0", 0)
	require.ErrorIs(t, err, ErrNoDevice, "a device whose port is down")
	require.Contains(t, err.Error(), "mlx5_0 port 1 DOWN (Ethernet)", "the error lists what was found")
	require.Contains(t, err.Error(), `device "mlx5_0"`, "the error says what was wanted")

	_, err = choosePort(cands, "mlx5_9", 0)
	require.ErrorIs(t, err, ErrNoDevice)

	_, err = choosePort(nil, "", 0)
	require.ErrorIs(t, err, ErrNoDevice)
	require.Contains(t, err.Error(), "found no RDMA device")
}
