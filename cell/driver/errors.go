package driver

import (
	"errors"
	"fmt"
)

// Errors of the driver. They arrive wrapped with the peer and the path or
// field concerned; test them with errors.Is. Failures of ranges come as the
// engine reports them (*cell.RangeError wrapping *cell.NoPathError,
// cell.ErrTooLong, ...).
var (
	// ErrSetup: the peer's setup information is malformed or does not
	// match this end (see SetupError).
	ErrSetup = errors.New("driver: bad setup information")
	// ErrClosed: the connection was closed by Close.
	ErrClosed = errors.New("driver: connection closed")
	// ErrAborted: the connection was ended by Abort.
	ErrAborted = errors.New("driver: connection aborted")
	// ErrPeerClosed: the peer closed or aborted the connection.
	ErrPeerClosed = errors.New("driver: peer closed the connection")
	// ErrPeerReset: the peer asked for a path to be reset.
	ErrPeerReset = errors.New("driver: peer resets the path")
	// ErrPeerDead: the peer declared a path dead.
	ErrPeerDead = errors.New("driver: peer declared the path dead")
	// ErrResetTimeout: a path was not reset with the peer within
	// Config.ResetTimeout, so it was declared dead. It does not wrap
	// context.DeadlineExceeded: no caller's context ended.
	ErrResetTimeout = errors.New("driver: path not reset in time")
	// ErrControl: the control QP that coordinates path resets failed, so
	// no path can be reset any more.
	ErrControl = errors.New("driver: control channel failed")
)

// SetupError reports setup information from the peer that cannot be used:
// it came over the network, so every field is checked.
type SetupError struct {
	Peer string
	// Field names the offending field, as in "paths[2].provider".
	Field string
	// Detail says what was wrong, as in `"shm", want "tcp"`.
	Detail string
	// Err is an underlying cause (a decoding error), or nil.
	Err error
}

// Error names the peer, the field and what was wrong with it.
func (e *SetupError) Error() string {
	msg := fmt.Sprintf("driver: peer %s: setup field %s: %s", e.Peer, e.Field, e.Detail)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Is makes errors.Is(err, ErrSetup) hold.
func (e *SetupError) Is(target error) bool { return target == ErrSetup }

// Unwrap returns the underlying cause.
func (e *SetupError) Unwrap() error { return e.Err }

// PathError reports a failure of one path's QP outside the engine's
// sight: a reset that could not be completed, or a post the provider
// refused. It is what the engine is given as the cause of PathFailed and
// PathDead, so it shows up inside *cell.NoPathError.
type PathError struct {
	Peer string
	Path int
	QPN  uint32
	// Op is what failed: "reset", "post", "close".
	Op  string
	Err error
}

// Error names the peer, the path, its QP and what failed.
func (e *PathError) Error() string {
	return fmt.Sprintf("driver: peer %s path %d (qp %d): %s: %v", e.Peer, e.Path, e.QPN, e.Op, e.Err)
}

// Unwrap returns the cause.
func (e *PathError) Unwrap() error { return e.Err }
