package driver

import (
	"context"
	"fmt"

	"github.com/rdmacell/rdmacell/verbs"
)

// Probes are signaled WRITEs of zero bytes into the peer's rings: Dial
// connects every QP with one, a path just reset is re-admitted once its
// probe completes, and keepalives find paths whose peer is gone. Their
// work request ids carry wrKindProbe and say which probe they are.
const wrKindProbe = 0xD2 << 56

// probe writes zero bytes into the peer's rings over every QP and waits
// for the writes to complete. Providers connect a QP lazily, at its first
// request; paying that here keeps the first cells of the connection from
// waiting for it past their soft timeout. Completions that are not the
// probes' are kept for the progress goroutine.
func (c *Conn) probe(ctx context.Context) error {
	qps := make([]verbs.QP, 0, len(c.paths)+len(c.ctl.lanes))
	for _, p := range c.paths {
		qps = append(qps, p.qp)
	}
	for _, l := range c.ctl.lanes {
		qps = append(qps, l.qp)
	}
	what := func(i int) string {
		if i >= len(c.paths) {
			l := c.ctl.lanes[i-len(c.paths)]
			return fmt.Sprintf("control lane %d (qp %d)", l.idx, l.qpn)
		}
		return fmt.Sprintf("path %d (qp %d)", i, c.paths[i].qpn)
	}
	for i, q := range qps {
		wr := verbs.SendWR{ID: wrKindProbe | uint64(i), Opcode: verbs.OpWrite, Flags: verbs.Signaled,
			RemoteAddr: c.peerRing.Addr, RKey: c.peerRing.RKey}
		if _, err := q.PostSend(&wr); err != nil {
			return fmt.Errorf("driver: peer %s: probe %s: %w", c.cfg.Peer, what(i), err)
		}
	}
	for left := len(qps); left > 0; {
		n, err := c.cq.Wait(ctx, c.wcs)
		if err != nil {
			return fmt.Errorf("driver: peer %s: waiting for %d probes to complete: %w", c.cfg.Peer, left, err)
		}
		for _, wc := range c.wcs[:n] {
			i := int(wc.ID &^ wrKindMask)
			if wc.ID&wrKindMask != wrKindProbe || i >= len(qps) {
				c.early = append(c.early, wc)
				continue
			}
			if wc.Status != verbs.StatusSuccess {
				return fmt.Errorf("driver: peer %s: probe %s: %w", c.cfg.Peer, what(i), &verbs.WCError{WC: wc})
			}
			left--
		}
	}
	return nil
}

// probePathLocked writes zero bytes over path p's new incarnation before
// the engine gets it back: a provider connects the QP at its first
// request, and the engine's first cells there must not wait for that
// past their soft timeout (with fresh estimates, T_soft is at its floor).
func (c *Conn) probePathLocked(now int64, p *path) {
	p.probing = true
	wr := &c.wr
	*wr = verbs.SendWR{ID: probeWRID(p.idx, p.gen), Opcode: verbs.OpWrite, Flags: verbs.Signaled,
		RemoteAddr: c.peerRing.Addr, RKey: c.peerRing.RKey}
	if _, err := p.qp.PostSend(wr); err != nil {
		c.readmitLocked(now, p)
		_ = c.eng.PathFailed(now, p.idx, &PathError{Peer: c.cfg.Peer, Path: p.idx, QPN: p.qpn, Op: "probe", Err: err})
	}
}

// probeDoneLocked handles the completion of a probe of path q. A reset's
// probe re-admits the path; a failed one is fed to the engine after, which
// gives the path up again, as is a failed keepalive.
func (c *Conn) probeDoneLocked(now int64, q int, wc *verbs.WC) {
	p := c.paths[q]
	if wc.ID == keepaliveWRID(q) {
		if wc.Status != verbs.StatusSuccess {
			_ = c.eng.Completion(now, q, *wc)
			c.fed = true
		}
		return
	}
	if !p.probing || wc.ID != probeWRID(q, p.gen) {
		return
	}
	c.readmitLocked(now, p)
	if wc.Status != verbs.StatusSuccess {
		_ = c.eng.Completion(now, q, *wc)
	}
}

// readmitLocked tells the engine path p is back, at both ends.
func (c *Conn) readmitLocked(now int64, p *path) {
	p.probing = false
	_ = c.eng.PathReset(now, p.idx)
	c.fed = true
	c.counters.resets++
	if k := c.cfg.Counters; k != nil {
		k.Resets.Add(1)
	}
	c.log.Debug("cell driver: path reset", "peer", c.cfg.Peer, "path", p.idx, "gen", p.gen)
	if m := p.early; m != nil {
		p.early = nil
		c.dispatchLocked(now, *m)
	}
}

// probeWRID marks the probe of incarnation gen of path q.
func probeWRID(q int, gen uint32) uint64 {
	return wrKindProbe | 1<<48 | uint64(q)<<32 | uint64(gen)
}

// keepaliveWRID marks the keepalive probes of path q.
func keepaliveWRID(q int) uint64 { return wrKindProbe | 2<<48 | uint64(q)<<32 }

// keepaliveLocked probes, with a write of zero bytes, every working path
// that showed nothing for keepaliveIdle: a path whose peer is gone fails
// it, and the engine gives the path up.
func (c *Conn) keepaliveLocked(now int64) {
	probed := false
	for _, p := range c.paths {
		if p.closed || p.Resetting() || p.probing || now-p.lastSeen < int64(keepaliveIdle) {
			continue
		}
		if probed && c.ops.sends == 0 {
			// A receiver that sends nothing learns of a vanished peer
			// from any one path: one probe a round keeps a parked
			// connection nearly still.
			break
		}
		p.lastSeen, probed = now, true
		wr := &c.wr
		*wr = verbs.SendWR{ID: keepaliveWRID(p.idx), Opcode: verbs.OpWrite, Flags: verbs.Signaled,
			RemoteAddr: c.peerRing.Addr, RKey: c.peerRing.RKey}
		if _, err := p.qp.PostSend(wr); err != nil {
			c.postFailedLocked(p, err)
		}
	}
	if probed {
		c.counters.keepalives++
		c.drainLocked() // reports the paths whose probe could not be posted
	}
}

// touchPathsLocked counts every path as just heard from.
func (c *Conn) touchPathsLocked(now int64) {
	for _, p := range c.paths {
		p.lastSeen = now
	}
}
