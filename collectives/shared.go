package collectives

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
)

// The Shared algorithm: every collective through the segment of
// sharedmem.go, for groups whose ranks share a host. Each is a
// pipeline of phases: in phase j a rank deposits piece j of what it
// contributes into its current slot and takes what the others deposited
// in phase j-1 from their previous slots. Pieces are s.chunk bytes (whole
// elements), or a share of that per destination for AllToAll(V) and
// ReduceScatter. Outputs are written only from phase 1 on, after the
// fingerprints were compared.

// shSync ends the current phase j. After the first it compares the
// fingerprints the ranks wrote in it.
func (x *run) shSync(j int) error {
	s := x.g.shm
	s.arrive()
	if r, err := s.await(x.ctx); err != nil {
		return x.fail(j, r, "wait for", err)
	}
	// The records are in the segment whatever the options, so a Shared
	// operation compares them even when the exchange is turned off.
	if j != 0 || (!x.g.verify && x.op.algo != Shared) {
		return nil
	}
	mine := *s.hash(s.me, s.step)
	for r := range s.n {
		if *s.hash(r, s.step) != mine {
			return x.shDisagree()
		}
	}
	return nil
}

// shDisagree reports the fingerprints as the exchange would have.
func (x *run) shDisagree() error {
	s := x.g.shm
	buf, err := x.g.sc.buf(bufVerify, s.n*fpSize)
	if err != nil {
		return x.fail(0, -1, "", err)
	}
	for i := range s.n {
		copy(buf[i*fpSize:], s.fp(i, s.step))
	}
	return x.disagree(buf, 0)
}

// shChunkBytes is the pipelining unit for pieces of at most limit bytes,
// in whole elements, at least one.
func (x *run) shChunkBytes(limit int) int { return max(limit/x.esize, 1) * x.esize }

// shPieces is how many pieces of c bytes cover total, at least one so
// that every operation has its first barrier.
func shPieces(total, c int) int { return max((total+c-1)/c, 1) }

// piece returns bytes [lo, hi) of piece j of a buffer of total bytes cut
// into pieces of c.
func piece(j, c, total int) (lo, hi int) { return min(j*c, total), min((j+1)*c, total) }

// shCombine reduces bytes [lo, hi) of every rank's previous data slot into
// dst, in rank order, so that every rank that combines the same bytes gets
// the same bits.
//
// own, if not nil, is this rank's contribution where the caller has it:
// still in cache, unlike its slot, which large copies write around the
// cache. It is not used where dst overlaps it and the rank's turn comes
// after dst was first written.
func (x *run) shCombine(dst, own []byte, lo, hi int) {
	s := x.g.shm
	if s.me >= 2 && overlap(dst, own) {
		own = nil
	}
	x.combineRanks(dst, func(r int) []byte {
		if r == s.me && own != nil {
			return own
		}
		d, _ := s.prev(r)
		return d[lo:hi]
	})
}

// shCombineInline is shCombine over the inline data the ranks published
// with the barrier just passed.
func (x *run) shCombineInline(dst []byte) {
	s := x.g.shm
	x.combineRanks(dst, func(r int) []byte { return s.inline(r, s.step)[:len(dst)] })
}

// combineRanks reduces every rank's src into dst, in rank order.
func (x *run) combineRanks(dst []byte, src func(r int) []byte) {
	if x.op.mode != modeDefault {
		x.foldRanks(dst, src)
		return
	}
	x.combine(dst, src(0), src(1))
	for r := 2; r < x.g.size; r++ {
		x.combine(dst, dst, src(r))
	}
	x.finish(dst)
}

func (x *run) shBarrier() error { return x.shSync(0) }

