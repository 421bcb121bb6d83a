package collectives

import (
	"bytes"
	"fmt"

	"github.com/rdmacell/rdmacell/flight"
)

// verify is the fingerprint exchange that starts every operation: a Bruck
// all-gather of each rank's 32-byte record, ceil(log2 n) rounds, in which
// round k sends the records gathered so far to rank-2^k and receives as
// many from rank+2^k. Its pattern does not depend on the operation, so
// ranks that called different collectives, or the same one with different
// arguments, all complete it, all see every record, and all fail with the
// same report; no rank is left waiting for a message that will not come.
// The data phase has not begun, so the group stays usable unless the
// sequence numbers differ (a rank skipped or added an operation).
func (x *run) verify() error {
	n, r := x.g.size, x.g.rank
	buf, err := x.g.sc.buf(bufVerify, n*fpSize)
	if err != nil {
		return x.fail(-1, -1, "", err)
	}
	x.fp.put(buf[:fpSize])
	for d, round := 1, 0; d < n; d, round = 2*d, round+1 {
		cnt := min(d, n-d)
		to, from := mod(r-d, n), mod(r+d, n)
		tag := tagVerify | uint64(round)
		rq, err := x.g.p.Irecv(from, tag, buf[d*fpSize:(d+cnt)*fpSize])
		if err != nil {
			return x.failVerify(round, from, "receive", err)
		}
		sq, err := x.g.p.Isend(to, tag, buf[:cnt*fpSize])
		if err != nil {
			return x.failVerify(round, to, "send", err)
		}
		x.waiting(-1, from, flight.Recv)
		if n, err := rq.Wait(x.ctx); err != nil {
			return x.failVerify(round, from, "receive", err)
		} else if n != cnt*fpSize {
			return x.failVerify(round, from, "receive", fmt.Errorf("got %d bytes of fingerprints, want %d", n, cnt*fpSize))
		}
		x.waiting(-1, to, flight.Send)
		if _, err := sq.Wait(x.ctx); err != nil {
			return x.failVerify(round, to, "send", err)
		}
	}
	mine := buf[:fpSize]
	for i := 1; i < n; i++ {
		if !bytes.Equal(buf[i*fpSize:(i+1)*fpSize], mine) {
			return x.disagree(buf)
		}
	}
	return nil
}

// disagree decodes the records (buf[i] is rank r+i's) into the error.
func (x *run) disagree(buf []byte) error {
	n, r := x.g.size, x.g.rank
	recs := make([]fingerprint, n)
	aligned := true
	for i := range n {
		recs[(r+i)%n] = getFingerprint(buf[i*fpSize:])
		if recs[(r+i)%n].seq != x.fp.seq {
			aligned = false
		}
	}
	x.aligned = aligned
	e := disagreement(r, x.fp, recs)
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
