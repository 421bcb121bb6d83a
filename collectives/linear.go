package collectives

// Linear Gather and Scatter: the root exchanges one message with every
// other rank, all of them posted at once, and each block crosses the
// network once, straight between the caller's buffers. It takes n-1
// messages at the root where a tree takes log2(n) rounds, but a tree
// copies every block through the ranks in between, which costs more than
// the messages do once blocks are large. The step in a tag is 0.

// linearGather gathers the blocks at off into the root's recv.
func (x *run) linearGather(off []int) error {
	op := x.op
	n, r := x.g.size, x.g.rank
	if r != op.root {
		return x.send(op.root, 0, op.send)
	}
	reqs := x.requests(n)
	for q := range n {
		if q != r {
			req, err := x.irecv(q, 0, op.recv[off[q]:off[q+1]])
			if err != nil {
				return err
			}
			reqs[q] = req
		}
	}
	copyUnlessSame(op.recv[off[r]:off[r+1]], op.send)
	for q, req := range reqs {
		if q != r {
			if err := x.waitRecv(req, q, 0, off[q+1]-off[q]); err != nil {
				return err
			}
		}
	}
	return nil
}

// linearScatter sends the blocks at off of the root's send to their ranks.
func (x *run) linearScatter(off []int) error {
	op := x.op
	n, r := x.g.size, x.g.rank
	if r != op.root {
		return x.recv(op.root, 0, op.recv)
	}
	// Starting from the next rank, so that concurrent scatters from
	// different roots do not all send to rank 0 first.
	for i := 1; i < n; i++ {
		q := (r + i) % n
		if err := x.later(q, 0, op.send[off[q]:off[q+1]]); err != nil {
			return err
		}
	}
	copyUnlessSame(op.recv, op.send[off[r]:off[r+1]])
	return x.flush()
}
