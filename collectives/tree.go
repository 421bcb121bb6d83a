package collectives

// Binomial trees for Broadcast and Reduce. With ranks renumbered so that
// the root is 0 (vr = r - root mod n), vr's parent is vr with its lowest
// set bit cleared and its children are vr + 2^j for the 2^j below that
// bit: ceil(log2 n) rounds, the whole message each; for small messages.
// The tag's step is j, the same on both ends of an edge.

func (x *run) treeRank(vr int) int { return mod(vr+x.op.root, x.g.size) }

func (x *run) treeBroadcast() error {
	op := x.op
	n := x.g.size
	vr := mod(x.g.rank-op.root, n)
	buf := op.recv
	if vr == 0 {
		copyUnlessSame(buf, op.send)
	}
	mask, j := 1, 0
	for mask < n {
		if vr&mask != 0 {
			if err := x.recv(x.treeRank(vr-mask), j, buf); err != nil {
				return err
			}
			break
		}
		mask, j = 2*mask, j+1
	}
	for mask, j = mask/2, j-1; mask > 0; mask, j = mask/2, j-1 {
		if vr+mask < n {
			if err := x.later(x.treeRank(vr+mask), j, buf); err != nil {
				return err
			}
		}
	}
	return x.flush()
}

func (x *run) treeReduce() error {
	op := x.op
	n := x.g.size
	vr := mod(x.g.rank-op.root, n)
	in := op.send
	work := op.recv
	if vr != 0 {
		var err error
		if work, err = x.g.sc.buf(bufWork, len(in)); err != nil {
			return x.fail(-1, -1, "", err)
		}
	}
	tmp, err := x.g.sc.buf(bufTmp, len(in))
	if err != nil {
		return x.fail(-1, -1, "", err)
	}
	src := in
	for mask, j := 1, 0; mask < n; mask, j = 2*mask, j+1 {
		if vr&mask != 0 {
			return x.send(x.treeRank(vr-mask), j, src)
		}
		if child := vr | mask; child < n {
			if err := x.recv(x.treeRank(child), j, tmp); err != nil {
				return err
			}
			x.combine(work, src, tmp)
			src = work
		}
	}
	// Only the root gets here, and with n > 1 it has combined at least
	// once, so the result is in recv.
	x.finish(work)
	return nil
}

// Binomial trees for Gather and Scatter, over the same numbering. vr's
// subtree is the virtual ranks [vr, vr+2^j) below n, 2^j its lowest set
// bit (all of them for the root), and their blocks travel together: a
// Gather sends each subtree's up to its parent in one message once it has
// them all, a Scatter sends each child its subtree's down. A rank between
// the root and the leaves keeps its subtree's blocks in scratch, in
// virtual order; the root's are in the caller's buffer in rank order,
// where a subtree's blocks are contiguous unless they wrap past rank n-1,
// and then go through scratch too. The tag's step is the round of the
// edge, as for Broadcast.

// subtree returns the end of vr's subtree and the round of its edge to
// its parent (for the root, the number of rounds).
func (x *run) subtree(vr int) (end, up int) {
	n := x.g.size
	mask := 1
	for mask < n && vr&mask == 0 {
		mask, up = 2*mask, up+1
	}
	return min(vr+mask, n), up
}

// vOffsets returns the byte offsets of the blocks at off in virtual
// order: virtual rank v's is [voff[v], voff[v+1]).
func (x *run) vOffsets(off []int) []int {
	n := x.g.size
	voff := x.g.sc.intsN(1, n+1)
	for v := range n {
		r := x.treeRank(v)
		voff[v+1] = voff[v] + off[r+1] - off[r]
	}
	return voff
}

// rootSpan returns the bytes of the blocks of virtual ranks [a, b), a > 0,
// in a buffer in rank order, if they are contiguous there.
func (x *run) rootSpan(off []int, a, b int) (lo, hi int, ok bool) {
	n, ra, rb := x.g.size, x.op.root+a, x.op.root+b
	switch {
	case rb <= n:
		return off[ra], off[rb], true
	case ra >= n:
		return off[ra-n], off[rb-n], true
	}
	return 0, 0, false
}

