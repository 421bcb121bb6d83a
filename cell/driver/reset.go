package driver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rdmacell/rdmacell/cell"
	"github.com/rdmacell/rdmacell/verbs"
)

// Path resets. Both ends number the incarnations of each path's QP pair
// (gen, 0 at Dial). When the engine asks for a reset of path q, or the
// peer announces incarnation gen+1 of it, a worker goroutine takes the
// local QP through ERR (which flushes it; the fault wrapper delivers its
// late copies first), RESET and INIT, posts the engine's Refill there,
// and sends the peer an endpoint message for gen+1. With the peer's
// endpoint it moves the QP to RTR and RTS and says so; with the peer's
// RTS message as well, both QPs are known to be in RTS. Nothing of the
// old incarnation can land any more, at either end, as soon as both QPs
// have been through ERR, that is once the peer's endpoint message is in:
// the progress goroutine then polls the CQ and the rings a last time and
// calls PathQuiet, which lets the ranges the path held finish over the
// others while the reset goes on; a new route under the path (a TCP
// connection hashed onto a dead link keeps retrying) can take long. Once
// both ends are in RTS it calls PathReset. Control messages are taken in
// the order they were sent (see control.go), so the two ends agree on
// every incarnation. A reset that does not finish within ResetTimeout
// closes the QP, tells the peer, and reports PathDead, unless both QPs
// had been through ERR by then (the peer answered, and only connecting
// failed, as over a route that is down): that path is reset again, with
// a new incarnation, after a back-off that doubles up to a quarter of
// ResetTimeout, for as long as the connection lives. Nothing waits for
// it meanwhile. A peer that hears of the next incarnation while its own
// attempt still runs abandons that attempt and joins the new one.

// resetResult is a worker's outcome, applied by the progress goroutine.
type resetResult struct {
	path int
	gen  uint32
	err  error // nil: the path is back; else it is closed, or reset again
	// again says the path is to be reset again rather than closed.
	again bool
}

// errAbandoned is why a reset attempt ends when the peer has begun the
// next incarnation.
var errAbandoned = errors.New("driver: the peer began the path's next incarnation")

// Back-off between two attempts to reset one path.
const minResetBackoff = 10 * time.Millisecond

// startResetLocked starts the reset the engine asked for, unless one is
// under way (the peer asked first) or the path is closed.
func (c *Conn) startResetLocked(r *cell.Reset) {
	p := c.paths[r.Path]
	if p.closed || c.err != nil || !p.StartReset() {
		return
	}
	// The engine may reuse the chain's storage after this batch; the
	// worker posts its own copy.
	n := 0
	for wr := r.Refill; wr != nil && n < len(p.refill); wr = wr.Next {
		p.refill[n] = verbs.RecvWR{ID: wr.ID, SGL: wr.SGL}
		if n > 0 {
			p.refill[n-1].Next = &p.refill[n]
		}
		n++
	}
	p.target = p.gen + 1
	p.inbox = make(chan ctlMsg, 4)
	ctx, cancel, abandon := c.attempt()
	p.abandon = abandon
	wait := c.backOffAfter(p.failures)
	c.counters.resetsStarted++
	if k := c.cfg.Counters; k != nil {
		k.ResetsStarted.Add(1)
	}
	c.log.Debug("cell driver: resetting path", "peer", c.cfg.Peer, "path", p.idx, "qp", p.qpn, "gen", p.target, "cause", r.Cause)
	c.workers.Add(1)
	go c.resetWorker(ctx, cancel, p, p.target, p.inbox, p.refill[:n], wait)
	if m := p.early; m != nil && m.gen == p.target {
		// The peer's endpoint for this incarnation came while the last
		// attempt was being abandoned.
		p.early = nil
		p.notify(*m)
	}
}

// resetWorker performs one attempt at resetting path p with the peer,
// after waiting for the back-off wait.
func (c *Conn) resetWorker(ctx context.Context, cancel context.CancelFunc, p *path, gen uint32, inbox chan ctlMsg, refill []verbs.RecvWR, wait time.Duration) {
	defer c.workers.Done()
	// The bound is for the whole attempt, the QP's transitions included.
	defer cancel()
	quiet := false
	err := backOff(ctx, wait)
	if err == nil {
		quiet, err = c.reconnect(ctx, p, gen, inbox, refill)
	}
	again := false
	if err != nil {
		again = c.life.Err() == nil && (errors.Is(err, errAbandoned) ||
			quiet && !errors.Is(err, ErrPeerDead) && !errors.Is(err, ErrControl))
		err = &PathError{Peer: c.cfg.Peer, Path: p.idx, QPN: p.qpn, Op: "reset", Err: err}
	}
	if err != nil && !again {
		c.mu.Lock()
		p.closed = true
		c.mu.Unlock()
		p.qmu.Lock()
		_ = p.qp.Close()
		p.qmu.Unlock()
		if !errors.Is(err, ErrPeerDead) {
			_ = c.sendCtl(ctlMsg{kind: msgDead, path: p.idx, gen: gen})
		}
		if c.life.Err() == nil {
			c.log.Warn("cell driver: path declared dead", "peer", c.cfg.Peer, "path", p.idx, "err", err)
		}
	}
	c.mu.Lock()
	c.resetDone = append(c.resetDone, resetResult{path: p.idx, gen: gen, err: err, again: again})
	c.kickLocked()
	c.mu.Unlock()
}

// attempt returns the context of one attempt at a reset or a lane
// repair: bounded by ResetTimeout and the connection's life, and ended
// by abandon when the peer moves on to the next incarnation.
func (c *Conn) attempt() (ctx context.Context, cancel context.CancelFunc, abandon context.CancelCauseFunc) {
	ctx, cancel = context.WithTimeoutCause(c.life, c.cfg.ResetTimeout, fmt.Errorf("%w: within %v", ErrResetTimeout, c.cfg.ResetTimeout))
	ctx, abandon = context.WithCancelCause(ctx)
	return ctx, cancel, abandon
}

