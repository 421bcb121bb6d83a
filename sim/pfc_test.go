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
