package collectives

import (
	"errors"
	"fmt"
	"strings"

	"github.com/rdmacell/rdmacell/flight"
)

// Errors to test with errors.Is. They arrive wrapped in the types below,
// which name the rank, the operation and the argument or peer concerned.
var (
	// ErrInvalidArgument: an argument was rejected before any
	// communication; the group is unaffected. Wrapped in *ArgError.
	ErrInvalidArgument = errors.New("collectives: invalid argument")
	// ErrMismatch: the ranks called different collectives or the same one
	// with different arguments. Wrapped in *MismatchError.
	ErrMismatch = errors.New("collectives: ranks disagree about the operation")
	// ErrClosed: the group was closed.
	ErrClosed = errors.New("collectives: group closed")
	// ErrGroupFailed: an earlier operation failed part way (a transport
	// error, an expired context, a sequence mismatch), so the ranks'
	// message streams are no longer aligned and the group cannot be used.
	ErrGroupFailed = errors.New("collectives: group failed")
	// ErrUnknownAlgorithm: an algorithm name did not parse.
	ErrUnknownAlgorithm = errors.New("collectives: unknown algorithm")
	// ErrRequestDone: Wait or Test on a Request whose result was already
	// taken by Wait.
	ErrRequestDone = errors.New("collectives: request already waited")
)

// ArgError reports an argument rejected before any communication.
type ArgError struct {
	Rank    int    // the calling rank, -1 when there is no group
	Op      string // the collective, e.g. "AllReduce"
	Arg     string // the argument, e.g. "recv" or "counts[2]"
	Problem string // what is wrong and what was expected
}

// Error says which rank rejected which argument of which collective, and why.
func (e *ArgError) Error() string {
	return fmt.Sprintf("collectives: rank %d: %s: %s: %s", e.Rank, e.Op, e.Arg, e.Problem)
}

// Unwrap makes errors.Is(err, ErrInvalidArgument) hold.
func (e *ArgError) Unwrap() error { return ErrInvalidArgument }

// MismatchError reports that the ranks disagree about an operation. Every
// rank gets one naming the same odd ranks when the fingerprint exchange
// found the disagreement; when a message tag did (Options.SkipVerify, or
// ranks whose streams fell out of step), Err is the *comm.MismatchError of
// the receive and Odd names the peer that sent it.
type MismatchError struct {
	Rank int    // the reporting rank
	Op   string // the collective this rank called
	Seq  uint64 // this rank's sequence number for it
	// Odd lists the ranks whose call differs from the one most ranks
	// made (ties go to the call of the lowest rank), in increasing order.
	Odd []int
	// Detail says, in words, what each rank called.
	Detail string
	Err    error
}

// Error names the odd ranks and what each rank called.
func (e *MismatchError) Error() string {
	return fmt.Sprintf("collectives: rank %d: %s #%d: ranks disagree (odd: %s): %s", e.Rank, e.Op, e.Seq, rankList(e.Odd), e.Detail)
}

// Unwrap makes errors.Is(err, ErrMismatch) hold, and errors.As reach the
// transport's *comm.MismatchError when there is one.
func (e *MismatchError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrMismatch}
	}
	return []error{ErrMismatch, e.Err}
}

// OpError reports an operation that failed during communication.
type OpError struct {
	Rank      int
	Op        string
	Seq       uint64
	Algorithm Algorithm
	// Step is the algorithm's message index where it failed, -1 outside a
	// step; Peer the rank it was talking to, -1 for none.
	Step, Peer int
	Err        error
}

// Error locates the failure (rank, operation, algorithm, step, peer) and
// gives the cause.
func (e *OpError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "collectives: rank %d: %s #%d", e.Rank, e.Op, e.Seq)
	if e.Algorithm != Auto {
		fmt.Fprintf(&b, " (%s)", e.Algorithm)
	}
	if e.Step >= 0 {
		fmt.Fprintf(&b, ": step %d", e.Step)
	}
	if e.Peer >= 0 {
		fmt.Fprintf(&b, ": rank %d", e.Peer)
	}
	fmt.Fprintf(&b, ": %v", e.Err)
	return b.String()
}

// Unwrap returns the cause.
func (e *OpError) Unwrap() error { return e.Err }

// rankList formats ranks compactly: "0-2, 5".
func rankList(rs []int) string {
	if len(rs) == 0 {
		return "none"
	}
	return flight.FormatRanks(rs)
}
