package driver

import (
	"encoding/binary"

	"github.com/rdmacell/rdmacell/cell"
)

// The peer writes tokens, grants and finals into this end's rings with
// one-sided WRITEs: nothing signals their arrival, so the progress
// goroutine polls the slots where a record can be expected: the token
// slots of the cells posted (bind.TokenRing), every grant and final slot
// while a range waits for one. A slot is zeroed once its record has been
// fed to the engine, so an old record never mixes with a new one and a
// zero slot is skipped with two or four loads. A slot that does not
// decode is left alone: it may be a write still landing.

// fifo is a bounded queue of a path's outstanding work, oldest first: the
// post times of the grants and finals not yet completed (the send queue
// bounds them). It cannot overflow; were it to, dropping the oldest entry
// would only cost one record's watch.
type fifo[T any] struct {
	buf     []T
	head, n int
}

func (r *fifo[T]) init(n int) { r.buf = make([]T, n) }

func (r *fifo[T]) push(v T) {
	if r.n == len(r.buf) {
		r.drop(1)
	}
	r.buf[(r.head+r.n)%len(r.buf)] = v
	r.n++
}

func (r *fifo[T]) at(i int) T { return r.buf[(r.head+i)%len(r.buf)] }

func (r *fifo[T]) drop(k int) {
	k = min(k, r.n)
	r.head = (r.head + k) % len(r.buf)
	r.n -= k
}

func (r *fifo[T]) reset() { r.head, r.n = 0, 0 }

// pollTokensLocked feeds the tokens that arrived on path p's ring (see
// bind.TokenRing).
func (c *Conn) pollTokensLocked(now int64, p *path) bool {
	return c.tokensFoundLocked(now, p, p.Tokens.Poll(now, c.eng, p.idx))
}

// tokensFoundLocked notes that a read of p's token ring fed tokens, if
// found says so.
func (c *Conn) tokensFoundLocked(now int64, p *path, found bool) bool {
	if found {
		c.fed = true
		p.lastSeen = now
		c.counters.tokens++
	}
	return found
}

// pollSlots feeds the engine every record found in the MaxRanges slots
// of size bytes from offset base of the ring region, clearing each slot
// it decodes. The peer writes a slot again only after this end has used
// the record before, so records not polled while nothing waits for them
// wait safely. read and feed are plain functions (a method expression
// for feed), so that a poll allocates nothing.
func pollSlots[T any](c *Conn, now int64, base, size int, read func([]byte) (T, bool), feed func(*cell.Engine, int64, T)) bool {
	work := false
	for s := range c.lay.ranges {
		o := base + s*size
		b := c.ring[o : o+size]
		if zeroRecord(b) {
			continue
		}
		rec, ok := read(b)
		if !ok {
			continue
		}
		clear(b)
		feed(c.eng, now, rec)
		c.fed, work = true, true
	}
	return work
}

// pollGrantsLocked feeds the grants that arrived.
func (c *Conn) pollGrantsLocked(now int64) bool {
	return pollSlots(c, now, c.lay.grants, cell.GrantSize, cell.ReadGrant, (*cell.Engine).Grant)
}

// zeroRecord reports whether a record slot, a multiple of 8 bytes, holds
// nothing.
func zeroRecord(b []byte) bool {
	for i := 0; i < len(b); i += 8 {
		if binary.LittleEndian.Uint64(b[i:]) != 0 {
			return false
		}
	}
	return true
}

// pollRingsLocked polls every ring where a record can be expected.
func (c *Conn) pollRingsLocked(now int64) bool {
	work := false
	for _, p := range c.paths {
		if p.Tokens.Pending() > 0 && c.pollTokensLocked(now, p) {
			work = true
		}
	}
	if c.ops.sends > 0 && c.pollGrantsLocked(now) {
		work = true
	}
	l := &c.lay
	if c.eng.Holding() && pollSlots(c, now, l.acks, cell.HoldSize, cell.ReadHoldAck, (*cell.Engine).HoldAck) {
		work = true
	}
	if c.ops.recvs > 0 && pollSlots(c, now, l.finals, cell.FinalSize, cell.ReadFinal, (*cell.Engine).Final) {
		work = true
	}
	if c.tailsDue {
		c.tailsDue = false
		if pollSlots(c, now, l.tails, cell.TailSize, cell.ReadTail, (*cell.Engine).Tail) {
			work = true
		}
	}
	// A hold may come for a range handed back already, whatever this end
	// has posted since; it is followed by a bell.
	if c.holdsDue {
		c.holdsDue = false
		if pollSlots(c, now, l.holds, cell.HoldSize, cell.ReadHold, (*cell.Engine).Hold) {
			work = true
		}
	}
	return work
}
