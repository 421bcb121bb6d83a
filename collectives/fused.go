package collectives

import "fmt"

// Small operations ride on the fingerprint exchange. With n a power of
// two, the exchange's round k swaps messages with rank XOR 2^k, the
// partners and the order of recursive doubling. An AllReduce or an
// AllGather of at most fuseMax bytes done that way puts its data in the
// same messages, after the records: one exchange instead of two, which at
// two ranks over tcp is about half of an 8-byte AllReduce's time (see
// bench/RESULTS.md). A Barrier needs no data at all: a rank that has
// every other rank's record has heard from every rank, so the exchange
// is the barrier, whatever n.
//
// The data is combined in scratch memory and copied to the caller's
// buffer only once the records agree, so a disagreement still leaves
// nothing moved. Every round's receive takes up to fuseMax bytes after
// the records, riding or not: ranks that disagree may disagree about
// riding too, and a message longer than its receive would fail the
// receive instead of letting the exchange report the disagreement.

// fuseMax is the most data an operation carries in the exchange: up to
// it recursive doubling is what Auto chooses for an AllReduce, and the
// copies into and out of the messages cost a few microseconds, against
// a round of messages saved.
const fuseMax = smallAllReduce

// rides reports whether the operation's data travels in the fingerprint
// exchange: the operations whose small-message algorithm moves data with
// the exchange's partners in its order (recursive doubling; binomial
// trees over ranks renumbered r XOR root, whose round k joins a rank to
// r XOR 2^k too; any single exchange of two ranks), when not forced to
// another. It depends only on what the fingerprint covers and on the
// group, so ranks that agree decide alike.
func (x *run) rides() bool {
	op, n := x.op, x.g.size
	if !x.g.verify || x.g.shm != nil || op.mode != modeDefault || n&(n-1) != 0 {
		return false
	}
	switch op.kind {
	case kAllReduce, kAllGather, kAllGatherV:
		if op.algo != RecursiveDoubling {
			return false
		}
	case kBroadcast, kReduce, kGather, kGatherV:
		if op.algo != Tree {
			return false
		}
	case kScatter, kScatterV:
		if op.algo != Tree || n != 2 {
			return false
		}
	case kReduceScatter, kReduceScatterV:
		if op.algo != HalvingDoubling || n != 2 {
			return false
		}
	case kAllToAll:
		if op.algo != Pairwise || n != 2 {
			return false
		}
	default:
		return false
	}
	if op.kind.blocked() {
		return x.blocks()[n] <= fuseMax
	}
	return op.count*x.esize <= fuseMax
}

// blocked reports whether k's buffers are cut into a block per rank.
func (k kind) blocked() bool {
	switch k {
	case kAllReduce, kBroadcast, kReduce:
		return false
	}
	return true
}

// ride runs an operation that rides on the exchange: it fills the work
// buffer, runs the exchange, and delivers the result once every record
// agrees.
func (x *run) ride() error {
	op, r := x.op, x.g.rank
	size := op.count * x.esize
	if op.kind.blocked() {
		x.off = x.blocks()
		size = x.off[x.g.size]
	}
	switch op.kind {
	case kScatter, kScatterV, kReduceScatter, kReduceScatterV:
		size = x.off[r+1] - x.off[r]
	}
	work, err := x.g.sc.buf(bufWork, size)
	if err != nil {
		return x.fail(-1, -1, "", err)
	}
	x.riding, x.work = true, work
	root := r == op.root
	switch op.kind {
	case kAllReduce, kReduce:
		copy(work, op.send)
	case kBroadcast:
		if root {
			copy(work, op.send)
		}
	case kScatter, kScatterV:
		if root {
			copy(work, x.sendBlock(r))
		}
	case kReduceScatter, kReduceScatterV:
		copy(work, x.sendBlock(r))
	default: // the gathers and AllToAll
		copy(x.workBlock(r, 1), x.sendBlock(r))
	}
	if err := x.verify(); err != nil {
		return err
	}
	if x.badRide != "" {
		return x.fail(-1, -1, "", fmt.Errorf("collectives: rank %d: fingerprints agree but %s", r, x.badRide))
	}
	switch op.kind {
	case kAllReduce, kReduceScatter, kReduceScatterV:
		x.finish(work)
	case kReduce:
		if !root {
			return nil
		}
		x.finish(work)
	case kGather, kGatherV:
		if !root {
			return nil
		}
	}
	copy(op.recv, work)
	return nil
}

// sendBlock is rank's block of the caller's send buffer; for a gather,
// this rank's whole send.
func (x *run) sendBlock(rank int) []byte {
	switch x.op.kind {
	case kAllGather, kAllGatherV, kGather, kGatherV:
		return x.op.send
	}
	return x.op.send[x.off[rank]:x.off[rank+1]]
}

// workBlock is the work buffer's part for the aligned group of d ranks
// that holds rank.
func (x *run) workBlock(rank, d int) []byte {
	lo := rank &^ (d - 1)
	return x.work[x.off[lo]:x.off[lo+d]]
}

// rideSlices says what this rank sends to peer in round k (d = 2^k),
// where what peer sends lands, and whether it is combined there rather
// than copied. The single-exchange kinds have n = 2, d = 1.
func (x *run) rideSlices(d, peer int) (out, in []byte, combine bool) {
	op, r, w := x.op, x.g.rank, x.work
	v := r ^ op.root // a tree's rank; r itself for the unrooted kinds
	switch op.kind {
	case kAllReduce:
		return w, w, true
	case kAllGather, kAllGatherV:
		return x.workBlock(r, d), x.workBlock(peer, d), false
	case kBroadcast:
		// The ranks below d hold the data and hand it on.
		switch {
		case v < d:
			return w, nil, false
		case v < 2*d:
			return nil, w, false
		}
	case kReduce, kGather, kGatherV:
		// The multiples of d hold their group's partial result or
		// blocks; the odd one of each pair hands it to the other.
		switch {
		case v&(d-1) != 0:
		case v&d != 0 && op.kind == kReduce:
			return w, nil, false
		case v&d != 0:
			return x.workBlock(r, d), nil, false
		case op.kind == kReduce:
			return nil, w, true
		default:
			return nil, x.workBlock(peer, d), false
		}
	case kScatter, kScatterV:
		if v == 0 {
			return x.sendBlock(peer), nil, false
		}
		return nil, w, false
	case kReduceScatter, kReduceScatterV:
		return x.sendBlock(peer), w, true
	case kAllToAll:
		return x.sendBlock(peer), x.workBlock(peer, 1), false
	}
	return nil, nil, false
}

// rideOut is the data this rank sends to peer in round k (d = 2^k)
// after its records.
func (x *run) rideOut(d, peer int) []byte {
	if !x.riding {
		return nil
	}
	out, _, _ := x.rideSlices(d, peer)
	return out
}

// rideIn takes the data that came from peer with its records in round k
// (d = 2^k). Until the records are compared b may be anything up to
// fuseMax bytes (a rank that called another operation sent it); one of
// the wrong length is only noted, since the comparison that follows
// reports the disagreement, or, if the records agree, this does.
func (x *run) rideIn(d, peer int, b []byte) {
	if !x.riding {
		return
	}
	_, in, combine := x.rideSlices(d, peer)
	switch {
	case len(b) != len(in):
		if x.badRide == "" {
			x.badRide = fmt.Sprintf("rank %d sent %d bytes of data with its fingerprints, want %d", peer, len(b), len(in))
		}
	case combine:
		x.combine(in, in, b)
	default:
		copy(in, b)
	}
}
