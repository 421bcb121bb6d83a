package collectives

// The Reproducible algorithm: what every reduction runs over messages in
// the reproducible and exact modes (Options.Reproducible, Options.Exact).
//
// # What is guaranteed
//
// For a given world size and rank order, the result of every element of
// an AllReduce, ReduceScatter(V) or Reduce (blocking or not) is a function of
// that element's n inputs alone: the left fold in rank order of
// rankfold.go, or in exact mode the correctly rounded sum. It does not
// depend on the algorithm asked for, the transport (messages over any
// provider, or the memory the ranks of one host share), the message size
// or the element's position in it (so splitting a vector into buckets
// changes nothing), the chunk size, the number of paths, or the timing.
// Every rank of an AllReduce gets the same bits, as always. What changes
// the result: the world size, which rank holds which input, the element
// type and the op; in exact mode, for float32 and float64 sums, not even
// the rank order.
//
// # How
//
// Each element is combined at one owner: the vector is cut into n blocks
// as evenly as possible, and rank q owns block q. Every rank sends block
// q of its input to rank q, in chunks, and rank q folds the n
// contributions of each chunk as they arrive, its own included, in rank
// order (a direct reduce-scatter). An AllReduce then gathers the reduced
// blocks with the all-gather the algorithm asked for implies (Ring: the
// ring; the others: recursive doubling), and a Reduce sends each block to
// the root. Each rank sends and receives (n-1)/n of the vector in the
// reduce-scatter, as the ring does, so AllReduce stays bandwidth-optimal;
// the reduce-scatter takes one step instead of n-1, with n-1 messages in
// flight per rank. The Shared algorithm needs nothing of this: its
// reductions already combine every element's n contributions at one rank,
// in rank order, and only its fold changes with the mode.
//
// A chunk of the block a rank owns is received from the n-1 others into
// one of reproSlots windows, so receiving the next chunk overlaps folding
// this one; a message is ChunkBytes for up to three ranks and less for
// more, so that a window stays near 2·ChunkBytes.

// Steps of the Reproducible algorithm in tags: the reduce-scatter's chunk
// j is stepRepro+j; a Reduce's gather to the root is stepReproGather.
const (
	stepRepro       = 1 << 22
	stepReproGather = 1 << 23
	reproSlots      = 2
)

// reproExec runs a reduction over messages in the reproducible order.
func (x *run) reproExec() error {
	op := x.op
	switch op.kind {
	case kReduceScatter, kReduceScatterV:
		return x.reproReduceScatter(op.send, op.recv, x.blocks())
	case kReduce:
		return x.reproReduce()
	}
	off := x.offsets(0, op.count, nil)
	r := x.g.rank
	if err := x.reproReduceScatter(op.send, op.recv[off[r]:off[r+1]], off); err != nil {
		return err
	}
	if op.algo == Ring {
		return x.ringAllGather(op.recv, off)
	}
	return x.rdAllGather(op.recv, off)
}

// reproChunk is the size of one message of the reduce-scatter, in whole
// elements.
func (x *run) reproChunk() int {
	c := x.cb
	if n := x.g.size; n > 3 {
		c = 2 * x.cb / (n - 1)
	}
	return max(c/x.esize, 1) * x.esize
}

// reproReduceScatter folds block r of in (blocks at off) over all ranks
// into final, and sends this rank's other blocks to their owners. final
// may be block r of in itself (the in-place forms).
func (x *run) reproReduceScatter(in, final []byte, off []int) error {
	n, r := x.g.size, x.g.rank
	cw := x.reproChunk()
	// Every chunk of every block another rank owns goes out at once,
	// chunk by chunk across the owners, each owner starting from the
	// next rank so that they are not all sent to the same one first.
	for lo := 0; ; lo += cw {
		more := false
		for i := 1; i < n; i++ {
			q := (r + i) % n
			if a := off[q] + lo; a < off[q+1] {
				more = true
				if err := x.later(q, stepRepro+lo/cw, in[a:min(a+cw, off[q+1])]); err != nil {
					return err
				}
			}
		}
		if !more {
			break
		}
	}
	own := in[off[r]:off[r+1]]
	m := (len(own) + cw - 1) / cw
	slots := min(reproSlots, m)
	tmp, err := x.g.sc.buf(bufTmp, slots*(n-1)*cw)
	if err != nil {
		return x.fail(-1, -1, "", err)
	}
	reqs := x.requests(slots * (n - 1))
	// Rank q's chunk j is at index (j%slots)*(n-1) + q', where q' skips r.
	at := func(j, q int) int {
		if q > r {
			q--
		}
		return (j%slots)*(n-1) + q
	}
	chunk := func(j int) (int, int) { return j * cw, min((j+1)*cw, len(own)) }
	post := func(j int) error {
		lo, hi := chunk(j)
		for q := range n {
			if q != r {
				i := at(j, q)
				req, err := x.irecv(q, stepRepro+j, tmp[i*cw:][:hi-lo])
				if err != nil {
					return err
				}
				reqs[i] = req
			}
		}
		return nil
	}
	for j := range slots {
		if err := post(j); err != nil {
			return err
		}
	}
	for j := range m {
		lo, hi := chunk(j)
		for q := range n {
			if q != r {
				if err := x.waitRecv(reqs[at(j, q)], q, stepRepro+j, hi-lo); err != nil {
					return err
				}
			}
		}
		x.foldRanks(final[lo:hi], func(q int) []byte {
			if q == r {
				return own[lo:hi]
			}
			return tmp[at(j, q)*cw:][:hi-lo]
		})
		if j+slots < m {
			if err := post(j + slots); err != nil {
				return err
			}
		}
	}
	// What follows (an all-gather, a gather) writes where the sends read.
	return x.flush()
}

// reproReduce is the reduce-scatter, into recv at the root and into
// scratch elsewhere, then a gather of the blocks at the root.
func (x *run) reproReduce() error {
	op := x.op
	n, r := x.g.size, x.g.rank
	off := x.offsets(0, op.count, nil)
	var final []byte
	if r == op.root {
		final = op.recv[off[r]:off[r+1]]
	} else {
		w, err := x.g.sc.buf(bufWork, off[r+1]-off[r])
		if err != nil {
			return x.fail(-1, -1, "", err)
		}
		final = w
	}
	if err := x.reproReduceScatter(op.send, final, off); err != nil {
		return err
	}
	if r != op.root {
		if len(final) == 0 {
			return nil
		}
		return x.send(op.root, stepReproGather, final)
	}
	reqs := x.requests(n)
	for q := range n {
		reqs[q] = nil
		if q != r && off[q+1] > off[q] {
			req, err := x.irecv(q, stepReproGather, op.recv[off[q]:off[q+1]])
			if err != nil {
				return err
			}
			reqs[q] = req
		}
	}
	for q, req := range reqs {
		if req != nil {
			if err := x.waitRecv(req, q, stepReproGather, off[q+1]-off[q]); err != nil {
				return err
			}
		}
	}
	return nil
}
