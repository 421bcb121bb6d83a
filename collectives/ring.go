package collectives

// Ring algorithms. The vector is cut into n blocks; in the reduce-scatter
// phase, at step s, rank r sends block r-s-1 to rank r+1 and receives
// block r-s-2 from rank r-1, combining it with its own data and sending
// the result on at the next step, so that after n-1 steps it holds block r
// reduced over all ranks. In the all-gather phase the reduced blocks go
// round once more. Each rank sends and receives 2(n-1)/n of the vector,
// the least any algorithm can, in 2(n-1) steps.
//
// Blocks are cut into chunks of ChunkBytes. A rank forwards a chunk as
// soon as it has combined it, and keeps pipelineSlots chunk receives
// posted ahead, so receiving, combining and sending overlap, and chunks
// of one block travel round the ring behind each other rather than the
// whole block step by step.

// ringStepAG offsets the steps of the all-gather phase in tags, so that a
// report says which phase a message belonged to.
const ringStepAG = 1 << 24

// ringReduceScatter reduces block r of in (read only) into final, using
// work (as long as in, possibly in itself) for the partial results of the
// other blocks. off holds the n+1 block offsets.
func (x *run) ringReduceScatter(in, work, final []byte, off []int) error {
	n, r := x.g.size, x.g.rank
	right, left := mod(r+1, n), mod(r-1, n)
	ownLo := off[r]

	// What this rank sends at step 0 is its own block r-1, as is.
	sent := 0
	for lo, hi := off[mod(r-1, n)], off[mod(r-1, n)+1]; lo < hi; lo += x.cb {
		if err := x.later(right, sent, in[lo:min(lo+x.cb, hi)]); err != nil {
			return err
		}
		sent++
	}
	// What it receives at step s is block r-s-2, which it combines and
	// (but for the last step, its own block) sends at step s+1.
	recvs := x.plan(off, r-2, n-1)
	slots, width := min(pipelineSlots, len(recvs)), 0
	for _, c := range recvs {
		width = max(width, c.hi-c.lo)
	}
	tmp, err := x.g.sc.buf(bufTmp, slots*width)
	if err != nil {
		return x.fail(-1, -1, "", err)
	}
	reqs := x.requests(slots)
	post := func(i int) error {
		c := recvs[i]
		req, err := x.irecv(left, i, tmp[(i%slots)*width:][:c.hi-c.lo])
		reqs[i%slots] = req
		return err
	}
	for i := range slots {
		if err := post(i); err != nil {
			return err
		}
	}
	for i, c := range recvs {
		got := tmp[(i%slots)*width:][:c.hi-c.lo]
		if err := x.waitRecv(reqs[i%slots], left, i, len(got)); err != nil {
			return err
		}
		if c.step == n-2 {
			x.combine(final[c.lo-ownLo:c.hi-ownLo], in[c.lo:c.hi], got)
		} else {
			x.combine(work[c.lo:c.hi], in[c.lo:c.hi], got)
			if err := x.later(right, sent, work[c.lo:c.hi]); err != nil {
				return err
			}
			sent++
		}
		if i+slots < len(recvs) {
			if err := post(i + slots); err != nil {
				return err
			}
		}
	}
	// The all-gather that may follow writes into blocks sent above.
	return x.flush()
}

// ringAllGather completes buf, which holds this rank's block r, with the
// blocks of the others.
func (x *run) ringAllGather(buf []byte, off []int) error {
	n, r := x.g.size, x.g.rank
	right, left := mod(r+1, n), mod(r-1, n)
	// Every chunk lands in its own place, so all receives are posted at
	// once; at step s the block is r-s-1, forwarded at step s+1.
	recvs := x.plan(off, r-1, n-1)
	reqs := x.requests(len(recvs))
	for i, c := range recvs {
		req, err := x.irecv(left, ringStepAG+i, buf[c.lo:c.hi])
		if err != nil {
			return err
		}
		reqs[i] = req
	}
	sent := 0
	for lo, hi := off[r], off[r+1]; lo < hi; lo += x.cb {
		if err := x.later(right, ringStepAG+sent, buf[lo:min(lo+x.cb, hi)]); err != nil {
			return err
		}
		sent++
	}
	for i, c := range recvs {
		if err := x.waitRecv(reqs[i], left, ringStepAG+i, c.hi-c.lo); err != nil {
			return err
		}
		if c.step < n-2 {
			if err := x.later(right, ringStepAG+sent, buf[c.lo:c.hi]); err != nil {
				return err
			}
			sent++
		}
	}
	return x.flush()
}

// ringAllReduce is the ring reduce-scatter into recv, the Avg division of
// the block this rank owns, and the ring all-gather. recv is written
// only with results, so the out-of-place form needs no initial copy.
func (x *run) ringAllReduce() error {
	op := x.op
	off := x.offsets(0, op.count, nil)
	r := x.g.rank
	own := op.recv[off[r]:off[r+1]]
	if err := x.ringReduceScatter(op.send, op.recv, own, off); err != nil {
		return err
	}
	x.finish(own)
	return x.ringAllGather(op.recv, off)
}