// shAllReduce: a small vector, or any over two ranks, is combined whole
// by every rank, chunk by chunk, as Reduce does at its root: one barrier
// per chunk, and for two ranks less memory traffic than sharing the work.
// A larger one over more ranks is a three-stage pipeline: in phase j rank
// r deposits chunk j, combines its share of chunk j-1 (into its output
// and its result region), and copies the others' shares of chunk j-2 from
// their result regions.
func (x *run) shAllReduce() error {
	op, s := x.op, x.g.shm
	total := len(op.send)
	if total <= shDirect || s.n == 2 {
		return x.shCombineAll(true)
	}
	c := x.shChunkBytes(s.chunk)
	m := shPieces(total, c)
	for j := 0; ; j++ {
		_, res := s.cur()
		if j < m {
			x.shPut(op.send, j, c)
		}
		if k := j - 1; k >= 0 && k < m {
			lo, hi := x.share(k, c, total, s.me)
			x.shCombine(op.recv[k*c+lo:k*c+hi], op.send[k*c+lo:k*c+hi], lo, hi)
			copy(res[lo:hi], op.recv[k*c+lo:k*c+hi])
		}
		if k := j - 2; k >= 0 {
			for r := range s.n {
				if r != s.me {
					lo, hi := x.share(k, c, total, r)
					_, pres := s.prev(r)
					copy(op.recv[k*c+lo:k*c+hi], pres[lo:hi])
				}
			}
		}
		if j == m+1 {
			return nil
		}
		if err := x.shSync(j); err != nil {
			return err
		}
	}
}

// share returns rank r's share of chunk k, in bytes from the chunk's
// start: its elements split as evenly as possible, the first ones one
// more.
func (x *run) share(k, c, total, r int) (lo, hi int) {
	a, b := piece(k, c, total)
	e := (b - a) / x.esize
	n := x.g.size
	first := r*(e/n) + min(r, e%n)
	cnt := e / n
	if r < e%n {
		cnt++
	}
	return first * x.esize, (first + cnt) * x.esize
}

func (x *run) shReduce() error { return x.shCombineAll(false) }

// shCombineAll: in phase j every rank deposits chunk j, and every rank
// (all) or the root combines chunk j-1 of all of them.
func (x *run) shCombineAll(all bool) error {
	op, s := x.op, x.g.shm
	total := len(op.send)
	if total <= shInline {
		copy(s.inline(s.me, s.step+1), op.send)
		if err := x.shSync(0); err != nil {
			return err
		}
		if all || s.me == op.root {
			x.shCombineInline(op.recv)
		}
		return nil
	}
	c := x.shChunkBytes(s.chunk)
	m := shPieces(total, c)
	for j := 0; ; j++ {
		// Combining first finds chunk j-1 of send where depositing it
		// left it: in cache.
		if j > 0 && (all || s.me == op.root) {
			lo, hi := piece(j-1, c, total)
			x.shCombine(op.recv[lo:hi], op.send[lo:hi], 0, hi-lo)
		}
		if j < m {
			x.shPut(op.send, j, c)
		}
		if j == m {
			return nil
		}
		if err := x.shSync(j); err != nil {
			return err
		}
	}
}

// shBroadcast: the root deposits chunk j, the others copy chunk j-1.
func (x *run) shBroadcast() error {
	op, s := x.op, x.g.shm
	total := len(op.recv)
	c := x.shChunkBytes(s.chunk)
	m := shPieces(total, c)
	for j := 0; ; j++ {
		if s.me == op.root {
			if j > 0 {
				// Where depositing it left it: in cache.
				lo, hi := piece(j-1, c, total)
				copyUnlessSame(op.recv[lo:hi], op.send[lo:hi])
			}
			if j < m {
				x.shPut(op.send, j, c)
			}
		} else if j > 0 {
			d, _ := s.prev(op.root)
			lo, hi := piece(j-1, c, total)
			copy(op.recv[lo:hi], d)
		}
		if j == m {
			return nil
		}
		if err := x.shSync(j); err != nil {
			return err
		}
	}
}

