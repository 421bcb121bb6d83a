package collectives

// Dissemination barrier: in round k each rank signals rank+2^k and waits
// for rank-2^k. After ceil(log2 n) rounds every rank has heard, directly
// or through others, from every rank, for any n. With n a power of two
// the partners of round k are rank XOR 2^k both ways, as in recursive
// doubling: the same rounds and messages, but the barrier then talks to
// the peers a small AllReduce and the fingerprint exchange already
// connected (a peer is a connection) instead of 2·log2(n)-1 of them.
func (x *run) dissemination() error {
	n, r := x.g.size, x.g.rank
	pairs := n&(n-1) == 0
	for d, k := 1, 0; d < n; d, k = 2*d, k+1 {
		to, from := mod(r+d, n), mod(r-d, n)
		if pairs {
			to, from = r^d, r^d
		}
		if err := x.sendrecv(to, nil, from, nil, k); err != nil {
			return err
		}
	}
	return nil
}
