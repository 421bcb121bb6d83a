package sim

// hula is HULA: every ToR floods probes up the tree every 5 µs; each
// switch keeps, per destination ToR, the next hop whose path had the
// least utilization (probes carry the max link utilization seen), and
// data does hop-by-hop flowlet switching toward it, ECMP until a table
// entry exists.
type hula struct {
	ecmpLB
	s     *Sim
	T     int
	best  []hulaEnt // [switch*T + dst ToR]
	flood []int64   // last re-flood per [switch*T + origin ToR]
}

type hulaEnt struct {
	port int32
	util int32
	t    int64
}

const (
	hulaPeriod    = 5_000
	hulaKeepAlive = 30_000
	hulaTau       = 15_000
	hulaProbeSize = 64
)

func newHula(s *Sim) *hula {
	T := len(s.f.tors)
	sw := len(s.f.nodes) - s.f.hosts
	h := &hula{s: s, T: T, best: make([]hulaEnt, sw*T), flood: make([]int64, sw*T)}
	for i := range h.best {
		h.best[i].port = -1
		h.flood[i] = -hulaPeriod
	}
	for i, t := range s.f.tors {
		s.ev.push(int64(i)*hulaPeriod/int64(T), evProbe, t, 0)
	}
	return h
}

func (h *hula) ix(sw int32, t int32) int { return int(sw-int32(h.s.f.hosts))*h.T + int(t) }

// util is a port's utilization on HULA's 0..255 scale, from the EWMA
// U ← size + U·(1 − Δt/τ).
func (h *hula) decay(pt *port) {
	dt := h.s.now - pt.utilT
	if dt > 0 {
		pt.util *= max(0, 1-float64(dt)/hulaTau)
		pt.utilT = h.s.now
	}
}

func (h *hula) util(pt *port) int32 {
	h.decay(pt)
	return int32(min(255, pt.util*8/(h.s.cfg.Gbps*hulaTau)*256))
}

func (h *hula) onTx(pt *port, size int32) {
	if h.s.f.nodes[pt.node].tier != 0 {
		h.decay(pt)
		pt.util += float64(size)
	}
}

// originate sends ToR sw's probes on its uplinks.
func (h *hula) originate(sw int32) {
	s := h.s
	for _, pi := range s.f.nodes[sw].ports {
		if s.f.ports[pi].up {
			h.send(pi, s.f.torIx[sw], 0)
		}
	}
	if s.left > 0 {
		s.ev.push(s.now+hulaPeriod, evProbe, sw, 0)
	}
}

func (h *hula) send(pi int32, origin, util int32) {
	s := h.s
	pk := s.pl.get()
	p := &s.pl.p[pk]
	p.kind, p.a, p.b, p.size = pkProbe, origin, util, hulaProbeSize
	p.src, p.dst, p.qp = -1, -1, -1
	s.st.CtrlPkts++
	s.enqueue(pi, pk)
}

// recv handles a probe at switch sw that came in by port in.
func (h *hula) recv(sw, pk, in int32) {
	s := h.s
	p := s.pl.p[pk]
	s.pl.put(pk)
	if s.f.tors[p.a] == sw {
		return
	}
	u := max(p.b, h.util(&s.f.ports[in]))
	e := &h.best[h.ix(sw, p.a)]
	if e.port < 0 || e.port == in || s.now-e.t > hulaKeepAlive || u < e.util {
		*e = hulaEnt{port: in, util: u, t: s.now}
	}
	fi := h.ix(sw, p.a)
	if s.now-h.flood[fi] < hulaPeriod {
		return
	}
	h.flood[fi] = s.now
	fromBelow := !s.f.ports[in].up
	for _, po := range s.f.nodes[sw].ports {
		pt := &s.f.ports[po]
		if po == in || s.f.nodes[pt.peer].tier == 0 || (pt.up && !fromBelow) {
			continue
		}
		h.send(po, p.a, u)
	}
}

// choose picks data packet p's next hop at switch sw among hops.
func (h *hula) choose(sw int32, p *packet, hops []int32) int32 {
	s := h.s
	lvl := min(int(s.f.nodes[sw].tier)-1, 1)
	fe := &s.lbs[p.qp].hop[lvl]
	if fe.sw == sw && s.now-fe.last < flowletGap {
		fe.last = s.now
		return fe.port
	}
	out := int32(-1)
	if e := h.best[h.ix(sw, s.f.torIx[p.dstTor])]; e.port >= 0 && s.now-e.t <= hulaKeepAlive {
		for _, x := range hops {
			if x == e.port {
				out = x
			}
		}
	}
	if out < 0 {
		out = hops[s.ecmp(sw, p)%uint32(len(hops))]
	}
	fe.sw, fe.port, fe.last = sw, out, s.now
	return out
}