// longest is the largest block at the offsets off.
func longest(off []int) int {
	l := 0
	for r := range len(off) - 1 {
		l = max(l, off[r+1]-off[r])
	}
	return l
}

// shGather: every rank deposits chunk j of its block and copies chunk j-1
// of the others' (AllGather), or the root alone copies them, and takes its
// own from send (Gather).
func (x *run) shGather() error {
	op, s := x.op, x.g.shm
	off := x.blocks()
	all := op.kind == kAllGather || op.kind == kAllGatherV
	takes := all || s.me == op.root
	deposits := all || s.me != op.root
	c := x.shChunkBytes(s.chunk)
	m := shPieces(longest(off), c)
	var mine []byte
	if takes {
		mine = op.recv[off[s.me]:off[s.me+1]]
	}
	for j := 0; ; j++ {
		if j > 0 && takes {
			// Where depositing it left it: in cache.
			lo, hi := piece(j-1, c, len(op.send))
			copyUnlessSame(mine[lo:hi], op.send[lo:hi])
		}
		if j < m && deposits {
			x.shPut(op.send, j, c)
		}
		if j > 0 && takes {
			for r := range s.n {
				if r != s.me {
					blk := op.recv[off[r]:off[r+1]]
					lo, hi := piece(j-1, c, len(blk))
					d, _ := s.prev(r)
					copy(blk[lo:hi], d)
				}
			}
		}
		if j == m {
			return nil
		}
		if err := x.shSync(j); err != nil {
			return err
		}
	}
}

// shAllToAll: a slot holds a region per destination; in phase j every
// rank deposits chunk j of each block it sends and copies chunk j-1 of
// the block each rank deposited for it.
func (x *run) shAllToAll() error {
	op := x.op
	off := x.equalOffsets(0, op.count)
	return x.shExchange(op.send, off, off, op.count*x.esize, 0)
}

// shExchange moves block r of send (bytes soff[r] to soff[r+1]) to rank
// r, where it lands in recv at roff of this rank, in chunks of a slot's
// share per destination; longest is the largest block of any rank. Its
// first phase is phase j0: 0, or 1 after AllToAllV's phase of counts.
func (x *run) shExchange(send []byte, soff, roff []int, longest, j0 int) error {
	op, s := x.op, x.g.shm
	q := x.shChunkBytes(s.chunk / s.n)
	m := shPieces(longest, q)
	for j := 0; ; j++ {
		if j < m {
			x.shDeposit(send, soff, j, q, false)
		}
		if j == 1 {
			copyUnlessSame(op.recv[roff[s.me]:roff[s.me+1]], send[soff[s.me]:soff[s.me+1]])
		}
		if j > 0 {
			for r := range s.n {
				if r != s.me {
					blk := op.recv[roff[r]:roff[r+1]]
					lo, hi := piece(j-1, q, len(blk))
					from, _ := s.prev(r)
					copy(blk[lo:hi], from[s.me*q:])
				}
			}
		}
		if j == m {
			return nil
		}
		if err := x.shSync(j0 + j); err != nil {
			return err
		}
	}
}

// shReduceScatter: laid out as AllToAll; in phase j every rank deposits
// chunk j of every block and combines chunk j-1 of its own from every
// rank's region for it.
func (x *run) shReduceScatter() error {
	op, s := x.op, x.g.shm
	blk := len(op.recv)
	off := x.blocks()
	q := x.shChunkBytes(s.chunk / s.n)
	m := shPieces(longest(off), q)
	for j := 0; ; j++ {
		if j < m {
			x.shDeposit(op.send, off, j, q, true)
		}
		if j > 0 {
			lo, hi := piece(j-1, q, blk)
			x.shCombine(op.recv[lo:hi], nil, s.me*q, s.me*q+hi-lo)
		}
		if j == m {
			return nil
		}
		if err := x.shSync(j); err != nil {
			return err
		}
	}
}

