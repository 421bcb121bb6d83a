package launcher

import (
	"errors"
	"fmt"
)

// Exit codes of cellrun for its own failures; a failed rank's code is
// passed on as it is.
const (
	// ExitFailure: cellrun could not run the job (etcd, build, rendezvous).
	ExitFailure = 1
	// ExitUsage: a bad command line or Config.
	ExitUsage = 2
)

// ErrUsage is wrapped by every error about a bad command line or Config,
// which cellrun reports with exit code ExitUsage.
var ErrUsage = errors.New("bad usage")

// FlagError reports a flag, or the Config field behind it, whose value
// cellrun cannot use.
type FlagError struct {
	Flag  string // e.g. "--transport"
	Value string // as given
	Want  string // what would be accepted
}

// Error names the flag, its value and what was expected.
func (e *FlagError) Error() string {
	return fmt.Sprintf("%s %q: %s", e.Flag, e.Value, e.Want)
}

// Is makes every FlagError match ErrUsage.
func (e *FlagError) Is(target error) bool { return target == ErrUsage }

// usageError marks an error of the command-line parser as ErrUsage while
// keeping its own message.
type usageError struct{ err error }

func (e usageError) Error() string   { return e.err.Error() }
func (e usageError) Unwrap() []error { return []error{e.err, ErrUsage} }
