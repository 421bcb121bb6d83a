package sim

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An incast on a K=4 fat-tree with small buffers and no rate control:
// twelve hosts of the other pods send 300 KB each to host 0 at once,
// 3.6 MB into one 100 Gb/s port behind 160 KB of buffer per switch.
// Without PFC the buffers overflow and Go-Back-N recovers every loss;
// with PFC the switches pause their neighbours back to the senders and
// nothing is dropped.
func TestPFCIncast(t *testing.T) {
	incast := func(pfc bool) *Sim {
		cfg := k4("ecmp")
		cfg.NoDCQCN, cfg.PFC = true, pfc
		cfg.BufferPerPort = 40_000
		cfg.RTO = 100_000
		for h := int32(4); h < 16; h++ {
			cfg.Flows = append(cfg.Flows, Flow{Src: h, Dst: 0, Size: 300_000})
		}
		cfg.Duration = 1_000_000
		return run(t, cfg)
	}
	for _, pfc := range []bool{false, true} {
		s := incast(pfc)
		var total int64
		for _, f := range s.Flows() {
			require.NotZero(t, f.Finish, "PFC %v: flow %d → %d never finished", pfc, f.Src, f.Dst)
			total += f.Size
		}
		st := s.Stats()
		assert.Equal(t, total, st.BytesAcked, "PFC %v: every byte acknowledged exactly once", pfc)
		if pfc {
			assert.Zero(t, st.Drops, "lossless")
			assert.Zero(t, st.Timeouts)
			assert.NotZero(t, st.Pauses, "the incast must have paused someone")
			// Everything buffered was released and every pause lifted.
			for i := range s.f.ports {
				pt := &s.f.ports[i]
				assert.Zero(t, pt.inBytes+pt.inHdrm, "port %d still charged", i)
				assert.False(t, pt.xoff || pt.paused, "port %d still paused", i)
			}
			continue
		}
		assert.NotZero(t, st.Drops, "lossy: the incast overflows the buffers")
		assert.Zero(t, st.Pauses)
		assert.GreaterOrEqual(t, st.Retransmits, st.Drops, "every loss was sent again")
	}
}

func TestPFCHeadroomLeavesABuffer(t *testing.T) {
	cfg := k4("ecmp")
	cfg.PFC, cfg.BufferPerPort = true, 20_000
	cfg.Flows = []Flow{{Src: 0, Dst: 1, Size: 1}}
	_, err := New(cfg)
	assert.ErrorContains(t, err, "headroom")
}

// A switch decides to pause its neighbour and, before the PAUSE has left
// (its port is busy with a packet), to resume it: the neighbour must end
// up sending, not paused for good.
func TestPFCResumeOvertakesPause(t *testing.T) {
	cfg := k4("ecmp")
	cfg.PFC = true
	cfg.Flows = []Flow{{Src: 0, Dst: 15, Size: 1, Start: 10_000}}
	s, err := New(cfg)
	require.NoError(t, err)
	tor := s.f.nodes[0].tor
	pi := s.f.nodes[tor].ports[len(s.f.nodes[tor].ports)-1] // an uplink
	s.f.ports[pi].busyUntil = 500                           // mid-packet
	s.pfcSend(pi, true)
	s.pfcSend(pi, false)
	s.Run()
	require.NotZero(t, s.Flows()[0].Finish)
	assert.False(t, s.f.ports[s.f.ports[pi].peerPort].paused, "the neighbour was resumed last")
}

// The lossless floor of T_soft by hand, for the paper's K=8 setting: a
// 234,000 B cell is 234 packets of 1,048 B on the wire, 19,618,560 ns at
// DCQCN's 0.1 Gb/s; six links, each behind a 2 MiB port buffer at
// 100 Gb/s (167,772.16 ns) with 1 µs of propagation each way: 1,018,632.96
// ns, rounded up.
func TestLosslessSoftFloor(t *testing.T) {
	cfg := Config{Scheme: "rdmacell", PFC: true, Flows: []Flow{{Src: 0, Dst: 1, Size: 1}}}
	s, err := New(cfg)
	require.NoError(t, err)
	assert.Equal(t, 6, s.f.diameter())
	assert.Equal(t, int64(19_618_560+1_018_633), s.cfg.MinSoftTimeout)

	cfg.PFC = false
	s, err = New(cfg)
	require.NoError(t, err)
	assert.Equal(t, int64(1_000_000), s.cfg.MinSoftTimeout, "lossy: the engine's 1 ms")

	cfg.PFC, cfg.MinSoftTimeout = true, 3_000_000
	s, err = New(cfg)
	require.NoError(t, err)
	assert.Equal(t, int64(3_000_000), s.cfg.MinSoftTimeout, "a floor given is kept")

	cfg = Config{Topology: Topology{Kind: "leafspine", Leaves: 2, Spines: 2, HostsPerLeaf: 2}, Scheme: "rdmacell",
		PFC: true, CellBDP: -1, Flows: []Flow{{Src: 0, Dst: 3, Size: 1}}}
	s, err = New(cfg)
	require.NoError(t, err)
	assert.Equal(t, 4, s.f.diameter())
	// Adaptive cells: the engine's largest, 4 MiB, is 4,195 packets,
	// 351,708,800 ns; four links, 679,088.64 ns.
	assert.Equal(t, int64(351_708_800+679_089), s.cfg.MinSoftTimeout)
}

// K=4 at 80 % load with PFC: RDMACell's soft timeouts used to fire on
// cells that were only slow (their QP paced down by DCQCN, the NIC
// shared by dozens of connections), resetting QPs in a fabric that loses
// nothing. With the lossless floor none fires and nothing is lost; the
// 1 ms floor of the lossy setting, on the same flows, resets QPs.
func TestLosslessNoSpuriousSoftTimeouts(t *testing.T) {
	cfg := k4("rdmacell")
	cfg.PFC, cfg.Workload, cfg.Load = true, aliWorkload(t), 0.8
	cfg.Duration = 1_000_000
	s := run(t, cfg)
	st := s.Stats()
	assert.Zero(t, st.PathResets, "no QP reset in a lossless fabric")
	assert.Zero(t, st.Drops)
	assert.Zero(t, st.Unfinished)
	assert.NotZero(t, st.Pauses, "the case must make PFC pause")

	cfg.MinSoftTimeout = 1_000_000
	st = run(t, cfg).Stats()
	assert.NotZero(t, st.PathResets, "the 1 ms floor times out slow cells")
	assert.Zero(t, st.Drops)
}
