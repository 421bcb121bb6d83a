package netlab

import (
	"errors"
	"fmt"
	"strings"
)

// Errors the package wraps.
var (
	// ErrConfig is a lab description or argument that cannot be used.
	ErrConfig = errors.New("netlab: invalid configuration")
	// ErrNotSupported says the lab cannot be built here: not root, or no
	// network namespaces.
	ErrNotSupported = errors.New("netlab: network namespaces not available")
	// ErrDown is an operation on a lab that was taken down.
	ErrDown = errors.New("netlab: lab is down")
	// ErrInUse is a lab that belongs to a process that still runs, which
	// alone may take it down, or a detached lab's name already taken.
	ErrInUse = errors.New("netlab: lab in use")
)

// CommandError is a command of iproute2 (or another tool) that failed,
// with what it printed.
type CommandError struct {
	Args   []string
	Output string
	Err    error
}

func (e *CommandError) Error() string {
	out := strings.TrimSpace(e.Output)
	if out == "" {
		return fmt.Sprintf("netlab: %s: %v", strings.Join(e.Args, " "), e.Err)
	}
	return fmt.Sprintf("netlab: %s: %v: %s", strings.Join(e.Args, " "), e.Err, out)
}

func (e *CommandError) Unwrap() error { return e.Err }
