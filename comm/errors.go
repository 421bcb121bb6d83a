package comm

import (
	"errors"
	"fmt"
	"strconv"
)

// Errors of the communicator. They arrive wrapped with the rank, the peer
// and the argument concerned; test them with errors.Is.
var (
	// ErrInvalidArgument: a call was given a peer, buffer or option it
	// cannot use. The message names the argument and its value.
	ErrInvalidArgument = errors.New("comm: invalid argument")
	// ErrClosed: the communicator was closed.
	ErrClosed = errors.New("comm: communicator closed")
	// ErrAborted: a rank aborted the job (see AbortError).
	ErrAborted = errors.New("comm: job aborted")
	// ErrPeerClosed: the peer closed its communicator, so nothing more
	// can be exchanged with it.
	ErrPeerClosed = errors.New("comm: peer closed its communicator")
	// ErrCancelled: the sender gave up a message while it was moving,
	// so the receiver got only part of it.
	ErrCancelled = errors.New("comm: message cancelled by its sender")
	// ErrProtocol: a peer sent something this protocol does not allow.
	ErrProtocol = errors.New("comm: protocol violation")
)

// PeerError reports that an operation could not complete because of the
// rank it involves, or (on the ordered channel) because of a rank of the
// communicator: it died, left, or its connection failed. Rank is the
// rank's number in the job (the world communicator); Host and PID name its
// process. Err is the cause, for instance a *bootstrap.RankDeadError.
type PeerError struct {
	Rank int
	Host string
	PID  int
	Err  error
}

// Error names the rank, its process and the cause.
func (e *PeerError) Error() string {
	return "comm: rank " + strconv.Itoa(e.Rank) + " (host " + e.Host + ", pid " + strconv.Itoa(e.PID) + "): " + e.Err.Error()
}

// Unwrap returns the cause.
func (e *PeerError) Unwrap() error { return e.Err }

// AbortError reports that a rank called Abort: every waiter of the job
// fails with it, on every rank the aborter could reach. Rank, Host and PID
// name the aborting process; Cause is the error it gave, as text when it
// came from another process.
type AbortError struct {
	Rank  int
	Host  string
	PID   int
	Cause string
	// Err is the aborter's error itself, on the aborting rank only.
	Err error
}

// Error names the aborting rank, its process and the cause.
func (e *AbortError) Error() string {
	return fmt.Sprintf("comm: rank %d (host %s, pid %d) aborted the job: %s", e.Rank, e.Host, e.PID, e.Cause)
}

// Is makes errors.Is(err, ErrAborted) hold.
func (e *AbortError) Is(target error) bool { return target == ErrAborted }

// Unwrap returns the aborter's own error, on the aborting rank.
func (e *AbortError) Unwrap() error { return e.Err }

// TruncateError reports a message longer than the buffer posted for it.
// The receive fails with it, and so does the send, if it had not completed
// when the receiver found out (messages of at most the eager size complete
// at the sender as soon as they have landed in the receiver's memory).
type TruncateError struct {
	// Rank received from Peer a message of Len bytes under Tag into a
	// buffer of Cap bytes. Ranks are those of the communicator.
	Rank, Peer int
	Tag        uint64
	Len, Cap   int
}

// Error names both ranks, the tag and both lengths.
func (e *TruncateError) Error() string {
	return fmt.Sprintf("comm: rank %d received a %d-byte message with tag %d from rank %d into a %d-byte buffer",
		e.Rank, e.Len, e.Tag, e.Peer, e.Cap)
}

// EnvError reports an environment variable that is missing or has a value
// Init cannot use.
type EnvError struct {
	// Var is the variable, Value its value ("" when missing).
	Var, Value string
	// Want says what was expected.
	Want string
	// Missing is set when the variable is not set at all.
	Missing bool
}

// Error names the variable, its value and what was wanted.
func (e *EnvError) Error() string {
	if e.Missing {
		return "comm: environment variable " + e.Var + " is not set: want " + e.Want
	}
	return "comm: environment variable " + e.Var + "=" + strconv.Quote(e.Value) + ": want " + e.Want
}

// OptionError reports an Options field with a value Init cannot use.
type OptionError struct {
	// Field is the field, as in "Paths"; Value its value.
	Field, Value string
	Want         string
}

// Error names the field, its value and what was wanted.
func (e *OptionError) Error() string {
	return "comm: Options." + e.Field + " = " + e.Value + ": want " + e.Want
}

// Is makes errors.Is(err, ErrInvalidArgument) hold.
func (e *OptionError) Is(target error) bool { return target == ErrInvalidArgument }
