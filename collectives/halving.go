package collectives

// Halving-doubling (Rabenseifner). Over p = 2^k virtual ranks (see fold),
// recursive halving: at round j each rank keeps the half of its current
// range of blocks on its side of bit k-1-j, sends the other half to the
// rank across, and combines what that rank sends of the half it keeps.
// After log2(p) rounds each virtual rank holds its own blocks reduced.
// For AllReduce, recursive doubling then gathers them back. Each rank
// moves about 2(p-1)/p of the vector, like the ring, in 2·log2(p) rounds
// instead of 2(n-1); for medium messages.

// halve runs the recursive halving on blocks at offsets off: src is this
// rank's data (read only, or work itself), work receives the partial
// results, tmp holds what arrives. It returns this rank's virtual rank.
func (x *run) halve(f fold, off []int, src, work, tmp []byte) (int, error) {
	v := f.vrank(x.g.rank)
	lo, hi := 0, f.p
	for d, round := f.p/2, 1; d >= 1; d, round = d/2, round+1 {
		mid := lo + d
		keepLo, keepHi, sendLo, sendHi := lo, mid, mid, hi
		if v >= mid {
			keepLo, keepHi, sendLo, sendHi = mid, hi, lo, mid
		}
		klo, khi := f.span(off, keepLo, keepHi)
		slo, shi := f.span(off, sendLo, sendHi)
		peer := f.real(v ^ d)
		got := tmp[:khi-klo]
		if err := x.sendrecv(peer, src[slo:shi], peer, got, round); err != nil {
			return v, err
		}
		x.combine(work[klo:khi], src[klo:khi], got)
		src = work
		lo, hi = keepLo, keepHi
	}
	return v, nil
}

// foldIn has a rank that absorbs its neighbour combine the neighbour's
// whole vector with in into work; it returns the data to halve from.
func (x *run) foldIn(f fold, in, work, tmp []byte) ([]byte, error) {
	r := x.g.rank
	if !f.absorbs(r) {
		return in, nil
	}
	got := tmp[:len(in)]
	if err := x.recv(r-1, stepFoldIn, got); err != nil {
		return nil, err
	}
	x.combine(work, in, got)
	return work, nil
}

// hdAllReduce reduces send into recv.
func (x *run) hdAllReduce() error {
	op := x.op
	n, r := x.g.size, x.g.rank
	f := newFold(n)
	in, out := op.send, op.recv
	if f.out(r) {
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
	off := x.offsets(0, op.count, nil)
	src, err := x.foldIn(f, in, out, tmp)
	if err != nil {
		return err
	}
	v, err := x.halve(f, off, src, out, tmp)
	if err != nil {
		return err
	}
	lo, hi := f.span(off, v, v+1)
	x.finish(out[lo:hi])
	for d, round := 1, 1; d < f.p; d, round = 2*d, round+1 {
		pv := v ^ d
		mine, theirs := v&^(d-1), pv&^(d-1)
		slo, shi := f.span(off, mine, mine+d)
		rlo, rhi := f.span(off, theirs, theirs+d)
		peer := f.real(pv)
		if err := x.sendrecv(peer, out[slo:shi], peer, out[rlo:rhi], stepFoldOut/2+round); err != nil {
			return err
		}
	}
	if f.absorbs(r) {
		return x.send(r-1, stepFoldOut, out)
	}
	return nil
}

// hdReduceScatter reduces block r of in into final. work is as long as in
// (in itself for the in-place form).
func (x *run) hdReduceScatter(in, work, final []byte, off []int) error {
	n, r := x.g.size, x.g.rank
	f := newFold(n)
	if f.out(r) {
		rq, err := x.irecv(r+1, stepFoldOut, final)
		if err != nil {
			return err
		}
		if err := x.send(r+1, stepFoldIn, in); err != nil {
			return err
		}
		return x.waitRecv(rq, r+1, stepFoldOut, len(final))
	}
	tmp, err := x.g.sc.buf(bufTmp, len(in))
	if err != nil {
		return x.fail(-1, -1, "", err)
	}
	src, err := x.foldIn(f, in, work, tmp)
	if err != nil {
		return err
	}
	v, err := x.halve(f, off, src, work, tmp)
	if err != nil {
		return err
	}
	// Virtual rank v holds the blocks of the ranks it stands for: its
	// own, and its neighbour's when it absorbed one.
	lo, hi := f.span(off, v, v+1)
	x.finish(work[lo:hi])
	if f.absorbs(r) {
		if err := x.send(r-1, stepFoldOut, work[off[r-1]:off[r]]); err != nil {
			return err
		}
	}
	copyUnlessSame(final, work[off[r]:off[r+1]])
	return nil
}