// childSpan returns the blocks of child subtree [c, ce) in buf, this
// rank's: in virtual order from vr's block, or at the root in rank order,
// where they may wrap (false).
func (x *run) childSpan(buf []byte, off, voff []int, vr, c, ce int) ([]byte, bool) {
	if vr != 0 {
		return buf[voff[c]-voff[vr] : voff[ce]-voff[vr]], true
	}
	if lo, hi, ok := x.rootSpan(off, c, ce); ok {
		return buf[lo:hi], true
	}
	return nil, false
}

// unwrap copies the blocks of virtual ranks [a, b), which wrap past rank
// n-1, between staged (in virtual order) and buf (in rank order): into
// buf if in, out of it otherwise.
func (x *run) unwrap(buf, staged []byte, off []int, a, b int, in bool) {
	n, ra, rb := x.g.size, x.op.root+a, x.op.root+b
	head := off[n] - off[ra]
	if in {
		copy(buf[off[ra]:], staged[:head])
		copy(buf[:off[rb-n]], staged[head:])
		return
	}
	copy(staged, buf[off[ra]:off[n]])
	copy(staged[head:], buf[:off[rb-n]])
}

func (x *run) treeGather(off []int) error {
	op := x.op
	n := x.g.size
	vr := mod(x.g.rank-op.root, n)
	voff := x.vOffsets(off)
	end, up := x.subtree(vr)
	parent := x.treeRank(vr - 1<<up)
	if vr != 0 && end == vr+1 {
		return x.send(parent, up, op.send) // a leaf
	}
	buf := op.recv
	if vr == 0 {
		copyUnlessSame(buf[off[op.root]:off[op.root+1]], op.send)
	} else {
		var err error
		if buf, err = x.g.sc.buf(bufWork, voff[end]-voff[vr]); err != nil {
			return x.fail(-1, -1, "", err)
		}
		copy(buf, op.send)
	}
	// Every child's receive is posted at once: they finish their
	// subtrees in any order.
	reqs := x.requests(up)
	wrapped := -1
	var staged []byte
	for j := range up {
		c := vr + 1<<j
		if c >= n {
			reqs = reqs[:j]
			break
		}
		ce := min(c+1<<j, n)
		into, ok := x.childSpan(buf, off, voff, vr, c, ce)
		if !ok {
			var err error
			if staged, err = x.g.sc.buf(bufTmp, voff[ce]-voff[c]); err != nil {
				return x.fail(-1, -1, "", err)
			}
			into, wrapped = staged, j
		}
		req, err := x.irecv(x.treeRank(c), j, into)
		if err != nil {
			return err
		}
		reqs[j] = req
	}
	for j, req := range reqs {
		c := vr + 1<<j
		ce := min(c+1<<j, n)
		if err := x.waitRecv(req, x.treeRank(c), j, voff[ce]-voff[c]); err != nil {
			return err
		}
		if j == wrapped {
			x.unwrap(buf, staged, off, c, ce, true)
		}
	}
	if vr == 0 {
		return nil
	}
	return x.send(parent, up, buf)
}

func (x *run) treeScatter(off []int) error {
	op := x.op
	n := x.g.size
	vr := mod(x.g.rank-op.root, n)
	voff := x.vOffsets(off)
	end, up := x.subtree(vr)
	buf := op.send
	if vr != 0 {
		parent := x.treeRank(vr - 1<<up)
		if end == vr+1 {
			return x.recv(parent, up, op.recv) // a leaf
		}
		var err error
		if buf, err = x.g.sc.buf(bufWork, voff[end]-voff[vr]); err != nil {
			return x.fail(-1, -1, "", err)
		}
		if err := x.recv(parent, up, buf); err != nil {
			return err
		}
	}
	// The largest subtree first: it has the furthest to go.
	for j := up - 1; j >= 0; j-- {
		c := vr + 1<<j
		if c >= n {
			continue
		}
		ce := min(c+1<<j, n)
		from, ok := x.childSpan(buf, off, voff, vr, c, ce)
		if !ok {
			var err error
			if from, err = x.g.sc.buf(bufTmp, voff[ce]-voff[c]); err != nil {
				return x.fail(-1, -1, "", err)
			}
			x.unwrap(buf, from, off, c, ce, false)
		}
		if err := x.later(x.treeRank(c), j, from); err != nil {
			return err
		}
	}
	if vr == 0 {
		copyUnlessSame(op.recv, buf[off[op.root]:off[op.root+1]])
	} else {
		copy(op.recv, buf)
	}
	return x.flush()
}