// shScatter: laid out as AllToAll; in phase j the root deposits chunk j
// of the block of every other rank in that rank's region of its slot, and
// every other rank copies chunk j-1 of its block from there.
func (x *run) shScatter() error {
	op, s := x.op, x.g.shm
	off := x.blocks()
	q := x.shChunkBytes(s.chunk / s.n)
	m := shPieces(longest(off), q)
	for j := 0; ; j++ {
		switch {
		case s.me != op.root && j > 0:
			lo, hi := piece(j-1, q, len(op.recv))
			from, _ := s.prev(op.root)
			copy(op.recv[lo:hi], from[s.me*q:])
		case s.me == op.root && j == 1:
			// Outputs are written once the fingerprints agreed.
			copyUnlessSame(op.recv, op.send[off[s.me]:off[s.me+1]])
		}
		if j < m && s.me == op.root {
			x.shDeposit(op.send, off, j, q, false)
		}
		if j == m {
			return nil
		}
		if err := x.shSync(j); err != nil {
			return err
		}
	}
}

// shPut puts chunk j (of c bytes) of src into this rank's current slot.
func (x *run) shPut(src []byte, j, c int) {
	d, _ := x.g.shm.cur()
	lo, hi := piece(j, c, len(src))
	copy(d, src[lo:hi])
}

// shDeposit puts chunk j (of q bytes) of each block of send (block r is
// bytes off[r] to off[r+1]) into the region of the current slot for the
// block's rank; this rank's own block only if own.
func (x *run) shDeposit(send []byte, off []int, j, q int, own bool) {
	s := x.g.shm
	d, _ := s.cur()
	for r := range s.n {
		if own || r != s.me {
			blk := send[off[r]:off[r+1]]
			lo, hi := piece(j, q, len(blk))
			copy(d[r*q:], blk[lo:hi])
		}
	}
}

// shAllToAllV: AllToAll with blocks of any size. Counts differ from rank
// to rank, so the fingerprint cannot cover them: phase 0 publishes every
// rank's send and receive counts in its slot instead, so that every rank
// checks every pair alike (and all fail alike when two disagree, with no
// data moved and the group still usable) and knows the longest block,
// which sets the number of phases. The data then moves as AllToAll's,
// one phase later.
func (x *run) shAllToAllV() error {
	op, s := x.op, x.g.shm
	n, me := s.n, s.me
	d, _ := s.cur()
	for r := range n {
		binary.LittleEndian.PutUint64(d[8*r:], uint64(op.counts[r]))
		binary.LittleEndian.PutUint64(d[8*(n+r):], uint64(op.counts2[r]))
	}
	if err := x.shSync(0); err != nil {
		return err
	}
	longest := 0
	var odd []int
	var bad []string
	for r := range n {
		from, _ := s.prev(r)
		for dst := range n {
			to, _ := s.prev(dst)
			sent := int(binary.LittleEndian.Uint64(from[8*dst:]))
			want := int(binary.LittleEndian.Uint64(to[8*(n+r):]))
			longest = max(longest, sent)
			if sent != want {
				odd = append(odd, r)
				bad = append(bad, fmt.Sprintf("rank %d sends %d elements to rank %d, which expects %d", r, sent, dst, want))
			}
		}
	}
	if bad != nil {
		x.aligned = true // every rank saw the same counts and stops here
		slices.Sort(odd)
		return &MismatchError{Rank: me, Op: op.kind.String(), Seq: op.seq, Odd: slices.Compact(odd), Detail: strings.Join(bad, "; ")}
	}
	send := op.send
	if op.inPlace {
		// Blocks arrive where blocks still to be sent are.
		tmp, err := x.g.sc.buf(bufWork, len(send))
		if err != nil {
			return x.fail(1, -1, "", err)
		}
		copy(tmp, send)
		send = tmp
	}
	return x.shExchange(send, x.offsets(0, 0, op.counts), x.offsets(1, 0, op.counts2), longest*x.esize, 1)
}
