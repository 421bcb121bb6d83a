package cell

import "github.com/rdmacell/rdmacell/verbs"

// Ready is the batch of outputs the engine produced since the previous
// call to Engine.Ready. It and everything it points to (work request
// chains included) stay valid until the next input to the engine, and the
// engine reuses its storage after that: a driver acts on a Ready before
// it feeds the next input, in the order of the fields:
//
//  1. Recvs: post the receive chains (before any token below announces the
//     credit they give back).
//  2. Resets: start resetting those paths, in the background.
//  3. Posts: post the cell chains.
//  4. Tokens, Grants, Finals, Holds, HoldAcks: write the records into the
//     peer's rings.
//  5. Events: hand the ranges back to the application.
type Ready struct {
	Recvs    []RecvPost
	Resets   []Reset
	Posts    []Post
	Tokens   []TokenWrite
	Grants   []GrantWrite
	Finals   []FinalWrite
	Holds    []HoldWrite
	HoldAcks []HoldAckWrite
	Events   []Event
	// Deadline is the time by which the driver must call Tick, or 0 if
	// no timer is running.
	Deadline int64
}

// Empty reports whether the batch holds nothing to do.
func (rd *Ready) Empty() bool {
	return len(rd.Recvs) == 0 && len(rd.Resets) == 0 && len(rd.Posts) == 0 && len(rd.Tokens) == 0 &&
		len(rd.Grants) == 0 && len(rd.Finals) == 0 && len(rd.Holds) == 0 && len(rd.HoldAcks) == 0 &&
		len(rd.Events) == 0
}

func (rd *Ready) clear() {
	rd.Recvs = rd.Recvs[:0]
	rd.Resets = rd.Resets[:0]
	rd.Posts = rd.Posts[:0]
	rd.Tokens = rd.Tokens[:0]
	rd.Grants = rd.Grants[:0]
	rd.Finals = rd.Finals[:0]
	rd.Holds = rd.Holds[:0]
	rd.HoldAcks = rd.HoldAcks[:0]
	rd.Events = rd.Events[:0]
	rd.Deadline = 0
}

// RecvPost asks for the receive chain WR (Count requests) to be posted on
// the path.
type RecvPost struct {
	Path  int
	WR    *verbs.RecvWR
	Count int
}

// Post asks for a cell's chain to be posted on the path with one
// PostSend: a WRITE linked to a signaled WRITE_WITH_IMM whose immediate is
// Cell, or the WRITE_WITH_IMM alone for a cell of at most one MTU. If
// Tail is not nil the cell is its range's last, and the binding writes
// the tail into slot Tail.Seq mod MaxRanges of the peer's tail ring
// within the chain, before its WRITE_WITH_IMM, so that the tail has
// landed when the cell's arrival is seen.
type Post struct {
	Path int
	WR   *verbs.SendWR
	Cell uint32
	Tail *Tail
	// Len is the cell's length in bytes; Again says this copy is not the
	// cell's first (a re-post after a soft timeout or a failed path).
	Len   int64
	Again bool
}

// Reset asks for the path's QP to be reset with its peer (ERR, RESET,
// INIT, RTR, RTS), in the background. Once the QP is in INIT again,
// before it moves to RTR, the driver posts Refill there, so that the peer
// finds every receive posted when it resumes. When both ends are back the
// driver calls Engine.PathReset; if the path cannot be brought back, it
// closes the QP and calls Engine.PathDead. A Reset for a path whose reset
// is already under way (the peer asked first) joins it.
type Reset struct {
	Path   int
	Refill *verbs.RecvWR
	Cause  error
}

// TokenWrite asks for a token to be written, over Path, into slot Slot of
// the peer's token ring.
type TokenWrite struct {
	Path  int
	Slot  int
	Token Token
}

// GrantWrite asks for a grant to be written, over Path, into slot Slot of
// the peer's grant ring.
type GrantWrite struct {
	Path  int
	Slot  int
	Grant Grant
}

// FinalWrite asks for a final to be written, over Path, into slot Slot of
// the peer's final ring.
type FinalWrite struct {
	Path  int
	Slot  int
	Final Final
}

// HoldWrite asks for a hold to be written, over Path, into slot Slot of
// the peer's hold ring.
type HoldWrite struct {
	Path int
	Slot int
	Hold Hold
}

// HoldAckWrite asks for a hold ack to be written, over Path, into slot
// Slot of the peer's hold-ack ring.
type HoldAckWrite struct {
	Path int
	Slot int
	Ack  HoldAck
}

// queued reports whether this batch already writes a record of range seq:
// reemit writes each record once a batch.
func queued[W any](ws []W, seq uint32, seqOf func(*W) uint32) bool {
	for i := range ws {
		if seqOf(&ws[i]) == seq {
			return true
		}
	}
	return false
}
