package driver

import "fmt"

// The peer's messages on the control channel, and what they do to the
// paths.

// dispatchLocked handles a message from the peer.
func (c *Conn) dispatchLocked(now int64, m ctlMsg) {
	if c.err != nil {
		return
	}
	switch m.kind {
	case msgBye:
		c.ctl.byeHeard = true
		c.peerGoneLocked(now)
		return
	case msgLaneEP, msgLaneRTS:
		c.laneMsgLocked(m)
		return
	}
	p := c.paths[m.path]
	if p.Dead() {
		return
	}
	switch {
	case m.kind == msgDead:
		if p.Resetting() {
			p.notify(m)
		} else if !p.closed {
			c.killPathLocked(now, p, ErrPeerDead)
		}
	case p.Resetting() && m.gen == p.target:
		p.notify(m)
	case m.kind == msgEP && p.Resetting() && m.gen == p.target+1:
		// The peer began the next incarnation: it finished ours before we
		// applied it, or gave ours up. Ours is over either way.
		p.early = &m
		p.abandon(errAbandoned)
	case m.kind == msgEP && !p.Resetting() && m.gen == p.gen+1:
		if p.probing {
			// The path is back, and the peer already wants it reset.
			c.readmitLocked(now, p)
		}
		// The peer asks first: the engine gives the path up and asks for
		// the reset, which joins the peer's.
		cause := fmt.Errorf("%w: peer %s resets path %d (incarnation %d)", ErrPeerReset, c.cfg.Peer, p.idx, m.gen)
		_ = c.eng.PathFailed(now, p.idx, cause)
		c.fed = true
		c.drainLocked()
		if p.Resetting() && m.gen == p.target {
			p.notify(m)
		}
	default:
		c.log.Debug("cell driver: stale control message", "peer", c.cfg.Peer, "kind", m.kind, "path", m.path, "gen", m.gen, "local gen", p.gen)
	}
}

// killPathLocked closes path p for good outside a reset and tells the
// engine.
func (c *Conn) killPathLocked(now int64, p *path, cause error) {
	p.closed, p.probing = true, false
	p.qmu.Lock()
	_ = p.qp.Close()
	p.qmu.Unlock()
	p.Kill(now, c.eng, p.idx, &PathError{Peer: c.cfg.Peer, Path: p.idx, QPN: p.qpn, Op: "close", Err: cause})
	c.fed = true
	c.counters.dead++
}

// peerGoneLocked handles the peer's goodbye: every path is closed for
// good, and the engine fails the ranges still open once the last is.
func (c *Conn) peerGoneLocked(now int64) {
	for _, p := range c.paths {
		switch {
		case p.Dead():
		case p.Resetting():
			p.notify(ctlMsg{kind: msgDead, path: p.idx})
		case !p.closed:
			c.killPathLocked(now, p, ErrPeerClosed)
		}
	}
	c.drainLocked()
}
