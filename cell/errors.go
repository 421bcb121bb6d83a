package cell

import (
	"errors"
	"strconv"
	"strings"
)

// Errors of the engine. They arrive wrapped in the types below, which
// name the peer, the path or the range; test them with errors.Is.
var (
	// ErrInvalid: a configuration or an input is malformed.
	ErrInvalid = errors.New("cell: invalid argument")
	// ErrBusy: MaxRanges ranges are already outstanding in that direction.
	ErrBusy = errors.New("cell: too many ranges outstanding")
	// ErrNoPath: no path of the connection is usable any more. It is
	// terminal: the connection has failed and every later input says so.
	ErrNoPath = errors.New("cell: no usable path")
	// ErrSoftTimeout: a cell went without a token for longer than its
	// path's soft timeout.
	ErrSoftTimeout = errors.New("cell: soft timeout")
	// ErrNoProgress: a path demoted for a soft timeout delivered no token
	// at all for as long again, and was given up.
	ErrNoProgress = errors.New("cell: no progress")
	// ErrNACK: a path reported a failed work request or the receiver
	// refused a cell.
	ErrNACK = errors.New("cell: negative acknowledgement")
	// ErrPathFailed: the driver reported the path failed (for example the
	// peer asked for it to be reset).
	ErrPathFailed = errors.New("cell: path failed")
	// ErrTooLong: a send range is longer than the receive range granted
	// for it.
	ErrTooLong = errors.New("cell: range longer than the receiver's grant")
	// ErrRemote: the other end failed the range.
	ErrRemote = errors.New("cell: range failed at the sender")
)

// PathError says why a path was given up.
type PathError struct {
	Peer string
	Path int
	// Cell is the Global_Cell_ID concerned, when HasCell is set.
	Cell    uint32
	HasCell bool
	Err     error
}

func (e *PathError) Error() string { return "cell: peer " + e.Peer + " " + e.detail() }

// detail is the message without the package and peer, for composing.
func (e *PathError) detail() string {
	var b strings.Builder
	b.WriteString("path ")
	b.WriteString(strconv.Itoa(e.Path))
	if e.HasCell {
		b.WriteString(" cell ")
		b.WriteString(strconv.FormatUint(uint64(e.Cell), 10))
	}
	b.WriteString(": ")
	b.WriteString(bare(e.Err, e.Peer))
	return b.String()
}

func (e *PathError) Unwrap() error { return e.Err }

// NoPathError is the terminal failure of a connection: every path was
// given up. Paths holds why, one *PathError per path.
type NoPathError struct {
	Peer  string
	Paths []error
}

func (e *NoPathError) Error() string { return "cell: peer " + e.Peer + ": " + e.detail() }

func (e *NoPathError) detail() string {
	var b strings.Builder
	b.WriteString("no usable path")
	for i, err := range e.Paths {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		if pe, ok := err.(*PathError); ok {
			b.WriteString(pe.detail())
		} else {
			b.WriteString("path " + strconv.Itoa(i) + ": " + bare(err, e.Peer))
		}
	}
	return b.String()
}

// Is makes errors.Is(err, ErrNoPath) hold.
func (e *NoPathError) Is(target error) bool { return target == ErrNoPath }

// Unwrap gives errors.As access to each path's *PathError.
func (e *NoPathError) Unwrap() []error { return e.Paths }

// RangeError reports a failed range.
type RangeError struct {
	Peer string
	// Dir is "send" or "receive".
	Dir string
	Tag uint64
	// Seq is the range's sequence number on the connection, the one its
	// grant and final carry.
	Seq uint32
	Len int64
	Err error
}

func (e *RangeError) Error() string {
	return "cell: peer " + e.Peer + ": " + e.Dir + " range tag " + strconv.FormatUint(e.Tag, 10) +
		" (seq " + strconv.FormatUint(uint64(e.Seq), 10) + ", " + strconv.FormatInt(e.Len, 10) +
		" bytes): " + bare(e.Err, e.Peer)
}

func (e *RangeError) Unwrap() error { return e.Err }

// bare renders a wrapped error without the package and peer prefixes its
// wrapper already gives, so that composed messages read once.
func bare(err error, peer string) string {
	if err == nil {
		return "up"
	}
	switch x := err.(type) {
	case *NoPathError:
		return x.detail()
	case *PathError:
		return x.detail()
	}
	msg := strings.TrimPrefix(err.Error(), "cell: ")
	return strings.TrimPrefix(msg, "peer "+peer+": ")
}
