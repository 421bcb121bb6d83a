package sim

// balancer is a load-balancing scheme's switch logic. The default
// (ECMP) does nothing: forward hashes the 5-tuple.
type balancer interface {
	// atSrcTor sees a data packet entering the fabric at its source ToR
	// (a source-routing scheme sets path and rem there).
	atSrcTor(sw, pk int32)
	// atDstTor sees a data packet at its destination ToR; false means the
	// scheme took it (held for reordering).
	atDstTor(sw, pk int32) bool
	// onForward sees a packet leaving switch sw by port out.
	onForward(sw, out int32, p *packet)
	// onTx sees a packet of size bytes put on the wire by port pt.
	onTx(pt *port, size int32)
}

// lbState is what the switches keep per flow: a flow table keyed by the
// 5-tuple has one entry per QP, so it is indexed like the QPs (Sim.lbs),
// apart from them so that schemes without flow state (ECMP, RDMACell)
// keep their QPs small.
type lbState struct {
	path int32 // flowlet's path (LetFlow, CONGA, ConWeave)
	last int64 // last packet seen at the source ToR
	// hop is HULA's per-switch flowlet table, by tier of the switch.
	hop [2]struct {
		sw, port int32
		last     int64
	}
	cw cwState
}

func (l *lbState) reset() {
	held := l.cw.held.buf
	*l = lbState{path: -1}
	l.hop[0].sw, l.hop[1].sw = -1, -1
	l.cw.held.buf = held
}

type ecmpLB struct{}

func (ecmpLB) atSrcTor(int32, int32)           {}
func (ecmpLB) atDstTor(int32, int32) bool      { return true }
func (ecmpLB) onForward(int32, int32, *packet) {}
func (ecmpLB) onTx(*port, int32)               {}

func newBalancer(s *Sim) balancer {
	switch s.cfg.Scheme {
	case "letflow":
		return &letflow{s: s}
	case "conga":
		return newConga(s)
	case "hula":
		s.hula = newHula(s)
		return s.hula
	case "conweave":
		return newConweave(s)
	}
	return ecmpLB{}
}

// flowletGap is the idle time after which LetFlow, CONGA and HULA may
// move a flow to another path.
const flowletGap = 100_000

// letflow picks a uniformly random path for each new flowlet at the
// source ToR.
type letflow struct {
	ecmpLB
	s *Sim
}

func (l *letflow) atSrcTor(sw, pk int32) {
	s := l.s
	p := &s.pl.p[pk]
	st := &s.lbs[p.qp]
	if st.path < 0 || s.now-st.last > flowletGap {
		st.path = int32(s.rng.intn(int(s.f.paths(s.f.torIx[sw], s.f.torIx[p.dstTor]))))
	}
	st.last = s.now
	p.path, p.rem = int16(st.path), int16(st.path)
}
