package collectives

// Dissemination barrier: in round k each rank signals rank+2^k and waits
// for rank-2^k. After ceil(log2 n) rounds every rank has heard, directly
// or through others, from every rank, for any n.
func (x *run) dissemination() error {
	n, r := x.g.size, x.g.rank
	for d, k := 1, 0; d < n; d, k = 2*d, k+1 {
		if err := x.sendrecv(mod(r+d, n), nil, mod(r-d, n), nil, k); err != nil {
			return err
		}
	}
	return nil
}
