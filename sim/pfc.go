package sim

// PFC (priority flow control, IEEE 802.1Qbb) for the data class, the way
// the ConWeave simulations configure their Broadcom-style MMU (see the
// modelling notes): every data byte a switch buffers is charged to the
// ingress port it came in by. An ingress port may hold up to a small
// reserve plus a dynamic share, α = 1/16 of the shared pool still free
// (the pool being the switch's buffer less every port's headroom); past
// that its packets go to the port's headroom and the switch sends the
// upstream neighbour a PAUSE. The headroom, 2 · rate · delay + 2 MTU,
// absorbs what the neighbour had already sent or started sending before
// the PAUSE reached it, so nothing is dropped. Once the headroom is empty
// and the port's share is back below the threshold by a resume offset,
// the switch sends RESUME.
//
// Simplification: PAUSE holds until RESUME (XOFF/XON), with no expiring
// quanta to refresh; the control class (ACK, NACK, CNP, probes, scheme
// control packets) is never paused, as in the ConWeave setup where it is
// a strict-priority queue outside PFC.

const (
	pfcAlphaShift = 4  // dynamic threshold α = 1/16
	pfcFrameSize  = 64 // a PAUSE or RESUME frame on the wire
)

// pfcHeadroom is the headroom per ingress port: the bytes in flight on
// the link both ways (the PAUSE travelling up, data still coming down)
// plus three packets: the one the neighbour is in the middle of
// serializing when the PAUSE lands, the one this port is sending
// upstream when it queues the PAUSE (the frame waits for it), and one
// for rounding. The ConWeave MMU reserves two; with two, an 80 % load
// run of 10 ms at K=4 dropped 8 packets of 30 million.
func (c *Config) pfcHeadroom() int64 {
	return int64(2*c.Gbps*float64(c.LinkDelay)/8) + 3*int64(c.MTU+c.Header)
}

// pfcReserve is what an ingress port may hold before it counts against
// the dynamic threshold, and pfcResume the hysteresis below the threshold
// before a paused port is resumed (three packets, as the ConWeave MMU).
func (c *Config) pfcReserve() int64 { return 2 * int64(c.MTU+c.Header) }
func (c *Config) pfcResume() int64  { return 3 * int64(c.MTU+c.Header) }

// pfcThreshold is switch nd's current dynamic threshold.
func (s *Sim) pfcThreshold(nd *node) int64 {
	pool := s.cfg.BufferPerPort*int64(len(nd.ports)) - s.pfcHdrm*int64(len(nd.ports))
	return max(0, pool-nd.used) >> pfcAlphaShift
}

// pfcShared is the part of ingress port in's bytes that counts against
// the threshold.
func (s *Sim) pfcShared(in *port) int64 { return max(0, in.inBytes-s.cfg.pfcReserve()) }

// pfcAdmit charges a data packet of sz bytes to its ingress port at
// switch nd, in its shared share or its headroom; false means the
// headroom too is full and the packet is dropped (never, when the
// headroom is sized right).
func (s *Sim) pfcAdmit(nd *node, inPort int32, sz int64) bool {
	in := &s.f.ports[inPort]
	if in.inBytes+sz-s.cfg.pfcReserve() > s.pfcThreshold(nd) {
		if in.inHdrm+sz > s.pfcHdrm {
			return false
		}
		in.inHdrm += sz
	} else {
		in.inBytes += sz
		nd.used += sz
	}
	if !in.xoff && (in.inHdrm > 0 || s.pfcShared(in) >= s.pfcThreshold(nd)) {
		in.xoff = true
		s.pfcSend(inPort, true)
	}
	return true
}

// pfcRelease uncharges a departing data packet from its ingress port,
// headroom first, and resumes the upstream neighbour once the port is
// back under the threshold.
func (s *Sim) pfcRelease(nd *node, inPort int32, sz int64) {
	in := &s.f.ports[inPort]
	h := min(in.inHdrm, sz)
	in.inHdrm -= h
	in.inBytes -= sz - h
	nd.used -= sz - h
	if in.xoff && in.inHdrm == 0 {
		if sh := s.pfcShared(in); sh == 0 || sh+s.cfg.pfcResume() <= s.pfcThreshold(nd) {
			in.xoff = false
			s.pfcSend(inPort, false)
		}
	}
}

// pfcSend has port pi, the reverse direction of the ingress link, tell
// its neighbour to pause (or resume). A MAC control frame leaves before
// anything queued, so that the headroom need only cover the packet on
// the wire; and only the latest decision is sent: a RESUME decided while
// the PAUSE still waits replaces it, as two frames queued ahead of
// everything else would leave in the wrong order and pause the
// neighbour for good.
func (s *Sim) pfcSend(pi int32, pause bool) {
	pt := &s.f.ports[pi]
	pt.pfcOut = pfcResumeOut
	if pause {
		pt.pfcOut = pfcPauseOut
	}
	s.kick(pi)
}

// What a port's next PFC frame says.
const (
	pfcNone int8 = iota
	pfcPauseOut
	pfcResumeOut
)

// pfcFrameOut makes the frame port pt has to send.
func (s *Sim) pfcFrameOut(pt *port) int32 {
	pk := s.pl.get()
	p := &s.pl.p[pk]
	p.kind, p.size, p.src, p.dst, p.qp = pkPause, pfcFrameSize, -1, -1, -1
	if pt.pfcOut == pfcPauseOut {
		p.a = 1
		s.st.Pauses++
	}
	pt.pfcOut = pfcNone
	s.st.CtrlPkts++
	return pk
}

// pfcFrame acts on a PAUSE or RESUME that reached the node owning port
// pi: that port, which leads back to the sender of the frame, stops or
// resumes its data class.
func (s *Sim) pfcFrame(pi, pk int32) {
	pt := &s.f.ports[pi]
	was := pt.paused
	pt.paused = s.pl.p[pk].a == 1
	s.pl.put(pk)
	switch {
	case pt.paused && !was:
		pt.pausedAt = s.now
	case !pt.paused && was:
		s.st.PausedNs += s.now - pt.pausedAt
		s.kick(pi)
	}
}
