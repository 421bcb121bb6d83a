package cell

import "strconv"

// SendRange is local memory to move to the peer, into the receive range
// the peer granted for it. Send ranges are matched to grants in order:
// the k-th Send of a connection fills the k-th Recv of its peer.
type SendRange struct {
	// Tag is the caller's, handed back in the range's Event.
	Tag uint64
	// Addr and LKey name the memory: Len bytes of a registered region.
	Addr uint64
	LKey uint32
	Len  int64
}

// RecvRange is local memory the peer may write into: Len bytes at Addr of
// a region registered for remote write under RKey.
type RecvRange struct {
	Tag  uint64
	Addr uint64
	RKey uint32
	Len  int64
}

// Grant is the receiver's permission to write one receive range, carried
// from the receiver's engine to the sender's (written into the sender's
// grant ring, slot Seq mod MaxRanges).
type Grant struct {
	Seq  uint32
	Addr uint64
	RKey uint32
	Len  int64
}

// TokenStatus is the receiver's verdict on one copy of a cell.
type TokenStatus uint8

const (
	// TokenOK: the cell landed, first copy seen.
	TokenOK TokenStatus = iota + 1
	// TokenDup: the cell landed and an earlier copy already had.
	TokenDup
	// TokenNACK: the receiver refused the cell (its id is outside any
	// window the sender can have in flight); the sender gives the path up.
	TokenNACK
)

var tokenStatusNames = [...]string{"invalid", "ok", "duplicate", "nack"}

func (s TokenStatus) String() string {
	if int(s) < len(tokenStatusNames) {
		return tokenStatusNames[s]
	}
	return "TokenStatus(" + strconv.Itoa(int(s)) + ")"
}

// Token acknowledges one copy of a cell. The receiver writes it over the
// path the copy arrived on into the sender's token ring, slot ID mod
// Window.
type Token struct {
	ID     uint32
	Path   int
	Status TokenStatus
	// RxTime is the receiver's clock when the copy's completion was
	// handled; only its low 32 bits travel. Clocks are not synchronised
	// across hosts, so it is for diagnostics only; RTT samples use the
	// sender's clock.
	RxTime int64
}

// FinalStatus is the sender's verdict on a whole range.
type FinalStatus uint8

const (
	// FinalOK: every byte landed and nothing can write the range any
	// more.
	FinalOK FinalStatus = iota + 1
	// FinalTooLong: the send range did not fit its grant; nothing was
	// written.
	FinalTooLong
)

// Final tells the receiver that the sender is done with a range, written
// into the receiver's final ring, slot Seq mod MaxRanges. It ends a range
// that had no tail, or whose tail a Hold took back: a cell whose token
// was lost may be re-sent after the receiver saw all its bytes, so after
// a recovery the receiver cannot tell by itself that no write is still
// coming.
type Final struct {
	Seq    uint32
	Len    int64
	Status FinalStatus
}

// Tail tells the receiver which cells make up a range, so that it can
// hand the range back as soon as they have all landed, without waiting
// for the range's Final. It is written into the receiver's tail ring
// (slot Seq mod MaxRanges) within the chain of the range's last cell,
// before the cell's WRITE_WITH_IMM: RC places a QP's writes in order, so
// when the last cell arrives its range's tail is there. The cells of a
// range have consecutive ids, First to First+Cells−1.
//
// A tail is a promise: until the receiver answers a Hold for the range,
// the sender writes no second copy of any of its cells. That is what
// makes "every cell has landed" mean "nothing more will be written".
type Tail struct {
	Seq   uint32
	Len   int64
	First uint32
	Cells uint32
}

// Hold asks the receiver not to complete range Seq on its tail: the
// sender is about to write a cell of it again (its path was given up), so
// a copy may still land after every cell has. The receiver answers with
// a HoldAck, and the range then ends with its Final, as after any
// recovery.
type Hold struct {
	Seq uint32
	// Path is the path the hold went over, a path the sender still
	// trusts: the receiver answers over it, not over one the sender may
	// have just given up.
	Path int
}

// HoldAck answers a Hold: Done says the range was complete already (every
// cell had landed, and it was handed back), so the sender writes none of
// it again; otherwise the receiver now waits for the range's Final.
type HoldAck struct {
	Seq  uint32
	Done bool
}

// EventKind says which side of the connection an Event concerns.
type EventKind uint8

const (
	// Sent: a send range is finished; its memory is the caller's again.
	Sent EventKind = iota + 1
	// Received: a receive range is filled (or failed); its memory is the
	// caller's again.
	Received
)

func (k EventKind) String() string {
	switch k {
	case Sent:
		return "sent"
	case Received:
		return "received"
	}
	return "EventKind(" + strconv.Itoa(int(k)) + ")"
}

// Event reports the end of a range, exactly once per range.
type Event struct {
	Kind EventKind
	Tag  uint64
	// Len is the number of bytes moved: for Received, the length the
	// sender wrote, at most the range's length.
	Len int64
	// Err is nil on success, else a *RangeError. A failure with ErrNoPath
	// comes once every path is closed for good (PathDead), so nothing can
	// land in the range's memory any more.
	Err error
}
