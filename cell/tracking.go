package cell

import "github.com/rdmacell/rdmacell/verbs"

// cell is one flowcell in the tracking queue.
type cell struct {
	id     uint32
	rseq   uint32 // sequence number of its range
	off, n int64  // its bytes within the range
	// copies counts copies posted and not yet resolved: landed (a token),
	// or made harmless (their path reset or closed).
	copies   int
	attempts int
	// timeouts is the cell's back-off shift: how many of its copies were
	// at the head of a path given up for a soft timeout. Its next copies
	// may wait 2^timeouts × T_soft (Config.MaxSoftBackoff).
	timeouts uint8
	acked    bool // some copy landed
	queued   bool // waiting in the re-post queue
	done     bool // resolved and counted off its range
	tail     bool // its first copy carried its range's tail
	// Storage of the cell's chain, rebuilt for every post: a re-post is a
	// new pair of work requests over the same memory, never a copy.
	wr  [2]verbs.SendWR
	sge [2]verbs.SGE
}

// resolved reports whether nothing about the cell is pending: it landed
// and no copy of it can land any more.
func (c *cell) resolved() bool { return c.copies == 0 && c.acked }

// tracker is the tracking queue: a sliding window of cells from NEXT_ACK
// (the oldest cell not resolved) to NEXT_SEND (the next id to assign),
// each in slot id mod Window. A cell is resolved only when no copy of it
// can land any more, so the window cannot slide past a late copy and its
// slot (and the token ring slot of its id) is never reused under it.
type tracker struct {
	cells    []cell
	mask     uint32
	nextSend uint32
	nextAck  uint32
	// repost is a ring of ids to post again, served before new cells.
	repost    []uint32
	rhead, rn int
}

func (t *tracker) init(window int, first uint32) {
	// A cell is written whole when its id is opened, and only opened ids
	// are looked up: a reset engine's old cells need no clearing, which
	// for a simulator's millions of mostly one-cell flows is most of
	// the reset.
	*t = tracker{
		cells:    resize(t.cells, window),
		mask:     uint32(window - 1),
		nextSend: first,
		nextAck:  first,
		repost:   reuse(t.repost, window),
	}
}

func (t *tracker) at(id uint32) *cell { return &t.cells[id&t.mask] }

// has reports whether id is in the window.
func (t *tracker) has(id uint32) bool { return inWindow(id, t.nextAck, t.nextSend-t.nextAck) }

func (t *tracker) full() bool { return int(t.nextSend-t.nextAck) >= len(t.cells) }

// open assigns the next id to a new cell.
func (t *tracker) open(rseq uint32, off, n int64) *cell {
	c := t.at(t.nextSend)
	*c = cell{id: t.nextSend, rseq: rseq, off: off, n: n}
	t.nextSend++
	return c
}

func (t *tracker) queue(c *cell) {
	if c.queued {
		return
	}
	c.queued = true
	t.repost[(t.rhead+t.rn)%len(t.repost)] = c.id
	t.rn++
}

// peekRepost returns the first cell still worth re-posting, dropping those
// that landed meanwhile (a late token).
func (t *tracker) peekRepost() *cell {
	for t.rn > 0 {
		c := t.at(t.repost[t.rhead])
		if !c.acked {
			return c
		}
		c.queued = false
		t.popRepost()
	}
	return nil
}

func (t *tracker) popRepost() {
	t.rhead = (t.rhead + 1) % len(t.repost)
	t.rn--
}

// build writes the cell's chain into its storage and returns its head:
// WRITE of all but the last MTU, then the signaled WRITE_WITH_IMM of the
// last MTU carrying the id, or the WRITE_WITH_IMM alone for a small cell.
// The signalling request goes last so that its completion at the receiver
// proves the whole cell landed (RC places a QP's writes in order).
func (c *cell) build(path, mtu int, local uint64, lkey uint32, remote uint64, rkey uint32) *verbs.SendWR {
	tail := min(c.n, int64(mtu))
	head := c.n - tail
	t := &c.wr[1]
	*t = verbs.SendWR{
		ID:         cellWRID(path, c.id, true),
		Opcode:     verbs.OpWriteImm,
		Flags:      verbs.Signaled,
		RemoteAddr: remote + uint64(c.off+head),
		RKey:       rkey,
		Imm:        c.id,
	}
	if tail > 0 {
		c.sge[1] = verbs.SGE{Addr: local + uint64(c.off+head), Length: uint32(tail), LKey: lkey}
		t.SGL = c.sge[1:2]
	}
	if head == 0 {
		return t
	}
	c.sge[0] = verbs.SGE{Addr: local + uint64(c.off), Length: uint32(head), LKey: lkey}
	c.wr[0] = verbs.SendWR{
		ID:         cellWRID(path, c.id, false),
		Next:       t,
		Opcode:     verbs.OpWrite,
		SGL:        c.sge[0:1],
		RemoteAddr: remote + uint64(c.off),
		RKey:       rkey,
	}
	return &c.wr[0]
}
