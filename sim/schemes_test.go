package sim

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// srcPacket makes a data packet of QP qi as it enters the fabric.
func srcPacket(s *Sim, qi int32) int32 {
	q := &s.qps[qi]
	pk := s.pl.get()
	p := &s.pl.p[pk]
	p.kind, p.qp, p.src, p.dst = pkData, qi, q.src, q.dst
	p.srcTor, p.dstTor = int16(s.f.nodes[q.src].tor), int16(s.f.nodes[q.dst].tor)
	return pk
}

func TestLetFlowMovesOnlyAfterAGap(t *testing.T) {
	cfg := k4("letflow")
	cfg.Flows = []Flow{{Src: 0, Dst: 15, Size: 1}}
	s, err := New(cfg)
	require.NoError(t, err)
	qi := s.newQP(0, 15)
	tor := s.f.nodes[0].tor
	path := func() int32 {
		pk := srcPacket(s, qi)
		s.lb.atSrcTor(tor, pk)
		return int32(s.pl.p[pk].path)
	}
	moved := 0
	cur := path()
	for i := range 200 {
		s.now += 50_000 // within the flowlet gap: same path
		require.Equal(t, cur, path(), "step %d", i)
		s.now += 2 * flowletGap // a gap: a fresh random path
		if p := path(); p != cur {
			moved++
			cur = p
		}
	}
	assert.Greater(t, moved, 100, "a new flowlet picks among 4 paths at random")
}

func TestCongaPrefersTheLessLoadedPath(t *testing.T) {
	cfg := k4("conga")
	cfg.Flows = []Flow{{Src: 0, Dst: 15, Size: 1}}
	s, err := New(cfg)
	require.NoError(t, err)
	tor := s.f.nodes[0].tor
	hops := s.f.next(tor, s.f.torIx[s.f.nodes[15].tor])
	require.Len(t, hops, 2)
	// The first uplink is busy: paths leaving by it (even ones) score 7+.
	s.f.ports[hops[0]].dre = 2e6
	for range 50 {
		qi := s.newQP(0, 15)
		pk := srcPacket(s, qi)
		s.lb.atSrcTor(tor, pk)
		assert.Equal(t, int16(1), s.pl.p[pk].path%2, "CONGA must leave by the idle uplink")
	}
}

func TestConWeaveReordersAtTheDestination(t *testing.T) {
	cfg := k4("conweave")
	cfg.Workload, cfg.Load, cfg.Duration = aliWorkload(t), 0.6, 500_000
	s := run(t, cfg)
	st := s.Stats()
	assert.NotZero(t, st.Reordered, "rerouted packets that overtook their TAIL were held")
	for _, f := range s.Flows() {
		require.NotZero(t, f.Finish)
	}
	// Without the destination ToR's queue, the same reroutes arrive out
	// of order and cost Go-Back-N: ConWeave must see fewer NACKs than a
	// per-packet reroute would.
	assert.Less(t, st.Nacks, st.Reordered)
}

// Two leaves, two spines, one host each: a 4 MB RDMACell flow over 4 QPs.
// With the links through spine 0 made 10× slower, the adaptive policy
// puts fewer bytes on them than spraying does (spraying too sends less
// there than half, as it waits for the slow path's credits). Since the
// policy ranks paths by their queue-free delay the margin here is small
// (0.23 against 0.29); the engine's own scenario tests hold it to far
// below a fair share.
func TestRDMACellMovesCellsOffASlowPath(t *testing.T) {
	share := func(scheme string) float64 {
		cfg := Config{Topology: Topology{Kind: "leafspine", Leaves: 2, Spines: 2, HostsPerLeaf: 1}, Scheme: scheme, Seed: 1,
			Flows: []Flow{{Src: 0, Dst: 1, Size: 4_000_000}}, Duration: 10_000_000, CellBDP: 0.5}
		s, err := New(cfg)
		require.NoError(t, err)
		leaf := s.f.nodes[0].tor
		up := s.f.next(leaf, s.f.torIx[s.f.nodes[1].tor])
		slow := s.f.ports[up[0]].peer
		for i := range s.f.ports {
			if pt := &s.f.ports[i]; pt.node == slow || pt.peer == slow {
				pt.psPerByte *= 10
			}
		}
		s.Run()
		require.NotZero(t, s.Flows()[0].Finish)
		a, b := s.f.ports[up[0]].txBytes, s.f.ports[up[1]].txBytes
		require.NotZero(t, a, "the hash puts at least one QP on each spine")
		require.NotZero(t, b)
		return float64(a) / float64(a+b)
	}
	spray, adaptive := share("rdmacell-spray"), share("rdmacell")
	assert.Less(t, adaptive, spray, "adaptive %.2f of the bytes on the slow spine, spray %.2f", adaptive, spray)
}

// A connection per flow never holds more cells than its flow: the
// engines get the smallest window and receive depth that hold the
// largest flow's (here 3 cells of 234,000 B), which clear less on reuse.
// A pair connection carries any number of flows: it keeps the engine's
// 32 and 16.
func TestCellEnginesSizedToFlows(t *testing.T) {
	cfg := k4("rdmacell")
	cfg.Flows = []Flow{{Src: 0, Dst: 15, Size: 500_000}, {Src: 1, Dst: 14, Size: 4000}}
	cfg.Conn = "flow"
	s, err := New(cfg)
	require.NoError(t, err)
	assert.Equal(t, int64(234_000), s.cells.cellSize)
	assert.Equal(t, 3, s.cells.depth)
	assert.Equal(t, 4, s.cells.window)
	cfg.Conn = "pair"
	s, err = New(cfg)
	require.NoError(t, err)
	assert.Equal(t, 16, s.cells.depth)
	assert.Equal(t, 32, s.cells.window)
}
