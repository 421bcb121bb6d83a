package verbs

import (
	"errors"
	"strconv"
)

// Access is a set of memory region access rights.
type Access uint8

const (
	// AccessLocalWrite lets receives and incoming writes on behalf of local
	// requests store into the region.
	AccessLocalWrite Access = 1 << iota
	// AccessRemoteWrite lets peers WRITE into the region. As in ibverbs it
	// requires AccessLocalWrite.
	AccessRemoteWrite
	// AccessRemoteRead lets peers read the region.
	AccessRemoteRead
)

// QPState is the state of a queue pair.
type QPState uint8

const (
	StateReset QPState = iota
	StateInit
	StateRTR
	StateRTS
	StateErr
)

var stateNames = [...]string{"RESET", "INIT", "RTR", "RTS", "ERR"}

func (s QPState) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "QPState(" + strconv.Itoa(int(s)) + ")"
}

// CanTransition reports whether an RC QP may move from one state to
// another.
func CanTransition(from, to QPState) bool {
	switch to {
	case StateReset, StateErr:
		return true
	case StateInit:
		return from == StateReset
	case StateRTR:
		return from == StateInit
	case StateRTS:
		return from == StateRTR
	}
	return false
}

// Status is the outcome of a work request, as in ibv_wc_status.
type Status uint8

const (
	StatusSuccess Status = iota
	// StatusLocalLength: a receive buffer was too small for the incoming
	// SEND, or a request exceeded the provider's message size.
	StatusLocalLength
	// StatusLocalProtection: a scatter-gather element's lkey, bounds or
	// access did not match a local region.
	StatusLocalProtection
	// StatusWRFlush: the QP was in StateErr when the request was executed.
	StatusWRFlush
	// StatusRemoteAccess: the responder refused the rkey, the range or the
	// access rights of a WRITE.
	StatusRemoteAccess
	// StatusRemoteInvalidRequest: the responder could not execute the
	// request (for example a SEND larger than the posted receive).
	StatusRemoteInvalidRequest
	// StatusRetryExceeded: the responder did not acknowledge within the
	// QP's timeout and retries, or the connection to it was lost.
	StatusRetryExceeded
	// StatusRNRRetryExceeded: the responder had no receive posted for
	// longer than the QP's RNR retries allow.
	StatusRNRRetryExceeded
	// StatusFatal: the provider failed in a way not covered above.
	StatusFatal
)

var statusNames = [...]string{
	"success", "local length error", "local protection error", "flushed",
	"remote access error", "remote invalid request", "transport retry counter exceeded",
	"RNR retry counter exceeded", "fatal error",
}

func (s Status) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return "Status(" + strconv.Itoa(int(s)) + ")"
}

// Errors returned by posting and by Modify. They are wrapped with context;
// test them with errors.Is.
var (
	// ErrInvalidState: the QP's state does not allow the call.
	ErrInvalidState = errors.New("verbs: invalid QP state")
	// ErrQueueFull: the send or receive queue is full.
	ErrQueueFull = errors.New("verbs: work queue full")
	// ErrInvalidArgument: a work request, configuration or endpoint is
	// malformed.
	ErrInvalidArgument = errors.New("verbs: invalid argument")
	// ErrClosed: the object was closed.
	ErrClosed = errors.New("verbs: closed")
)

// WCError reports a failed work completion as an error.
type WCError struct {
	WC WC
}

func (e *WCError) Error() string {
	return "verbs: " + e.WC.Opcode.String() + " wr " + strconv.FormatUint(e.WC.ID, 10) +
		" on qp " + strconv.FormatUint(uint64(e.WC.QPN), 10) + ": " + e.WC.Status.String()
}
