package driver

import (
	"encoding/binary"

	"github.com/rdmacell/rdmacell/cell"
)

// The peer writes tokens, grants and finals into this end's rings with
// one-sided WRITEs: nothing signals their arrival, so the progress
// goroutine polls the slots where a record can be expected. A slot is
// zeroed once its record has been fed to the engine, so an old record
// never mixes with a new one and a zero slot is skipped with two or four
// loads. A slot that does not decode is left alone: it may be a write
// still landing.

// idRing is the cells posted on one path whose tokens have not come, in
// posting order. RC writes a path's tokens in that order, so a token
// found for one entry settles every entry before it; at most RecvDepth
// cells are outstanding on a path, which bounds the ring.
type idRing struct {
	ids     []uint32
	head, n int
}

func (r *idRing) init(n int) { r.ids = make([]uint32, n) }

func (r *idRing) push(id uint32) {
	if r.n == len(r.ids) {
		// Cannot happen while the engine keeps its credits; losing the
		// oldest entry only costs its token, which a later one covers.
		r.drop(1)
	}
	r.ids[(r.head+r.n)%len(r.ids)] = id
	r.n++
}

func (r *idRing) at(i int) uint32 { return r.ids[(r.head+i)%len(r.ids)] }

func (r *idRing) drop(k int) {
	r.head = (r.head + k) % len(r.ids)
	r.n -= k
}

func (r *idRing) reset() { r.head, r.n = 0, 0 }

// timeRing is a FIFO of post times, bounded by the send queue: a
// signaled write holds its send request until it completes.
type timeRing struct {
	at      []int64
	head, n int
}

func (r *timeRing) init(n int) { r.at = make([]int64, n) }

func (r *timeRing) push(t int64) {
	if r.n == len(r.at) {
		r.pop() // cannot happen: the send queue is no deeper
	}
	r.at[(r.head+r.n)%len(r.at)] = t
	r.n++
}

func (r *timeRing) front() int64 { return r.at[r.head] }

func (r *timeRing) pop() {
	if r.n > 0 {
		r.head = (r.head + 1) % len(r.at)
		r.n--
	}
}

func (r *timeRing) reset() { r.head, r.n = 0, 0 }

func zero16(b []byte) bool {
	return binary.LittleEndian.Uint64(b) == 0 && binary.LittleEndian.Uint64(b[8:]) == 0
}

// pollTokensLocked feeds the tokens that arrived on path p's ring.
func (c *Conn) pollTokensLocked(now int64, p *path) bool {
	mask := uint32(c.lay.window - 1)
	last := -1
	for i := 0; i < p.fifo.n; i++ {
		id := p.fifo.at(i)
		off := c.lay.tokenOff(p.idx, int(id&mask))
		b := c.ring[off : off+cell.TokenSize]
		if zero16(b) {
			continue
		}
		t, ok := cell.ReadToken(b)
		if !ok || t.ID != id || t.Path != p.idx {
			continue
		}
		clear(b)
		c.eng.Token(now, t)
		c.fed = true
		last = i
	}
	if last < 0 {
		return false
	}
	p.fifo.drop(last + 1)
	p.lastSeen = now
	c.counters.tokens++
	return true
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
		if p.fifo.n > 0 && c.pollTokensLocked(now, p) {
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