// backOffAfter is the wait before an attempt that follows failures
// failed ones in a row: doubling, up to a quarter of ResetTimeout.
func (c *Conn) backOffAfter(failures int) time.Duration {
	if failures == 0 {
		return 0
	}
	return min(minResetBackoff<<min(failures-1, 16), c.cfg.ResetTimeout/4)
}

// offer gives m to a worker's inbox unless it is full: a peer repeating
// itself, when the worker has what it needs.
func offer(inbox chan ctlMsg, m ctlMsg) {
	select {
	case inbox <- m:
	default:
	}
}

// backOff waits for d, or returns why ctx ended first.
func backOff(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// reconnect takes p's QP through a new incarnation with the peer. quiet
// says that both QPs went through ERR, whatever failed after.
func (c *Conn) reconnect(ctx context.Context, p *path, gen uint32, inbox chan ctlMsg, refill []verbs.RecvWR) (quiet bool, err error) {
	p.qmu.Lock()
	ep, err := reinit(p.qp, refill)
	p.qmu.Unlock()
	if err != nil {
		return false, err
	}
	if err := c.sendCtl(ctlMsg{kind: msgEP, path: p.idx, gen: gen, ep: ep}); err != nil {
		return false, err
	}
	m, err := awaitMsg(ctx, inbox, msgEP)
	if err != nil {
		return false, err
	}
	c.mu.Lock()
	c.quiets = append(c.quiets, resetResult{path: p.idx, gen: gen})
	c.kickLocked()
	c.mu.Unlock()
	p.qmu.Lock()
	err = connectQP(p.qp, &m.ep)
	p.qmu.Unlock()
	if err != nil {
		return true, fmt.Errorf("connect to the peer's qp %d: %w", m.ep.QPN, err)
	}
	if err := c.sendCtl(ctlMsg{kind: msgRTS, path: p.idx, gen: gen}); err != nil {
		return true, err
	}
	_, err = awaitMsg(ctx, inbox, msgRTS)
	return true, err
}

// reinit brings q back to INIT with the refill posted and returns its new
// endpoint. Moving to ERR first flushes what was outstanding, so that
// every completion of the old incarnation is in the CQ when it returns.
func reinit(q verbs.QP, refill []verbs.RecvWR) (verbs.Endpoint, error) {
	for _, s := range []verbs.QPState{verbs.StateErr, verbs.StateReset, verbs.StateInit} {
		if err := q.Modify(s, nil); err != nil {
			return verbs.Endpoint{}, fmt.Errorf("move to %v: %w", s, err)
		}
	}
	if len(refill) > 0 {
		if _, err := q.PostRecv(&refill[0]); err != nil {
			return verbs.Endpoint{}, fmt.Errorf("post the refill: %w", err)
		}
	}
	return q.Endpoint(), nil
}

// awaitMsg waits for the peer's message of kind for the reset under way.
func awaitMsg(ctx context.Context, inbox chan ctlMsg, kind msgKind) (ctlMsg, error) {
	for {
		select {
		case m := <-inbox:
			switch m.kind {
			case kind:
				return m, nil
			case msgDead:
				return m, ErrPeerDead
			case msgCtlDown:
				return m, m.err
			}
		case <-ctx.Done():
			cause := context.Cause(ctx)
			if errors.Is(cause, ErrResetTimeout) {
				return ctlMsg{}, fmt.Errorf("%w: no %v message from the peer", cause, kind)
			}
			if errors.Is(cause, errAbandoned) {
				return ctlMsg{}, cause
			}
			return ctlMsg{}, fmt.Errorf("%w: reset abandoned", ErrClosed)
		}
	}
}

// applyQuietsLocked tells the engine of the first n paths whose old
// incarnation is gone at both ends, after a last poll of its tokens.
func (c *Conn) applyQuietsLocked(now int64, n int) {
	for _, r := range c.quiets[:n] {
		p := c.paths[r.path]
		if c.err != nil || !p.Resetting() || p.target != r.gen {
			continue
		}
		c.tokensFoundLocked(now, p, p.Quiet(now, c.eng, p.idx))
		p.records.reset()
		c.fed = true
	}
	c.quiets = append(c.quiets[:0], c.quiets[n:]...)
}

// applyResetsLocked applies the first n results of the reset workers.
func (c *Conn) applyResetsLocked(now int64, n int) {
	for _, r := range c.resetDone[:n] {
		p := c.paths[r.path]
		if c.err != nil {
			break
		}
		// The old incarnation's last tokens, then a clean ring for the
		// new one.
		c.tokensFoundLocked(now, p, p.EndReset(now, c.eng, p.idx))
		p.records.reset()
		p.inbox, p.abandon = nil, nil
		if r.again {
			// Both ends count the failed incarnation as used.
			p.gen = r.gen
			if !errors.Is(r.err, errAbandoned) {
				p.failures++
			}
			c.counters.resetsAgain++
			c.log.Debug("cell driver: resetting path again", "peer", c.cfg.Peer, "path", p.idx, "gen", r.gen+1, "err", r.err)
			_ = c.eng.ResetAgain(now, p.idx, r.err)
			c.fed = true
			continue
		}
		if r.err != nil {
			p.closed, p.early = true, nil
			p.Kill(now, c.eng, p.idx, r.err)
			c.fed = true
			c.counters.dead++
			continue
		}
		p.gen, p.failures = r.gen, 0
		c.probePathLocked(now, p)
	}
	c.resetDone = append(c.resetDone[:0], c.resetDone[n:]...)
}
