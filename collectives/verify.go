package collectives

import (
	"bytes"
	"fmt"

	"github.com/rdmacell/rdmacell/flight"
)

// verify is the fingerprint exchange that starts every operation: an
// all-gather of each rank's 32-byte record in ceil(log2 n) rounds. With n
// a power of two, round k swaps the records gathered so far with rank
// XOR 2^k, the partners of recursive doubling and halving-doubling, so a
// small AllReduce talks to no peer its data does not (each peer is a
// connection); otherwise it is Bruck's, round k sending to rank-2^k and
// receiving as many from rank+2^k. Its pattern does not depend on the
// operation, so
// ranks that called different collectives, or the same one with different
// arguments, all complete it, all see every record, and all fail with the
// same report; no rank is left waiting for a message that will not come.
// No data has reached a caller's buffer (an operation that rides on the
// exchange, fused.go, keeps its data in scratch until it ends), so the
// group stays usable unless the sequence numbers differ (a rank skipped
// or added an operation).
func (x *run) verify() error {
	n, r := x.g.size, x.g.rank
	buf, err := x.g.sc.buf(bufVerify, n*fpSize)
	if err != nil {
		return x.fail(-1, -1, "", err)
	}
	if n&(n-1) == 0 {
		return x.verifyPairs(buf)
	}
	x.fp.put(buf[:fpSize])
	for d, round := 1, 0; d < n; d, round = 2*d, round+1 {
		cnt := min(d, n-d)
		to, from := mod(r-d, n), mod(r+d, n)
		if _, err := x.verifyRound(round, to, buf[:cnt*fpSize], from, buf[d*fpSize:(d+cnt)*fpSize]); err != nil {
			return err
		}
	}
	return x.compare(buf, r)
}

// verifyPairs is verify for a power-of-two n: after round k a rank holds
// the records of its aligned block of 2^(k+1) ranks, buf[i] rank i's. An
// operation that rides on the exchange (fused.go) adds its data to each
// round's message.
func (x *run) verifyPairs(buf []byte) error {
	n, r := x.g.size, x.g.rank
	x.fp.put(buf[r*fpSize:])
	for d, round := 1, 0; d < n; d, round = 2*d, round+1 {
		peer, lo := r^d, r&^(d-1)
		plo := lo ^ d
		send := buf[lo*fpSize : (lo+d)*fpSize]
		if data := x.rideOut(d, peer); len(data) > 0 {
			tx, err := x.g.sc.buf(bufVerifyOut, len(send)+len(data))
			if err != nil {
				return x.fail(-1, -1, "", err)
			}
			copy(tx[copy(tx, send):], data)
			send = tx
		}
		rest, err := x.verifyRound(round, peer, send, peer, buf[plo*fpSize:(plo+d)*fpSize])
		if err != nil {
			return err
		}
		x.rideIn(d, peer, rest)
	}
	return x.compare(buf, 0)
}

// verifyRound sends send to rank to while it receives records from rank
// from into recs, and waits for both. It returns what came after the
// records: the data of an operation that rides on the exchange, or of one
// that another rank called (up to fuseMax bytes, which the receive leaves
// room for).
func (x *run) verifyRound(round, to int, send []byte, from int, recs []byte) ([]byte, error) {
	tag := tagVerify | uint64(round)
	rx, err := x.g.sc.buf(bufVerifyIn, len(recs)+fuseMax)
	if err != nil {
		return nil, x.fail(-1, -1, "", err)
	}
	rq, err := x.g.p.Irecv(from, tag, rx)
	if err != nil {
		return nil, x.failVerify(round, from, "receive", err)
	}
	sq, err := x.g.p.Isend(to, tag, send)
	if err != nil {
		return nil, x.failVerify(round, to, "send", err)
	}
	x.waiting(-1, from, flight.Recv)
	n, err := rq.Wait(x.ctx)
	if err != nil {
		return nil, x.failVerify(round, from, "receive", err)
	} else if n < len(recs) {
		return nil, x.failVerify(round, from, "receive", fmt.Errorf("got %d bytes of fingerprints, want %d", n, len(recs)))
	}
	copy(recs, rx)
	x.waiting(-1, to, flight.Send)
	if _, err := sq.Wait(x.ctx); err != nil {
		return nil, x.failVerify(round, to, "send", err)
	}
	return rx[len(recs):n], nil
}

// compare checks the gathered records against this rank's: buf[i] is
// rank (i+first) mod n's.
func (x *run) compare(buf []byte, first int) error {
	n, r := x.g.size, x.g.rank
	mine := buf[mod(r-first, n)*fpSize:][:fpSize]
	for i := range n {
		if !bytes.Equal(buf[i*fpSize:(i+1)*fpSize], mine) {
			return x.disagree(buf, first)
		}
	}
	return nil
}

// disagree decodes the records (buf[i] is rank first+i's) into the error.
func (x *run) disagree(buf []byte, first int) error {
	n := x.g.size
	recs := make([]fingerprint, n)
	aligned := true
	for i := range n {
		recs[(first+i)%n] = getFingerprint(buf[i*fpSize:])
		if recs[(first+i)%n].seq != x.fp.seq {
			aligned = false
		}
	}
	x.aligned = aligned
	e := disagreement(x.g.rank, x.fp, recs)
	e.Seq = x.op.seq
	return e
}

func (x *run) failVerify(round, peer int, dir string, err error) error {
	e := x.fail(round, peer, dir, err)
	if me, ok := e.(*MismatchError); ok {
		me.Detail = "fingerprint exchange: " + me.Detail
	}
	return e
}
