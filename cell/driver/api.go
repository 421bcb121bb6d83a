package driver

import (
	"fmt"

	"github.com/rdmacell/rdmacell/cell"
	"github.com/rdmacell/rdmacell/verbs"
)

// Send starts moving n bytes at offset off of mr to the peer, into the
// receive range the peer posts for it: the k-th send of a connection fills
// the peer's k-th receive. It does not block; the memory is the
// connection's until the returned Op completes. Ranges beyond the
// engine's window (Engine.MaxRanges per direction) wait in the driver, in
// order.
func (c *Conn) Send(mr verbs.MR, off, n int) (*Op, error) {
	if err := c.checkRange("send", mr, off, n, verbs.AccessLocalWrite, false); err != nil {
		return nil, err
	}
	return c.SendAt(mr.Addr()+uint64(off), mr.LKey(), int64(n))
}

// Recv offers n bytes at offset off of mr, which must allow remote write,
// for the peer's next send to fill. It does not block; the memory is the
// connection's until the returned Op completes, whose length is the
// number of bytes the peer sent (a send longer than the range fails at
// both ends with cell.ErrTooLong). Ranges beyond the window wait, as for
// Send.
func (c *Conn) Recv(mr verbs.MR, off, n int) (*Op, error) {
	if err := c.checkRange("receive", mr, off, n, verbs.AccessRemoteWrite, true); err != nil {
		return nil, err
	}
	return c.RecvAt(mr.Addr()+uint64(off), mr.RKey(), int64(n))
}

func (c *Conn) checkRange(dir string, mr verbs.MR, off, n int, access verbs.Access, need bool) error {
	switch {
	case mr == nil:
		return fmt.Errorf("%w: driver: peer %s: %s of a nil region", cell.ErrInvalid, c.cfg.Peer, dir)
	case off < 0 || n < 0 || off > mr.Len() || n > mr.Len()-off:
		return fmt.Errorf("%w: driver: peer %s: %s of %d bytes at offset %d of a %d-byte region", cell.ErrInvalid, c.cfg.Peer, dir, n, off, mr.Len())
	case need && mr.Access()&access == 0:
		return fmt.Errorf("%w: driver: peer %s: %s into a region without remote write access", cell.ErrInvalid, c.cfg.Peer, dir)
	}
	return nil
}

// SendAt is Send for memory named by address and lkey: n bytes at addr,
// registered in the connection's PD.
func (c *Conn) SendAt(addr uint64, lkey uint32, n int64) (*Op, error) {
	o := newOp(cell.Sent)
	defer c.uncorkPost(c.corkPost())
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return nil, c.err
	}
	now := c.now()
	if err := c.postLocked(now, queued{op: o, addr: addr, key: lkey, n: n}); err != nil {
		c.drainLocked()
		return nil, err
	}
	// The grant may be in already: start at once rather than on the
	// progress goroutine's next round.
	c.pollGrantsLocked(now)
	c.drainLocked()
	c.postedLocked()
	return o, nil
}

// RecvAt is Recv for memory named by address and rkey: n bytes at addr,
// registered in the connection's PD with remote write access.
func (c *Conn) RecvAt(addr uint64, rkey uint32, n int64) (*Op, error) {
	o := newOp(cell.Received)
	defer c.uncorkPost(c.corkPost())
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return nil, c.err
	}
	if err := c.postLocked(c.now(), queued{op: o, addr: addr, key: rkey, n: n}); err != nil {
		c.drainLocked()
		return nil, err
	}
	c.drainLocked()
	c.postedLocked()
	return o, nil
}
