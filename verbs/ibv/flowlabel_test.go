package ibv

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFlowLabel(t *testing.T) {
	for _, pair := range [][2]uint32{{0, 0}, {1, 2}, {0x11, 0x2a7}, {0xffffff, 1}, {123456, 654321}} {
		a, b := pair[0], pair[1]
		fl := FlowLabel(a, b)
		require.Equal(t, fl, FlowLabel(b, a), "both ends of (%d, %d) derive the same label", a, b)
		require.NotZero(t, fl, "label of (%d, %d)", a, b)
		require.LessOrEqual(t, fl, uint32(flowLabelMask), "20 bits")
		require.Equal(t, fl, FlowLabel(a, b), "deterministic")
	}
}

func TestUDPSourcePort(t *testing.T) {
	tests := []struct {
		fl   uint32
		want uint16
	}{
		{0, 0xc000},
		{1, 0xc001},
		{0x3fff, 0xffff},
		{0x4000, 0xc001}, // the upper six bits fold onto the lower 14
		{0xfffff, 0xffc0},
		{0x1fffff, 0xffc0}, // bits beyond 20 are not part of a label
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, UDPSourcePort(tt.fl), "source port of label %#x", tt.fl)
	}
}

// TestFlowLabelsDistinctPorts: QPs created in a row towards one peer (the
// paths of one connection) get distinct source ports, and an independent
// device at the other end derives the same labels.
func TestFlowLabelsDistinctPorts(t *testing.T) {
	const paths = 256
	peerA, peerB := peerKey{0: 0xa}, peerKey{0: 0xb}
	var here, there flowLabels
	ports := map[uint16]bool{}
	agree := 0
	for i := range uint32(paths) {
		l, r := 0x100+i, 0x9000+i
		fl := here.assign(peerB, l, r, 0)
		require.NotZero(t, fl)
		sp := UDPSourcePort(fl)
		require.False(t, ports[sp], "path %d reuses source port %#x", i, sp)
		ports[sp] = true
		if there.assign(peerA, r, l, 0) == fl {
			agree++
		}
	}
	// Both ends agree unless a collision made one of them step.
	require.Greater(t, agree, paths*3/4, "labels both ends agree on")
}

func TestFlowLabelsCollision(t *testing.T) {
	peer := peerKey{1}
	var f flowLabels
	derived := FlowLabel(7, 9)
	// A fixed label is used as given, even on a taken port.
	require.Equal(t, derived, f.assign(peer, 1, 2, derived))
	require.Equal(t, derived, f.assign(peer, 3, 4, derived))

	stepped := f.assign(peer, 7, 9, 0)
	require.NotEqual(t, UDPSourcePort(derived), UDPSourcePort(stepped), "a derived label steps off a taken port")
	require.Equal(t, derived&^(1<<udpSportBits-1), stepped&^(1<<udpSportBits-1), "stepping keeps the upper bits")

	// Another peer's ports do not count.
	require.Equal(t, derived, f.assign(peerKey{2}, 7, 9, 0))

	f.release(peer, derived)
	f.release(peer, derived)
	f.release(peer, stepped)
	require.Equal(t, derived, f.assign(peer, 7, 9, 0), "released ports are free again")
	f.release(peer, derived)
	f.release(peerKey{2}, derived)
	require.Empty(t, f.used, "nothing left after every release")
}
