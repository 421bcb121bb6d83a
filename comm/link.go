package comm

// link is what the protocol needs of a connection to one peer: it moves
// ranges of registered memory in order, the k-th send filling the k-th
// receive the peer posted, without blocking. A cell connection
// (cell/driver) is one; see driverlink.go for the binding.
type link interface {
	// sendAt starts sending n bytes at addr (registered under lkey in the
	// link's protection domain); recvAt offers n bytes at addr (rkey) for
	// the peer's next send. Both fail at once when the link has failed or
	// too many ranges are outstanding.
	sendAt(addr uint64, lkey uint32, n int64) (op, error)
	recvAt(addr uint64, rkey uint32, n int64) (op, error)
	// abort ends the link at once: nothing lands in, or is read from, the
	// memory of its ranges any more. Their ops may stay pending.
	abort(err error)
	// close says goodbye to the peer and releases the link; ops still
	// pending complete with an error.
	close() error
	// err is the link's terminal failure, nil while it works.
	err() error
	// progress tells how the link's progress goroutine waits.
	progress() linkProgress
	// stats is a snapshot of the link's counters and paths, Name unset.
	stats() LinkStats
}

// linkProgress is how a link's progress goroutine waits: Parked says it is
// parked now, using no CPU; Parks counts the times it parked, so a count
// that does not move while Parked holds means it never woke up; Keepalives
// counts the rounds of probes it sent because ranges were outstanding.
type linkProgress struct {
	Parked            bool
	Parks, Keepalives uint64
}

// op is a range in flight on a link.
type op interface {
	// Done is closed when the range has completed.
	Done() <-chan struct{}
	// Test returns the result once Done is closed: the bytes moved (for a
	// receive, the bytes the peer sent) or the failure.
	Test() (done bool, n int, err error)
}

// isDone reports whether o has completed.
func isDone(o op) bool {
	select {
	case <-o.Done():
		return true
	default:
		return false
	}
}
