package driver

import (
	"github.com/rdmacell/rdmacell/cell"
	"github.com/rdmacell/rdmacell/verbs"
)

// drainLocked acts on the engine's outputs in the order Ready documents,
// then reports the paths whose posts failed, which yields another batch.
// Nothing here blocks or allocates.
func (c *Conn) drainLocked() {
	for c.fed {
		c.fed = false
		rd := c.eng.Ready()
		for i := range rd.Recvs {
			r := &rd.Recvs[i]
			if p := c.paths[r.Path]; !p.closed {
				if _, err := p.qp.PostRecv(r.WR); err != nil {
					c.postFailedLocked(p, err)
				}
			}
		}
		for i := range rd.Resets {
			c.startResetLocked(&rd.Resets[i])
		}
		for i := range rd.Posts {
			c.postCellLocked(&rd.Posts[i])
		}
		for i := range rd.Tokens {
			t := &rd.Tokens[i]
			if t.Slot < c.lay.window {
				st := c.lay.stTokenOff(t.Path, t.Slot)
				cell.PutToken(c.stage[st:], t.Token)
				c.writeRecordLocked(t.Path, st, cell.TokenSize, c.lay.tokenOff(t.Path, t.Slot))
			}
		}
		for i := range rd.Grants {
			g := &rd.Grants[i]
			if g.Slot < c.lay.ranges {
				st := c.lay.stGrantOff(g.Path, g.Slot)
				cell.PutGrant(c.stage[st:], g.Grant)
				c.writeRecordLocked(g.Path, st, cell.GrantSize, c.lay.grantOff(g.Slot))
			}
		}
		for i := range rd.Finals {
			f := &rd.Finals[i]
			if f.Slot < c.lay.ranges {
				st := c.lay.stFinalOff(f.Path, f.Slot)
				cell.PutFinal(c.stage[st:], f.Final)
				c.writeRecordLocked(f.Path, st, cell.FinalSize, c.lay.finalOff(f.Slot))
			}
		}
		c.deadline = rd.Deadline
		if err := c.eng.Err(); err != nil {
			// No path is left: close every QP before the failed ranges
			// are handed back, so that nothing lands in them after.
			c.failLocked(err)
		}
		for i := range rd.Events {
			ev := &rd.Events[i]
			if o := c.ops.take(ev.Tag); o != nil {
				o.complete(ev.Len, ev.Err)
			}
		}
		if c.err != nil {
			c.failAllLocked(c.err) // the engine failed those it had
			return
		}
		if len(rd.Events) > 0 {
			c.admitLocked() // the windows slid
		}
		if c.failed != 0 && c.err == nil {
			now := c.now()
			for q := range c.paths {
				if c.failed&(1<<q) != 0 {
					_ = c.eng.PathFailed(now, q, c.postErr[q])
					c.postErr[q] = nil
					c.fed = true
				}
			}
		}
		c.failed = 0
	}
}

// postCellLocked posts a cell's chain and remembers its id, whose token
// the path's ring will carry.
func (c *Conn) postCellLocked(post *cell.Post) {
	p := c.paths[post.Path]
	if p.closed {
		return
	}
	p.fifo.push(post.Cell)
	if _, err := p.qp.PostSend(post.WR); err != nil {
		c.postFailedLocked(p, err)
		return
	}
	c.counters.cells++
}

// writeRecordLocked writes n bytes staged at offset st into the peer's
// ring region at offset remote, over path q. Writes are unsignaled but
// for one in signalEvery, which lets an RNIC retire the others.
func (c *Conn) writeRecordLocked(q, st, n, remote int) {
	p := c.paths[q]
	if p.closed {
		return
	}
	p.writes++
	c.sge[0] = verbs.SGE{Addr: c.stageAddr + uint64(st), Length: uint32(n), LKey: c.stageMR.LKey()}
	c.wr = verbs.SendWR{
		ID:         recordWRID(q, p.writes),
		Opcode:     verbs.OpWrite,
		SGL:        c.sge[:],
		RemoteAddr: c.peerRing.Addr + uint64(remote),
		RKey:       c.peerRing.RKey,
	}
	if p.writes%signalEvery == 0 {
		c.wr.Flags = verbs.Signaled
	}
	if _, err := p.qp.PostSend(&c.wr); err != nil {
		c.postFailedLocked(p, err)
	}
}

// Work request ids of the driver's ring writes: a kind byte apart from
// the engine's (0xCE cells, 0xCF receives).
const (
	wrKindRecord = 0xD1 << 56
	wrKindMask   = 0xFF << 56
)

func recordWRID(q int, n uint64) uint64 {
	return wrKindRecord | uint64(q)<<40 | n&(1<<40-1)
}

// postFailedLocked notes a post the provider refused. On a path being
// reset or closed that is expected; on a working one the engine is told
// once the batch is done.
func (c *Conn) postFailedLocked(p *path, err error) {
	if p.resetting || p.closed || c.failed&(1<<p.idx) != 0 {
		return
	}
	c.failed |= 1 << p.idx
	c.postErr[p.idx] = &PathError{Peer: c.cfg.Peer, Path: p.idx, QPN: p.qpn, Op: "post", Err: err}
}
