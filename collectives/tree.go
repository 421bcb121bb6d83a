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
