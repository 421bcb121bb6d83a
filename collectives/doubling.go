package collectives

// Recursive doubling. Over p = 2^k virtual ranks (see fold), at round j
// each rank exchanges with the rank whose virtual rank differs in bit j:
// the whole vector for AllReduce, which both sides then combine, and the
// blocks gathered so far for AllGather, which double each round. log2(p)
// rounds, plus one at each end when n is not a power of two; for small
// messages, where the number of rounds is what costs.

// Steps of the fold, in tags.
const (
	stepFoldIn  = 0
	stepFoldOut = 1 << 20
)

// rdAllReduce reduces send into recv.
func (x *run) rdAllReduce() error {
	op := x.op
	n, r := x.g.size, x.g.rank
	f := newFold(n)
	in, out := op.send, op.recv
	if f.out(r) {
		// The result comes back only after r+1 has taken in, so receiving
		// into out while in (possibly the same memory) is being sent is safe.
		rq, err := x.irecv(r+1, stepFoldOut, out)
		if err != nil {
			return err
		}
		if err := x.send(r+1, stepFoldIn, in); err != nil {
			return err
		}
		return x.waitRecv(rq, r+1, stepFoldOut, len(out))
	}
	tmp, err := x.g.sc.buf(bufTmp, len(out))
	if err != nil {
		return x.fail(-1, -1, "", err)
	}
	src := in
	if f.absorbs(r) {
		if err := x.recv(r-1, stepFoldIn, tmp); err != nil {
			return err
		}
		x.combine(out, src, tmp)
		src = out
	}
	v := f.vrank(r)
	for d, round := 1, 1; d < f.p; d, round = 2*d, round+1 {
		peer := f.real(v ^ d)
		if err := x.sendrecv(peer, src, peer, tmp, round); err != nil {
			return err
		}
		// Both sides combine the same two vectors, in opposite orders;
		// the kernels are commutative bit for bit, so they agree.
		x.combine(out, src, tmp)
		src = out
	}
	x.finish(out)
	if f.absorbs(r) {
		return x.send(r-1, stepFoldOut, out)
	}
	return nil
}

// rdAllGather completes buf, which holds this rank's block, with blocks
// at the offsets off.
func (x *run) rdAllGather(buf []byte, off []int) error {
	n, r := x.g.size, x.g.rank
	f := newFold(n)
	if f.out(r) {
		rq, err := x.irecv(r+1, stepFoldOut, buf)
		if err != nil {
			return err
		}
		if err := x.send(r+1, stepFoldIn, buf[off[r]:off[r+1]]); err != nil {
			return err
		}
		return x.waitRecv(rq, r+1, stepFoldOut, len(buf))
	}
	if f.absorbs(r) {
		if err := x.recv(r-1, stepFoldIn, buf[off[r-1]:off[r]]); err != nil {
			return err
		}
	}
	v := f.vrank(r)
	for d, round := 1, 1; d < f.p; d, round = 2*d, round+1 {
		pv := v ^ d
		mine, theirs := v&^(d-1), pv&^(d-1)
		slo, shi := f.span(off, mine, mine+d)
		rlo, rhi := f.span(off, theirs, theirs+d)
		peer := f.real(pv)
		if err := x.sendrecv(peer, buf[slo:shi], peer, buf[rlo:rhi], round); err != nil {
			return err
		}
	}
	if f.absorbs(r) {
		return x.send(r-1, stepFoldOut, buf)
	}
	return nil
}
