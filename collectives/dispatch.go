package collectives

// The glue between a collective and its algorithms: block layout, the
// local copy of this rank's own block, and the working buffers.

func (x *run) allGather() error {
	op := x.op
	var off []int
	if op.kind == kAllGatherV {
		off = x.offsets(0, 0, op.counts)
	} else {
		off = x.equalOffsets(0, op.count)
	}
	r := x.g.rank
	copyUnlessSame(op.recv[off[r]:off[r+1]], op.send)
	if op.algo == Ring {
		return x.ringAllGather(op.recv, off)
	}
	return x.rdAllGather(op.recv, off)
}

func (x *run) reduceScatter() error {
	op := x.op
	off := x.equalOffsets(0, op.count)
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
