package driver

import (
	"context"
	"fmt"

	"github.com/rdmacell/rdmacell/verbs"
)

// wrKindProbe marks the probes of Dial.
const wrKindProbe = 0xD2 << 56

// probe writes zero bytes into the peer's rings over every QP and waits
// for the writes to complete. Providers connect a QP lazily, at its first
// request; paying that here keeps the first cells of the connection from
// waiting for it past their soft timeout. Completions that are not the
// probes' are kept for the progress goroutine.
func (c *Conn) probe(ctx context.Context) error {
	qps := make([]verbs.QP, 0, len(c.paths)+1)
	for _, p := range c.paths {
		qps = append(qps, p.qp)
	}
	qps = append(qps, c.ctl.qp)
	what := func(i int) string {
		if i == len(c.paths) {
			return fmt.Sprintf("control qp %d", c.ctl.qpn)
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
