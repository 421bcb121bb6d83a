package collectives

// Pairwise exchange for all-to-all: at step s (1..n-1) rank r sends its
// block for rank r+s and receives rank r-s's block for it, so that each
// step is a permutation and no rank is the target of two senders at once.
// pairwiseWindow steps are kept in flight, which hides the latency of one
// step behind the transfer of the others without flooding every peer at
// once. Every pair exchanges a message, empty or not, so that AllToAllV
// ranks that disagree about a count are caught by the length.

const pairwiseWindow = 4

func (x *run) pairwise(send, recv []byte, soff, roff []int) error {
	n, r := x.g.size, x.g.rank
	copy(recv[roff[r]:roff[r+1]], send[soff[r]:soff[r+1]])
	reqs := x.requests(2 * n)
	wait := func(s int) error {
		from, to := mod(r-s, n), mod(r+s, n)
		if err := x.waitRecv(reqs[2*s], from, s, roff[from+1]-roff[from]); err != nil {
			return err
		}
		return x.waitSend(reqs[2*s+1], to, s)
	}
	for s := 1; s < n; s++ {
		if s > pairwiseWindow {
			if err := wait(s - pairwiseWindow); err != nil {
				return err
			}
		}
		from, to := mod(r-s, n), mod(r+s, n)
		rq, err := x.irecv(from, s, recv[roff[from]:roff[from+1]])
		if err != nil {
			return err
		}
		sq, err := x.isend(to, s, send[soff[to]:soff[to+1]])
		if err != nil {
			return err
		}
		reqs[2*s], reqs[2*s+1] = rq, sq
	}
	for s := max(1, n-pairwiseWindow); s < n; s++ {
		if err := wait(s); err != nil {
			return err
		}
	}
	return nil
}
