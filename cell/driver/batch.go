package driver

import (
	"context"
	"fmt"
	"time"

	"github.com/rdmacell/rdmacell/cell"
	"github.com/rdmacell/rdmacell/cell/bind"
	"github.com/rdmacell/rdmacell/verbs"
)

// drainLocked acts on the engine's outputs in the order Ready documents
// (bind.Act), then reports the paths whose posts failed, which yields
// another batch. Nothing here blocks or allocates.
func (c *Conn) drainLocked() {
	for c.fed {
		c.fed = false
		rd := bind.Act(c.eng, (*actor)(c))
		if c.trace && !rd.Empty() {
			c.log.Log(context.Background(), LevelTrace, "cell driver: batch", "peer", c.cfg.Peer,
				"t", bind.Time(c.now()), "outputs", bind.FormatReady(rd, "; "))
		}
		c.deadline = rd.Deadline
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

// actor is a Conn acting on a batch (bind.Actor), with c.mu held.
type actor Conn

func (a *actor) PostRecv(r *cell.RecvPost) {
	c := (*Conn)(a)
	if p := c.paths[r.Path]; !p.closed {
		if _, err := p.qp.PostRecv(r.WR); err != nil {
			c.postFailedLocked(p, err)
		}
	}
}

func (a *actor) StartReset(r *cell.Reset) { (*Conn)(a).startResetLocked(r) }

func (a *actor) PostCell(post *cell.Post) { (*Conn)(a).postCellLocked(post) }

func (a *actor) WriteToken(t *cell.TokenWrite) {
	c := (*Conn)(a)
	if t.Slot < c.lay.window {
		st := c.lay.stTokenOff(t.Path, t.Slot)
		cell.PutToken(c.stage[st:], t.Token)
		c.writeRecordLocked(t.Path, st, cell.TokenSize, c.lay.tokenOff(t.Path, t.Slot), 0)
	}
}

func (a *actor) WriteGrant(g *cell.GrantWrite) {
	writeRingRecord((*Conn)(a), g.Path, g.Slot, ring{stage: a.lay.stGrants, peer: a.lay.grants, size: cell.GrantSize},
		cell.PutGrant, g.Grant, wrWatched)
}

func (a *actor) WriteFinal(f *cell.FinalWrite) {
	writeRingRecord((*Conn)(a), f.Path, f.Slot, ring{stage: a.lay.stFinals, peer: a.lay.finals, size: cell.FinalSize},
		cell.PutFinal, f.Final, wrWatched|wrBell)
}

func (a *actor) WriteHold(h *cell.HoldWrite) {
	writeRingRecord((*Conn)(a), h.Path, h.Slot, ring{stage: a.lay.stHolds, peer: a.lay.holds, size: cell.HoldSize},
		cell.PutHold, h.Hold, wrWatched|wrBell)
}

func (a *actor) WriteHoldAck(h *cell.HoldAckWrite) {
	writeRingRecord((*Conn)(a), h.Path, h.Slot, ring{stage: a.lay.stAcks, peer: a.lay.acks, size: cell.HoldSize},
		cell.PutHoldAck, h.Ack, wrWatched|wrBell)
}

// ring places one of the MaxRanges-slot rings: its offset in this end's
// staging area (a slot per path and ring slot), in the peer's ring region,
// and its records' size.
type ring struct{ stage, peer, size int }

// writeRingRecord encodes rec with put into path q's staging slot for ring
// slot slot and writes it into that slot of the peer's ring, over q.
func writeRingRecord[T any](c *Conn, q, slot int, r ring, put func([]byte, T), rec T, flags uint64) {
	if slot < 0 || slot >= c.lay.ranges {
		return
	}
	st := r.stage + (q*c.lay.ranges+slot)*r.size
	put(c.stage[st:], rec)
	c.writeRecordLocked(q, st, r.size, r.peer+slot*r.size, flags)
}

// Failed closes every QP before the failed ranges are handed back, so
// that nothing lands in them after.
func (a *actor) Failed(err error) { (*Conn)(a).failLocked(err) }

func (a *actor) Event(ev *cell.Event) {
	c := (*Conn)(a)
	if o := c.ops.take(ev.Tag); o != nil {
		o.complete(ev.Len, ev.Err)
		c.completed = true
	}
}

// postCellLocked posts a cell's chain and remembers its id, whose token
// the path's ring will carry.
func (c *Conn) postCellLocked(post *cell.Post) {
	p := c.paths[post.Path]
	if p.closed {
		return
	}
	p.Tokens.Posted(post.Cell)
	head := post.WR
	if post.Tail != nil {
		head = c.spliceTailLocked(post)
	}
	if _, err := p.qp.PostSend(head); err != nil {
		c.postFailedLocked(p, err)
		return
	}
	c.counters.cells++
	if k := c.cfg.Counters; k != nil {
		k.Cells[post.Path].Add(1)
		k.Bytes[post.Path].Add(uint64(post.Len))
		if post.Again {
			k.Reposts.Add(1)
		}
	}
}

// spliceTailLocked links a WRITE of the range's tail into the cell's
// chain, just before its WRITE_WITH_IMM, and returns the chain's head. The
// engine rebuilds a chain for every post, so the link it changes in the
// engine's storage is never reused as it is; the provider copies the
// requests when they are posted, so one request of the connection's does
// for every tail.
func (c *Conn) spliceTailLocked(post *cell.Post) *verbs.SendWR {
	slot := int(post.Tail.Seq & uint32(c.lay.ranges-1))
	st := c.lay.stTailOff(post.Path, slot)
	cell.PutTail(c.stage[st:], *post.Tail)
	p := c.paths[post.Path]
	p.writes++
	c.tailSGE[0] = verbs.SGE{Addr: c.stageAddr + uint64(st), Length: cell.TailSize, LKey: c.stageMR.LKey()}
	c.tailWR = verbs.SendWR{
		ID:         recordWRID(post.Path, p.writes),
		Opcode:     verbs.OpWrite,
		SGL:        c.tailSGE[:],
		RemoteAddr: c.peerRing.Addr + uint64(c.lay.tailOff(slot)),
		RKey:       c.peerRing.RKey,
	}
	head := post.WR
	if head.Opcode == verbs.OpWriteImm {
		c.tailWR.Next = head
		return &c.tailWR
	}
	c.tailWR.Next = head.Next
	head.Next = &c.tailWR
	return head
}

// writeRecordLocked writes n bytes staged at offset st into the peer's
// ring region at offset remote, over path q. A token write is unsignaled
// but for one in signalEvery, which lets an RNIC retire the others: a
// lost token shows as its cell's soft timeout. A grant or a final
// (flags wrWatched) is signaled and watched until it completes, since
// nothing else would notice a path that swallows it (see
// watchRecordsLocked); a final (wrBell) is followed by a bell once it
// has landed, so only a grant's completion may be Relaxed.
func (c *Conn) writeRecordLocked(q, st, n, remote int, flags uint64) {
	watch := flags&wrWatched != 0
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
	if watch {
		c.wr.ID |= flags
		c.wr.Flags = verbs.Signaled
		if flags&wrBell == 0 {
			// Only the watch waits for a grant's completion, and it
			// waits a soft timeout: let the acknowledgement ride.
			c.wr.Flags |= verbs.Relaxed
		}
	} else if p.writes%signalEvery == 0 {
		c.wr.Flags = verbs.Signaled
	}
	if _, err := p.qp.PostSend(&c.wr); err != nil {
		c.postFailedLocked(p, err)
		return
	}
	if watch {
		p.records.push(c.now())
	}
}

// Work request ids of the driver's ring writes: a kind byte apart from
// the engine's (0xCE cells, 0xCF receives), a bit for the watched, and
// one for those to be followed by a bell.
const (
	wrKindRecord = 0xD1 << 56
	wrKindMask   = 0xFF << 56
	wrWatched    = 1 << 48
	wrBell       = 1 << 49
)

func recordWRID(q int, n uint64) uint64 {
	return wrKindRecord | uint64(q)<<40 | n&(1<<40-1)
}

// watchRecordsLocked gives up a path on which a grant or final has not
// completed within cell.NoProgressFactor times the path's soft timeout
// (and at least verbs.RelaxedDelay more than one) of the path's last sign
// of progress: the bound within which the engine gives up a demoted path
// that shows none. A path that swallows writes without failing them (a
// route that went dark, before the transport's own retries run out)
// would otherwise keep the peer waiting for a record no later cell forces
// out: cells time out on their tokens, but a final may be the last thing
// a connection writes. As for cells, the clock starts at the later of
// the post and the path's last completion or token: a record queued
// behind megabytes of cells on a slow link is late only if the path
// stopped moving. The engine writes the records again on another path.
//
// A record can take longer than that on a path that is slow, not dark:
// it waits behind this end's cells, and its acknowledgement behind the
// peer's; and T_soft is at its floor on a path just reset, and on every
// path of an end that sends no cells, since only cells' tokens teach it.
// Judged by that clock every time, such a path would be given up on its
// first record after each reset, for as long as the connection lives,
// before the tokens of the cells it carries could come back, so that
// neither its estimates nor a range whose last cell keeps going there
// ever gets anywhere. So, as a cell's back-off does, each give-up doubles
// the time records get on that path from then on, resets included, up to
// the engine's MaxSoftBackoff times: a path is given up for its records
// a few times at most, and one that went dark is still found out, later,
// and by its cells' own soft timeouts meanwhile.
func (c *Conn) watchRecordsLocked(now int64) {
	for _, p := range c.paths {
		if p.records.n == 0 || p.closed || p.Resetting() {
			continue
		}
		soft := int64(c.eng.Path(p.idx).SoftTimeout)
		// A grant's completion may come verbs.RelaxedDelay late on a
		// path that works.
		bound := max(cell.NoProgressFactor*soft, int64(verbs.RelaxedDelay)+soft) * p.recordSlack
		if age := now - max(p.records.at(0), p.lastSeen); age > bound {
			p.records.reset()
			err := fmt.Errorf("%w: a grant or final written %v ago has not completed, T_soft %v, %d×%d for records here",
				cell.ErrNoProgress, time.Duration(age), time.Duration(soft), cell.NoProgressFactor, p.recordSlack)
			p.recordSlack = min(2*p.recordSlack, int64(c.eng.Config().MaxSoftBackoff))
			_ = c.eng.PathFailed(now, p.idx, err)
			c.fed = true
		}
	}
}

// recordsOutLocked reports whether a watched record is outstanding.
func (c *Conn) recordsOutLocked() bool {
	for _, p := range c.paths {
		if p.records.n > 0 && !p.closed {
			return true
		}
	}
	return false
}

// postFailedLocked notes a post the provider refused. On a path being
// reset or closed that is expected; on a working one the engine is told
// once the batch is done.
func (c *Conn) postFailedLocked(p *path, err error) {
	if p.Resetting() || p.closed || c.failed&(1<<p.idx) != 0 {
		return
	}
	c.failed |= 1 << p.idx
	c.postErr[p.idx] = &PathError{Peer: c.cfg.Peer, Path: p.idx, QPN: p.qpn, Op: "post", Err: err}
}
