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

func zero16(b []byte) bool {
	return binary.LittleEndian.Uint64(b) == 0 && binary.LittleEndian.Uint64(b[8:]) == 0
}

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

// pollGrantsLocked feeds the grants that arrived. The peer writes a
// grant's slot again only after this end has used the grant before, so
// grants not polled while no send is outstanding wait safely.
func (c *Conn) pollGrantsLocked(now int64) bool {
	work := false
	for s := range c.lay.ranges {
		off := c.lay.grantOff(s)
		b := c.ring[off : off+cell.GrantSize]
		if zero16(b) && zero16(b[16:]) {
			continue
		}
		g, ok := cell.ReadGrant(b)
		if !ok {
			continue
		}
		clear(b)
		c.eng.Grant(now, g)
		c.fed, work = true, true
	}
	return work
}

// pollFinalsLocked feeds the finals that arrived.
func (c *Conn) pollFinalsLocked(now int64) bool {
	work := false
	for s := range c.lay.ranges {
		off := c.lay.finalOff(s)
		b := c.ring[off : off+cell.FinalSize]
		if zero16(b) {
			continue
		}
		f, ok := cell.ReadFinal(b)
		if !ok {
			continue
		}
		clear(b)
		c.eng.Final(now, f)
		c.fed, work = true, true
	}
	return work
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
	if c.ops.recvs > 0 && c.pollFinalsLocked(now) {
		work = true
	}
	return work
}
