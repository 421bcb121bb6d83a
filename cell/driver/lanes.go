package driver

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Lane repairs. A control lane whose QP fails is brought back the way a
// path is reset (see reset.go), over the lanes that still work: both ends
// number the lane's incarnations, a worker takes the local QP through
// ERR, RESET and INIT with its receives posted, and swaps endpoint and
// RTS messages (msgLaneEP, msgLaneRTS) with the peer. A peer that hears
// of the next incarnation of a lane it still has joins it; one that hears
// of the next while its own attempt runs abandons that attempt and joins
// the new one. The lane takes messages again as soon as its QP is
// connected, and sends again once the peer's QP is too: first every
// message the peer has not acknowledged (control.sent), so that the lane
// alone would deliver a gapless sequence. Each work request's id carries
// its incarnation, so completions of one given up are ignored. An attempt
// that fails or times out (ResetTimeout) is followed by another after a
// back-off that doubles up to a quarter of ResetTimeout, for as long as
// the connection and its channel live.

// repairLaneLocked starts bringing up lane l's next incarnation, joining
// the peer's if early is its endpoint message for it. It does nothing
// once the connection or its channel has ended or the peer said goodbye.
func (c *Conn) repairLaneLocked(l *lane, early *ctlMsg) {
	if l.repairing || c.err != nil || c.closing || c.ctl.down || c.ctl.byeHeard {
		return
	}
	l.repairing = true
	l.target = l.gen + 1
	for j := range l.recvs {
		l.recvs[j].ID = laneWRID(l.target, j)
	}
	l.inbox = make(chan ctlMsg, 4)
	ctx, cancel, abandon := c.attempt()
	l.abandon = abandon
	var wait time.Duration
	if early == nil {
		wait = c.backOffAfter(l.failures)
	}
	c.log.Debug("cell driver: repairing control lane", "peer", c.cfg.Peer, "lane", l.idx, "qp", l.qpn, "gen", l.target)
	c.workers.Add(1)
	go c.laneWorker(ctx, cancel, l, l.target, l.inbox, wait)
	if early != nil && early.gen == l.target {
		l.notify(*early)
	}
}

// laneWorker performs one attempt at repairing lane l with the peer, after
// waiting for the back-off wait, and applies its outcome.
func (c *Conn) laneWorker(ctx context.Context, cancel context.CancelFunc, l *lane, gen uint32, inbox chan ctlMsg, wait time.Duration) {
	defer c.workers.Done()
	defer cancel()
	err := backOff(ctx, wait)
	if err == nil {
		err = c.rejoinLane(ctx, l, gen, inbox)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.laneRepairedLocked(l, gen, err)
}

// rejoinLane takes l's QP through incarnation gen with the peer.
func (c *Conn) rejoinLane(ctx context.Context, l *lane, gen uint32, inbox chan ctlMsg) error {
	l.qmu.Lock()
	ep, err := reinit(l.qp, nil)
	for j := 0; err == nil && j < len(l.recvs); j++ {
		_, err = l.qp.PostRecv(&l.recvs[j])
	}
	l.qmu.Unlock()
	if err != nil {
		return err
	}
	if err := c.sendCtl(ctlMsg{kind: msgLaneEP, path: l.idx, gen: gen, ep: ep}); err != nil {
		return err
	}
	m, err := awaitMsg(ctx, inbox, msgLaneEP)
	if err != nil {
		return err
	}
	l.qmu.Lock()
	err = connectQP(l.qp, &m.ep)
	l.qmu.Unlock()
	if err != nil {
		return fmt.Errorf("connect to the peer's qp %d: %w", m.ep.QPN, err)
	}
	if err := c.sendCtl(ctlMsg{kind: msgLaneRTS, path: l.idx, gen: gen}); err != nil {
		return err
	}
	_, err = awaitMsg(ctx, inbox, msgLaneRTS)
	return err
}

// laneRepairedLocked applies the outcome of the attempt at incarnation gen
// of lane l: the lane sends again, or the next attempt starts.
func (c *Conn) laneRepairedLocked(l *lane, gen uint32, err error) {
	l.repairing, l.inbox, l.abandon = false, nil, nil
	if c.err != nil || c.ctl.down || c.ctl.byeHeard || c.closing {
		return
	}
	if err != nil {
		// Both ends count the failed incarnation as used.
		l.gen = gen
		if !errors.Is(err, errAbandoned) {
			l.failures++
		}
		c.log.Debug("cell driver: repairing control lane again", "peer", c.cfg.Peer, "lane", l.idx, "gen", gen+1, "err", err)
		early := l.early
		l.early = nil
		c.repairLaneLocked(l, early)
		return
	}
	l.gen, l.failures, l.down, l.byeSlot = gen, 0, false, -1
	l.freeAll(c.lay.ctlSlots)
	l.pending = append(l.pending[:0], c.ctl.sent...)
	c.counters.laneRepairs++
	c.log.Debug("cell driver: control lane back", "peer", c.cfg.Peer, "lane", l.idx, "gen", gen, "resent", len(l.pending))
	c.postPendingLocked(l)
}

// laneMsgLocked handles the peer's message about lane m.path.
func (c *Conn) laneMsgLocked(m ctlMsg) {
	l := c.ctl.lanes[m.path]
	switch {
	case l.repairing && m.gen == l.target:
		l.notify(m)
	case m.kind == msgLaneEP && l.repairing && m.gen == l.target+1:
		// The peer began the next incarnation: it gave ours up.
		l.early = &m
		l.abandon(errAbandoned)
	case m.kind == msgLaneEP && !l.repairing && m.gen == l.gen+1:
		// The peer repairs a lane this end still has (its QP failed first
		// at the peer's end), or has down and waits to repair.
		c.laneDownLocked(l, fmt.Errorf("peer %s repairs control lane %d (incarnation %d)", c.cfg.Peer, l.idx, m.gen))
		c.repairLaneLocked(l, &m)
	default:
		c.log.Debug("cell driver: stale control message", "peer", c.cfg.Peer, "kind", m.kind, "lane", m.path, "gen", m.gen, "local gen", l.gen)
	}
}

func (l *lane) notify(m ctlMsg) { offer(l.inbox, m) }

// freeAll makes every one of the lane's n send slots free.
func (l *lane) freeAll(n int) {
	l.free = l.free[:0]
	for j := range n {
		l.free = append(l.free, n-1-j)
	}
}

// lanesUpLocked counts the lanes that send.
func (c *Conn) lanesUpLocked() int {
	n := 0
	for _, l := range c.ctl.lanes {
		if !l.down {
			n++
		}
	}
	return n
}
