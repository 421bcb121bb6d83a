package ibv

import (
	"errors"
	"strconv"

	"github.com/rdmacell/rdmacell/verbs"
)

var (
	// ErrNotBuilt is returned by Open in a binary built without the
	// ibverbs build tag (or without cgo): the default build stays pure Go
	// and carries no libibverbs code.
	ErrNotBuilt = errors.New("ibv: built without the ibverbs tag (go build -tags ibverbs, with cgo and libibverbs-dev)")
	// ErrNoDevice is returned by Open when no RDMA device has an active
	// port matching the options, so that callers can fall back to another
	// provider and tests can skip.
	ErrNoDevice = errors.New("ibv: no RDMA device with an active port")
)

// EnvError reports an environment knob whose value cannot be used. It
// wraps verbs.ErrInvalidArgument.
type EnvError struct {
	// Var is the variable's name and Value its value.
	Var, Value string
	// Want says what was expected.
	Want string
}

// Error names the variable, its value and what was expected.
func (e *EnvError) Error() string {
	return "ibv: " + e.Var + "=" + strconv.Quote(e.Value) + ": want " + e.Want
}

// Unwrap lets errors.Is match verbs.ErrInvalidArgument.
func (e *EnvError) Unwrap() error { return verbs.ErrInvalidArgument }
