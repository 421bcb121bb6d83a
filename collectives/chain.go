package collectives

import "github.com/rdmacell/rdmacell/comm"

// Pipelined chains for Broadcast and Reduce. With ranks renumbered so
// that the root is 0, data flows along 0 → 1 → … → n-1 (Broadcast) or
// n-1 → … → 0 (Reduce) in chunks of ChunkBytes, each rank forwarding a
// chunk as soon as it has it: once the pipeline is full every link is busy,
// so a large message costs about one transfer plus n-2 chunks, where a
// tree costs log2(n) whole transfers. The step in a tag is the chunk.

func (x *run) chainBroadcast() error {
	op := x.op
	n := x.g.size
	vr := mod(x.g.rank-op.root, n)
	prev, next := x.treeRank(vr-1), x.treeRank(vr+1)
	buf := op.recv
	nc := (len(buf) + x.cb - 1) / x.cb
	piece := func(i int) []byte { return buf[i*x.cb : min((i+1)*x.cb, len(buf))] }
	var reqs []comm.Request
	if vr == 0 {
		copyUnlessSame(buf, op.send)
	} else {
		// Every chunk lands in its own place: post all receives at once.
		reqs = x.requests(nc)
		for i := range nc {
			req, err := x.irecv(prev, i, piece(i))
			if err != nil {
				return err
			}
			reqs[i] = req
		}
	}
	for i := range nc {
		if vr > 0 {
			if err := x.waitRecv(reqs[i], prev, i, len(piece(i))); err != nil {
				return err
			}
		}
		if vr < n-1 {
			if err := x.later(next, i, piece(i)); err != nil {
				return err
			}
		}
	}
	return x.flush()
}

func (x *run) chainReduce() error {
	op := x.op
	n := x.g.size
	vr := mod(x.g.rank-op.root, n)
	next, prev := x.treeRank(vr-1), x.treeRank(vr+1) // towards and away from the root
	in := op.send
	nc := (len(in) + x.cb - 1) / x.cb
	span := func(i int) (int, int) { return i * x.cb, min((i+1)*x.cb, len(in)) }
	if vr == n-1 {
		for i := range nc {
			lo, hi := span(i)
			if err := x.later(next, i, in[lo:hi]); err != nil {
				return err
			}
		}
		return x.flush()
	}
	// A chunk from prev lands in a slot, is combined there with this
	// rank's chunk (into recv at the root) and sent on from the slot. A
	// slot is posted again once the send from it is done.
	slots, width := min(pipelineSlots, nc), min(x.cb, len(in))
	tmp, err := x.g.sc.buf(bufTmp, slots*width)
	if err != nil {
		return x.fail(-1, -1, "", err)
	}
	reqs := x.requests(2 * slots) // receive, then send, per slot
	slot := func(i int) []byte {
		lo, hi := span(i)
		return tmp[(i%slots)*width:][:hi-lo]
	}
	post := func(i int) error {
		req, err := x.irecv(prev, i, slot(i))
		reqs[2*(i%slots)] = req
		return err
	}
	for i := range slots {
		if err := post(i); err != nil {
			return err
		}
	}
	for i := range nc {
		s := i % slots
		got := slot(i)
		if err := x.waitRecv(reqs[2*s], prev, i, len(got)); err != nil {
			return err
		}
		lo, hi := span(i)
		if vr == 0 {
			x.combine(op.recv[lo:hi], in[lo:hi], got)
			x.finish(op.recv[lo:hi])
			if i+slots < nc {
				if err := post(i + slots); err != nil {
					return err
				}
			}
			continue
		}
		x.combine(got, in[lo:hi], got)
		req, err := x.isend(next, i, got)
		if err != nil {
			return err
		}
		reqs[2*s+1] = req
		// Recycle the previous chunk's slot, whose send has had a whole
		// chunk's time to complete; slots >= 2 keeps the next receive
		// posted meanwhile.
		if i > 0 {
			ps := (i - 1) % slots
			if err := x.waitSend(reqs[2*ps+1], next, i-1); err != nil {
				return err
			}
			if i-1+slots < nc {
				if err := post(i - 1 + slots); err != nil {
					return err
				}
			}
		}
	}
	if vr != 0 && nc > 0 {
		return x.waitSend(reqs[2*((nc-1)%slots)+1], next, nc-1)
	}
	return nil
}
