package bind

import (
	"encoding/binary"

	"github.com/rdmacell/rdmacell/cell"
)

// TokenRing reads one path's section of a sender's token ring: Window
// slots of cell.TokenSize bytes that the peer writes with one-sided
// WRITEs, token id in slot cell.TokenSlot(id, Window). Nothing signals a
// token's arrival, so the binding polls the slots of the cells it posted
// on the path and whose tokens it has not read, oldest first. A token is
// taken only if it decodes, names this path and matches the cell posted
// there: a slot of another cell's token (a copy of a cell on another
// path, a cell of an older round of the window) is left for its own cell.
// RC writes a path's tokens in posting order, so a token found for one
// cell settles every cell posted before it on the path: their tokens were
// lost with a write the peer did not signal, and this one acknowledges
// them too (see package cell). A slot read is zeroed, so an old record
// never mixes with a new one, and a zero slot is skipped with two loads.
// A slot that does not decode is left alone: it may be a write still
// landing.
//
// The ids are bounded by the receive depth: the engine never has more
// WRITE_WITH_IMM outstanding on a path. Were more posted, the oldest
// would be dropped, which only costs a token a later one covers.
type TokenRing struct {
	slots  []byte
	window int
	ids    []uint32
	head   int
	n      int
	watch  func(cell.Token)
}

// Watch has fn called with every token Poll feeds, before the engine
// takes it: for a trace.
func (r *TokenRing) Watch(fn func(cell.Token)) { r.watch = fn }

// Init makes r the reader of slots, window token slots, for at most
// depth cells outstanding.
func (r *TokenRing) Init(slots []byte, window, depth int) {
	*r = TokenRing{slots: slots[:window*cell.TokenSize], window: window, ids: make([]uint32, max(depth, 1)), watch: r.watch}
}

// Slot returns the bytes of cell id's slot.
func (r *TokenRing) Slot(id uint32) []byte {
	off := cell.TokenSlot(id, r.window) * cell.TokenSize
	return r.slots[off : off+cell.TokenSize]
}

// Posted records that cell id was posted on the path: its token is
// expected in its slot.
func (r *TokenRing) Posted(id uint32) {
	if r.n == len(r.ids) {
		r.drop(1)
	}
	r.ids[(r.head+r.n)%len(r.ids)] = id
	r.n++
}

// Pending returns how many cells posted on the path have had no token
// read.
func (r *TokenRing) Pending() int { return r.n }

// Waiting reports whether cell id's slot holds something, perhaps its
// token: a binding that polls only on news polls again once it posts a
// cell whose token came first.
func (r *TokenRing) Waiting(id uint32) bool { return !zero16(r.Slot(id)) }

func (r *TokenRing) at(i int) uint32 { return r.ids[(r.head+i)%len(r.ids)] }

func (r *TokenRing) drop(k int) {
	k = min(k, r.n)
	r.head = (r.head + k) % len(r.ids)
	r.n -= k
}

// Poll feeds e the tokens of path q found in their slots, in posting
// order, and reports whether it found any. It allocates nothing.
func (r *TokenRing) Poll(now int64, e *cell.Engine, q int) bool {
	last := -1
	for i := 0; i < r.n; i++ {
		id := r.at(i)
		b := r.Slot(id)
		if zero16(b) {
			continue
		}
		t, ok := cell.ReadToken(b)
		if !ok || t.ID != id || t.Path != q {
			continue
		}
		clear(b)
		if r.watch != nil {
			r.watch(t)
		}
		e.Token(now, t)
		last = i
	}
	if last < 0 {
		return false
	}
	r.drop(last + 1)
	return true
}

// Forget drops the cells posted and zeroes every slot: the path's
// incarnation is gone, and its next starts with a clean ring. Call it
// after a last Poll (see Path).
func (r *TokenRing) Forget() {
	r.head, r.n = 0, 0
	clear(r.slots)
}

func zero16(b []byte) bool {
	return binary.LittleEndian.Uint64(b) == 0 && binary.LittleEndian.Uint64(b[8:]) == 0
}
