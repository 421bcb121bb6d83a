package driver

import (
	"os"

	"github.com/rdmacell/rdmacell/cell"
)

// layout places the connection's registered memory. One allocation holds
// two regions:
//
//   - the rings, which the peer writes with one-sided WRITEs: a token ring
//     per path (Window slots each), then the grant, final, tail, hold and
//     hold-ack rings (MaxRanges slots each), in that order;
//   - the staging area, local only: the records this end writes are
//     encoded there first, one slot per path and ring slot, and the send
//     and receive buffers of each lane of the control channel.
//
// Tokens get a ring per path, not one ring of Window slots for the whole
// connection: a cell re-posted after its path was given up has two copies
// in flight, and their tokens would share a slot; the second could
// overwrite the first before it is read, and a healthy path would then
// wait for a token that never comes.
//
// A staging slot is reused only for a later record of the same path and
// ring slot, which the path posts after the earlier one: if the earlier
// write still reads the slot, the peer's ring slot ends with the later
// record either way.
type layout struct {
	paths, window, ranges, lanes int

	tokens, grants, finals, tails, holds, acks int // offsets in the ring region
	ringLen                                    int

	stTokens, stGrants, stFinals, stTails, stHolds, stAcks int // offsets in the staging region
	ctlSend, ctlRecv                                       int
	ctlSlots                                               int // per lane
	stageLen                                               int

	stageOff, total int // the staging region within the allocation
}

// ctlMsgSize is the size of a control channel buffer: room for an
// endpoint with long addresses.
const ctlMsgSize = 1024

func newLayout(paths, window, ranges int) layout {
	l := layout{paths: paths, window: window, ranges: ranges, lanes: laneCount(paths)}
	l.tokens = 0
	l.grants = l.tokens + paths*window*cell.TokenSize
	l.finals = l.grants + ranges*cell.GrantSize
	l.tails = l.finals + ranges*cell.FinalSize
	l.holds = l.tails + ranges*cell.TailSize
	l.acks = l.holds + ranges*cell.HoldSize
	l.ringLen = l.acks + ranges*cell.HoldSize

	l.ctlSlots = 2*paths + 8
	l.stTokens = 0
	l.stGrants = l.stTokens + paths*window*cell.TokenSize
	l.stFinals = l.stGrants + paths*ranges*cell.GrantSize
	l.stTails = l.stFinals + paths*ranges*cell.FinalSize
	l.stHolds = l.stTails + paths*ranges*cell.TailSize
	l.stAcks = l.stHolds + paths*ranges*cell.HoldSize
	l.ctlSend = l.stAcks + paths*ranges*cell.HoldSize
	l.ctlRecv = l.ctlSend + l.lanes*l.ctlSlots*ctlMsgSize
	l.stageLen = l.ctlRecv + l.lanes*l.ctlSlots*ctlMsgSize

	page := os.Getpagesize()
	l.stageOff = (l.ringLen + page - 1) &^ (page - 1)
	l.total = l.stageOff + l.stageLen
	return l
}

func (l *layout) tokenOff(path, slot int) int {
	return l.tokens + (path*l.window+slot)*cell.TokenSize
}

func (l *layout) tailOff(slot int) int { return l.tails + slot*cell.TailSize }

func (l *layout) stTailOff(path, slot int) int {
	return l.stTails + (path*l.ranges+slot)*cell.TailSize
}

func (l *layout) stTokenOff(path, slot int) int {
	return l.stTokens + (path*l.window+slot)*cell.TokenSize
}

func (l *layout) ctlSendOff(lane, slot int) int {
	return l.ctlSend + (lane*l.ctlSlots+slot)*ctlMsgSize
}

func (l *layout) ctlRecvOff(lane, slot int) int {
	return l.ctlRecv + (lane*l.ctlSlots+slot)*ctlMsgSize
}
