package bootstrap

import (
	"errors"
	"fmt"
)

// ErrUnreachable is wrapped by the error of a [Join] that could not reach
// etcd, or the store a rank serves ([DialStore]), before its context
// ended.
var ErrUnreachable = errors.New("etcd unreachable")

// ErrClosed is returned by operations on a [Job] after [Job.Close], and by
// waits that Close interrupted.
var ErrClosed = errors.New("job closed")

// ErrWorldSize is wrapped by the error of [Job.WaitWorld] when a rank
// registered with a different world size than this one.
var ErrWorldSize = errors.New("world size mismatch")

// DuplicateRankError reports a [Join] for a rank that a live process already
// holds. Host and PID name that process.
type DuplicateRankError struct {
	Job  string
	Rank int
	Host string
	PID  int
}

// Error names the job, the rank(s) and what happened.
func (e *DuplicateRankError) Error() string {
	return fmt.Sprintf("bootstrap: job %q: rank %d is already registered by host %s pid %d",
		e.Job, e.Rank, e.Host, e.PID)
}

// MissingRanksError reports a wait that ended (deadline, cancellation) before
// every rank arrived: the world in [Job.WaitWorld], or a generation of a
// [Job.Barrier]. It unwraps to the context's error.
type MissingRanksError struct {
	Job       string
	What      string // "world" or `barrier "name" generation N`
	WorldSize int
	Missing   []int // ranks that had not arrived, ascending
	Err       error // why the wait ended
}

// Error names the job, the rank(s) and what happened.
func (e *MissingRanksError) Error() string {
	return fmt.Sprintf("bootstrap: job %q: %s incomplete: ranks %v of %d missing: %v",
		e.Job, e.What, e.Missing, e.WorldSize, e.Err)
}

// Unwrap gives why the wait ended, e.g. context.DeadlineExceeded.
func (e *MissingRanksError) Unwrap() error { return e.Err }

// RankDeadError reports a rank whose lease ended without a clean exit: the
// process died, hung, or lost etcd for longer than the lease TTL.
type RankDeadError struct {
	Job  string
	Rank int
	Host string
	PID  int
}

// Error names the job, the rank(s) and what happened.
func (e *RankDeadError) Error() string {
	return fmt.Sprintf("bootstrap: job %q: rank %d (host %s, pid %d) died: its lease expired without a clean exit",
		e.Job, e.Rank, e.Host, e.PID)
}

// RankExitedError reports a rank that left the job cleanly through
// [Job.Close]. It is not a failure of that rank, but nothing more can be
// expected from it.
type RankExitedError struct {
	Job  string
	Rank int
	Host string
	PID  int
}

// Error names the job, the rank(s) and what happened.
func (e *RankExitedError) Error() string {
	return fmt.Sprintf("bootstrap: job %q: rank %d (host %s, pid %d) exited cleanly",
		e.Job, e.Rank, e.Host, e.PID)
}
