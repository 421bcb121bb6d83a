package sim

import "math"

// conga is CONGA: per-port discounting rate estimators, path congestion
// collected along the way (max over hops, 3 bits), fed back to the
// source ToR by piggybacking on reverse traffic, and per flowlet the best
// of four consecutive paths from a random offset.
type conga struct {
	s        *Sim
	maxPaths int32
	// from[d][s][path]: congestion of path s→d measured at d; to[s][d]
	// [path]: what d told s about path s→d.
	from, to []congaEnt
}

type congaEnt struct {
	ce uint8
	t  int64
}

const (
	congaTdre  = 50_000
	congaAlpha = 0.2
	congaTau   = 250_000
	congaAge   = 500_000
)

func newConga(s *Sim) *conga {
	c := &conga{s: s}
	T := int32(len(s.f.tors))
	for a := range T {
		for b := range T {
			if a != b {
				c.maxPaths = max(c.maxPaths, s.f.paths(a, b))
			}
		}
	}
	c.maxPaths = max(c.maxPaths, 1)
	c.from = make([]congaEnt, T*T*c.maxPaths)
	c.to = make([]congaEnt, T*T*c.maxPaths)
	return c
}

func (c *conga) ix(a, b, path int32) int32 {
	return (a*int32(len(c.s.f.tors))+b)*c.maxPaths + path
}

// decay brings a port's estimator to now.
func (c *conga) decay(pt *port) {
	if k := (c.s.now - pt.dreT) / congaTdre; k > 0 {
		pt.dre *= math.Pow(1-congaAlpha, float64(k))
		pt.dreT += k * congaTdre
	}
}

// ce quantizes a port's load to CONGA's metric.
func (c *conga) ce(pt *port) uint8 {
	c.decay(pt)
	v := pt.dre * 8 / (c.s.cfg.Gbps * congaTau) * 8
	return uint8(min(v, 255))
}

func (c *conga) onTx(pt *port, size int32) {
	if c.s.f.nodes[pt.node].tier == 0 {
		return
	}
	c.decay(pt)
	pt.dre += float64(size)
}

func (c *conga) onForward(sw, out int32, p *packet) {
	if p.kind == pkData && p.path >= 0 {
		p.ce = max(p.ce, c.ce(&c.s.f.ports[out]))
	}
}

func (c *conga) fresh(e congaEnt) uint8 {
	if c.s.now-e.t > congaAge {
		return 0
	}
	return e.ce
}

func (c *conga) atSrcTor(sw, pk int32) {
	s := c.s
	p := &s.pl.p[pk]
	st := &s.lbs[p.qp]
	a, b := s.f.torIx[sw], s.f.torIx[p.dstTor]
	n := s.f.paths(a, b)
	if st.path < 0 || s.now-st.last > flowletGap {
		hops := s.f.next(sw, b)
		off := int32(s.rng.intn(int(n)))
		best, bestScore, ties := int32(-1), uint8(0), 0
		for k := range min(4, n) {
			path := (off + k) % n
			score := max(c.ce(&s.f.ports[hops[path%int32(len(hops))]]), c.fresh(c.to[c.ix(a, b, path)]))
			switch {
			case best < 0 || score < bestScore:
				best, bestScore, ties = path, score, 1
			case score == bestScore:
				ties++
				if s.rng.intn(ties) == 0 {
					best = path
				}
			}
		}
		st.path = best
	}
	st.last = s.now
	p.path, p.rem, p.ce = int16(st.path), int16(st.path), 0
	// piggyback one random path's congestion, as seen here, for b → a
	fb := int32(s.rng.intn(int(n)))
	p.a, p.fbCE = fb, c.fresh(c.from[c.ix(a, b, fb)]) // feedback path
}

func (c *conga) atDstTor(sw, pk int32) bool {
	s := c.s
	p := &s.pl.p[pk]
	if p.path < 0 {
		return true
	}
	d, src := s.f.torIx[sw], s.f.torIx[p.srcTor]
	c.from[c.ix(d, src, int32(p.path))] = congaEnt{p.ce, s.now}
	if p.a >= 0 { // feedback path
		c.to[c.ix(d, src, p.a)] = congaEnt{p.fbCE, s.now}
	}
	return true
}
