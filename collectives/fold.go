package collectives

// fold maps n ranks onto p = 2^floor(log2 n) for the algorithms built on
// powers of two (recursive doubling, halving-doubling), the usual way:
// with rem = n-p, each even rank r < 2·rem hands its data to r+1 and sits
// out until it gets the result back, and the others form p virtual
// ranks. Virtual rank v stands for the blocks of the ranks it absorbed:
// blocks 2v and 2v+1 for v < rem, block v+rem after, so that the blocks
// of any range of virtual ranks are contiguous.
type fold struct{ n, p, rem int }

func newFold(n int) fold {
	p := 1
	for p*2 <= n {
		p *= 2
	}
	return fold{n: n, p: p, rem: n - p}
}

// out reports whether r sits out (hands its data to r+1).
func (f fold) out(r int) bool { return r < 2*f.rem && r%2 == 0 }

// absorbs reports whether r takes over r-1's data.
func (f fold) absorbs(r int) bool { return r < 2*f.rem && r%2 == 1 }

// vrank is r's virtual rank; r must not sit out.
func (f fold) vrank(r int) int {
	if r < 2*f.rem {
		return r / 2
	}
	return r - f.rem
}

// real is the rank behind virtual rank v.
func (f fold) real(v int) int {
	if v < f.rem {
		return 2*v + 1
	}
	return v + f.rem
}

// block is the first block of virtual rank v; block(p) is n.
func (f fold) block(v int) int {
	if v < f.rem {
		return 2 * v
	}
	return v + f.rem
}

// span is the byte range of the blocks of virtual ranks [a, b).
func (f fold) span(off []int, a, b int) (int, int) {
	return off[f.block(a)], off[f.block(b)]
}
