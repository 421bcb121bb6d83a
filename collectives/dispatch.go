package collectives

// The glue between a collective and its algorithms: block layout, the
// local copy of this rank's own block, and the working buffers.

// blocks returns the byte offsets of the ranks' blocks of a gathering or
// scattering collective, in slot 0: per the counts of a V collective,
// op.count elements each otherwise.
func (x *run) blocks() []int {
	if op := x.op; op.kind.varies() {
		return x.offsets(0, 0, op.counts)
	}
	return x.equalOffsets(0, x.op.count)
}

func (x *run) allGather() error {
	op := x.op
	off := x.blocks()
	r := x.g.rank
	copyUnlessSame(op.recv[off[r]:off[r+1]], op.send)
	if op.algo == Ring {
		return x.ringAllGather(op.recv, off)
	}
	return x.rdAllGather(op.recv, off)
}

func (x *run) reduceScatter() error {
	op := x.op
	off := x.blocks()
	work := op.send
	if !op.inPlace {
		// The partial results of the other blocks need room; send is
		// the caller's and stays as it was.
		var err error
		if work, err = x.g.sc.buf(bufWork, len(op.send)); err != nil {
			return x.fail(-1, -1, "", err)
		}
	}
	if op.algo == HalvingDoubling {
		return x.hdReduceScatter(op.send, work, op.recv, off)
	}
	if err := x.ringReduceScatter(op.send, work, op.recv, off); err != nil {
		return err
	}
	x.finish(op.recv)
	return nil
}

func (x *run) allToAll() error {
	op := x.op
	var soff, roff []int
	if op.kind == kAllToAll {
		soff = x.equalOffsets(0, op.count)
		roff = soff
	} else {
		soff = x.offsets(0, 0, op.counts)
		roff = x.offsets(1, 0, op.counts2)
	}
	send := op.send
	if op.inPlace {
		// Blocks arrive where blocks still to be sent are.
		tmp, err := x.g.sc.buf(bufWork, len(send))
		if err != nil {
			return x.fail(-1, -1, "", err)
		}
		copy(tmp, send)
		send = tmp
	}
	return x.pairwise(send, op.recv, soff, roff)
}

func (x *run) gather() error {
	if x.op.algo == Linear {
		return x.linearGather(x.blocks())
	}
	return x.treeGather(x.blocks())
}

func (x *run) scatter() error {
	if x.op.algo == Linear {
		return x.linearScatter(x.blocks())
	}
	return x.treeScatter(x.blocks())
}
