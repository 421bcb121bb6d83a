package driver

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/rdmacell/rdmacell/verbs"
)

// The control channel carries SEND messages that coordinate path resets
// (see reset.go) and the end of the connection. It is not on the data
// path: a reset sends two messages each way. But it must outlive what
// kills paths: one QP would be a single point of failure, since a fabric
// hashes each QP onto one route, and a dead route under the control QP
// would leave every path waiting for a reset until that route healed.
//
// So the channel has lanes, one QP each, one per path up to maxLanes,
// created like the paths (lane i with path i's local address) so that
// they spread over routes as the paths do. Every message goes out on
// every lane that works, numbered. Each lane delivers in order, so the
// peer takes a message only if it is the next one and drops the copies
// the slower lanes bring. A lane that fails is repaired over the others
// (see lanes.go), and then sends again every message the peer has not
// acknowledged, so that it alone delivers a gapless sequence: the
// messages taken at the peer are always a prefix of those sent. The
// channel fails only when its last working lane does.

// maxLanes bounds the lanes of the control channel: each costs a QP and
// its buffers at both ends, for every peer. Since a failed lane is
// repaired over the other, two survive any one route failing; both
// failing at once ends the channel, as it would any number of lanes
// hashed onto the failing routes.
const maxLanes = 2

func laneCount(paths int) int { return min(paths, maxLanes) }

type msgKind uint8

const (
	// msgEP: the sender's QP of the path is in INIT for incarnation gen,
	// with its receives posted; here is its endpoint.
	msgEP msgKind = iota + 1
	// msgRTS: the sender's QP of the path is in RTS for incarnation gen.
	msgRTS
	// msgDead: the sender closed the path for good.
	msgDead
	// msgBye: the sender is closing the connection.
	msgBye
	// msgBell: a final, hold or hold ack the sender wrote has landed. It
	// is not numbered and carries nothing: it wakes a receiver that parked
	// (see progress.go), and the record is in place by the time it
	// arrives.
	msgBell
	// msgLaneEP and msgLaneRTS are msgEP and msgRTS for the sender's QP
	// of control lane path (see lanes.go).
	msgLaneEP
	msgLaneRTS
	// msgCtlDown never travels: it tells reset workers that the control
	// channel failed.
	msgCtlDown
)

var msgNames = [...]string{"invalid", "endpoint", "rts", "dead", "bye", "bell", "lane endpoint", "lane rts", "control down"}

// String names the kind in logs.
func (k msgKind) String() string {
	if int(k) < len(msgNames) {
		return msgNames[k]
	}
	return fmt.Sprintf("msgKind(%d)", k)
}

// ctlMsg is one control message.
type ctlMsg struct {
	kind msgKind
	seq  uint32 // its number among the messages of this end
	// ack is the number of the peer's messages the sender has taken: the
	// peer need not send those again on a repaired lane.
	ack  uint32
	path int // the path, or the lane of msgLaneEP and msgLaneRTS
	gen  uint32
	ep   verbs.Endpoint // msgEP only
	err  error          // msgCtlDown only
}

const (
	ctlMagic  = 0xD5
	ctlHeader = 18 // magic, kind, path (2), gen (4), endpoint length (2), seq (4), ack (4)
)

// encode writes m into b and returns its length.
func (m *ctlMsg) encode(b []byte) (int, error) {
	var ep []byte
	if m.kind == msgEP || m.kind == msgLaneEP {
		// A copy, so that m itself does not escape: bells and other
		// messages are sent on the data path, which must not allocate.
		e := m.ep
		var err error
		if ep, err = json.Marshal(&e); err != nil {
			return 0, err
		}
	}
	if ctlHeader+len(ep) > len(b) {
		return 0, fmt.Errorf("%w: control message of %d bytes, buffers hold %d", verbs.ErrInvalidArgument, ctlHeader+len(ep), len(b))
	}
	b[0], b[1] = ctlMagic, byte(m.kind)
	binary.LittleEndian.PutUint16(b[2:], uint16(m.path))
	binary.LittleEndian.PutUint32(b[4:], m.gen)
	binary.LittleEndian.PutUint16(b[8:], uint16(len(ep)))
	binary.LittleEndian.PutUint32(b[10:], m.seq)
	binary.LittleEndian.PutUint32(b[14:], m.ack)
	copy(b[ctlHeader:], ep)
	return ctlHeader + len(ep), nil
}

// decodeCtl reads a message the peer sent; it checks every field.
func decodeCtl(b []byte, paths int, provider string) (ctlMsg, error) {
	if len(b) < ctlHeader || b[0] != ctlMagic {
		return ctlMsg{}, fmt.Errorf("control message of %d bytes without a valid header", len(b))
	}
	m := ctlMsg{kind: msgKind(b[1]), path: int(binary.LittleEndian.Uint16(b[2:])), gen: binary.LittleEndian.Uint32(b[4:]),
		seq: binary.LittleEndian.Uint32(b[10:]), ack: binary.LittleEndian.Uint32(b[14:])}
	n := int(binary.LittleEndian.Uint16(b[8:]))
	lane := m.kind == msgLaneEP || m.kind == msgLaneRTS
	switch {
	case m.kind < msgEP || m.kind > msgLaneRTS:
		return ctlMsg{}, fmt.Errorf("control message of kind %d", b[1])
	case lane && m.path >= laneCount(paths):
		return ctlMsg{}, fmt.Errorf("%v message for lane %d of %d", m.kind, m.path, laneCount(paths))
	case !lane && m.kind != msgBye && m.kind != msgBell && m.path >= paths:
		return ctlMsg{}, fmt.Errorf("%v message for path %d of %d", m.kind, m.path, paths)
	case ctlHeader+n > len(b):
		return ctlMsg{}, fmt.Errorf("%v message claims %d bytes of endpoint, has %d", m.kind, n, len(b)-ctlHeader)
	case (m.kind == msgEP || m.kind == msgLaneEP) && n == 0:
		return ctlMsg{}, fmt.Errorf("%v message for %d without an endpoint", m.kind, m.path)
	}
	if m.kind == msgEP || m.kind == msgLaneEP {
		var ep verbs.Endpoint // not into m, which would then escape
		if err := json.Unmarshal(b[ctlHeader:ctlHeader+n], &ep); err != nil {
			return ctlMsg{}, fmt.Errorf("%v message for %d: %w", m.kind, m.path, err)
		}
		if msg := checkEndpoint(&ep, provider); msg != "" {
			return ctlMsg{}, fmt.Errorf("%v message for %d: %s", m.kind, m.path, msg)
		}
		m.ep = ep
	}
	return m, nil
}

// control is the state of the control channel, guarded by Conn.mu.
type control struct {
	lanes []*lane
	seq   uint32 // number of the next message sent
	next  uint32 // number of the next message the peer's lanes deliver
	// sent holds the messages sent that the peer has not acknowledged,
	// oldest first: what a repaired lane sends again.
	sent []ctlMsg
	// byeHeard says the peer said goodbye: its lanes close next, and are
	// not repaired.
	byeHeard bool
	down     bool // every lane failed
	err      error
}

// lane is one QP of the control channel.
type lane struct {
	idx int
	qp  verbs.QP
	qpn uint32
	// qmu serialises the repair worker's Modify calls with Close; it is
	// never held while taking Conn.mu.
	qmu  sync.Mutex
	free []int // send slots not in use
	// pending holds messages waiting for a send slot.
	pending []ctlMsg
	// byeSlot is the send slot of the goodbye, or -1.
	byeSlot int
	// down says the lane sends nothing: it failed, or is being repaired.
	down bool
	// gen is the incarnation of the lane's QP pair agreed with the peer;
	// target the one whose completions count: gen, or the incarnation a
	// repair under way brings up (see lanes.go).
	gen, target uint32
	repairing   bool
	inbox       chan ctlMsg
	early       *ctlMsg // the peer's next repair, come before ours finished
	abandon     context.CancelCauseFunc
	failures    int // attempts in a row that failed
	recvs       []verbs.RecvWR
	rsge        []verbs.SGE
	wr          verbs.SendWR
	sge         [1]verbs.SGE
}

// laneWRID is the work request id of slot of a lane's incarnation gen:
// completions of an incarnation given up are told by it and ignored.
func laneWRID(gen uint32, slot int) uint64 { return uint64(gen&0xffff)<<32 | uint64(uint32(slot)) }

// laneOf returns the lane whose QP is qpn, or nil.
func (c *Conn) laneOf(qpn uint32) *lane {
	for _, l := range c.ctl.lanes {
		if l.qpn == qpn {
			return l
		}
	}
	return nil
}

// postCtlRecvLocked posts the receive of slot i of lane l.
func (c *Conn) postCtlRecvLocked(l *lane, i int) error {
	wr := &l.recvs[i]
	wr.Next = nil
	_, err := l.qp.PostRecv(wr)
	return err
}

// sendCtlLocked numbers m and sends it on every lane that works, queueing
// it on a lane without a free send slot.
func (c *Conn) sendCtlLocked(m ctlMsg) error {
	k := &c.ctl
	if k.down {
		return k.err
	}
	m.seq = k.seq
	k.seq++
	k.sent = append(k.sent, m)
	for _, l := range k.lanes {
		if l.down {
			continue
		}
		if len(l.free) == 0 || len(l.pending) > 0 {
			l.pending = append(l.pending, m)
			continue
		}
		c.postCtlLocked(l, m)
	}
	if k.down {
		return k.err
	}
	return nil
}

// ackedLocked forgets the messages the peer says it has taken.
func (k *control) ackedLocked(ack uint32) {
	i := 0
	for i < len(k.sent) && int32(k.sent[i].seq-ack) < 0 {
		i++
	}
	if i > 0 {
		k.sent = append(k.sent[:0], k.sent[i:]...)
	}
}

// postCtlLocked posts m on lane l, which has a free send slot.
func (c *Conn) postCtlLocked(l *lane, m ctlMsg) {
	slot := l.free[len(l.free)-1]
	off := c.lay.ctlSendOff(l.idx, slot)
	m.ack = c.ctl.next
	n, err := m.encode(c.stage[off : off+ctlMsgSize])
	if err != nil {
		// Only an endpoint too long for the buffers, which no lane can
		// send either.
		c.laneFailedLocked(l, fmt.Errorf("encode %v message: %w", m.kind, err))
		return
	}
	l.free = l.free[:len(l.free)-1]
	l.sge[0] = verbs.SGE{Addr: c.stageAddr + uint64(off), Length: uint32(n), LKey: c.stageMR.LKey()}
	l.wr = verbs.SendWR{ID: laneWRID(l.target, slot), Opcode: verbs.OpSend, Flags: verbs.Signaled, SGL: l.sge[:]}
	if m.kind == msgBye {
		l.byeSlot = slot
	}
	if _, err := l.qp.PostSend(&l.wr); err != nil {
		c.laneFailedLocked(l, fmt.Errorf("post %v message: %w", m.kind, err))
	}
}

// postPendingLocked posts l's queued messages while it has send slots.
func (c *Conn) postPendingLocked(l *lane) {
	for !l.down && len(l.free) > 0 && len(l.pending) > 0 {
		m := l.pending[0]
		l.pending = l.pending[1:]
		c.postCtlLocked(l, m)
	}
}

// ringBellLocked tells the peer that a final, hold or hold ack has landed, on the first
// lane with a free send slot. A lane with none has messages on their way,
// which wake the peer as well; a bell is never queued.
func (c *Conn) ringBellLocked() {
	if c.ctl.down {
		return
	}
	for _, l := range c.ctl.lanes {
		if !l.down && len(l.free) > 0 && len(l.pending) == 0 {
			c.postCtlLocked(l, ctlMsg{kind: msgBell})
			c.counters.bells++
			return
		}
	}
}

// ctlOutLocked reports whether a control message (a bell, say) has not
// completed yet: resting before it does would only wake for its
// completion.
func (c *Conn) ctlOutLocked() bool {
	for _, l := range c.ctl.lanes {
		if !l.down && len(l.free) < c.lay.ctlSlots {
			return true
		}
	}
	return false
}

// sendCtl is sendCtlLocked for goroutines that do not hold the lock.
func (c *Conn) sendCtl(m ctlMsg) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sendCtlLocked(m)
}

// ctlCompletionLocked handles a completion of lane l.
func (c *Conn) ctlCompletionLocked(now int64, l *lane, wc *verbs.WC) {
	if uint32(wc.ID>>32) != l.target&0xffff {
		return // of an incarnation given up: flushed, or a late copy's
	}
	slot := int(uint32(wc.ID))
	if wc.Status != verbs.StatusSuccess || slot >= c.lay.ctlSlots {
		c.laneFailedLocked(l, &verbs.WCError{WC: *wc})
		return
	}
	if wc.Opcode != verbs.OpRecv {
		// A send completed: its slot is free.
		if l.down {
			return
		}
		if slot == l.byeSlot {
			l.byeSlot = -1
			c.signalBye()
		}
		l.free = append(l.free, slot)
		c.postPendingLocked(l)
		return
	}
	// A receive: taken even while the lane is being repaired, once this
	// end's QP is connected and the peer sends on it.
	//
	// A bell that found no free slot at the peer was left out for the
	// messages under way, which wake this end as well: whatever arrives,
	// a hold may have landed before it.
	c.holdsDue = true
	off := c.lay.ctlRecvOff(l.idx, slot)
	m, err := decodeCtl(c.stage[off:off+min(int(wc.ByteLen), ctlMsgSize)], c.cfg.Paths, c.provider)
	if err := c.postCtlRecvLocked(l, slot); err != nil {
		c.laneFailedLocked(l, fmt.Errorf("post control receive: %w", err))
		return
	}
	if err != nil {
		c.log.Warn("cell driver: malformed control message", "peer", c.cfg.Peer, "lane", l.idx, "err", err)
		return
	}
	c.ctl.ackedLocked(m.ack)
	if m.kind == msgBell {
		return // it woke the progress goroutine: all it is for
	}
	if m.seq != c.ctl.next {
		return // a slower lane's copy of a message taken already
	}
	c.ctl.next++
	c.dispatchLocked(now, m)
}

// laneFailedLocked handles a failure of lane l's QP: the lane is
// repaired, or its repair under way is tried again.
func (c *Conn) laneFailedLocked(l *lane, cause error) {
	if l.repairing {
		l.abandon(cause)
		return
	}
	if l.down {
		return
	}
	c.laneDownLocked(l, cause)
	if c.ctl.down || c.err != nil || c.ctl.byeHeard || c.closing {
		return
	}
	c.log.Warn("cell driver: control lane failed; repairing it", "peer", c.cfg.Peer, "lane", l.idx, "qp", l.qpn, "err", cause)
	c.repairLaneLocked(l, nil)
}

// laneDownLocked records that lane l sends nothing any more, and that the
// control channel failed if it was the last lane: resets under way
// cannot finish then, and later ones fail at once.
func (c *Conn) laneDownLocked(l *lane, cause error) {
	if l.down {
		return
	}
	l.down, l.pending = true, nil
	k := &c.ctl
	for _, o := range k.lanes {
		if !o.down {
			return
		}
	}
	k.down = true
	k.err = fmt.Errorf("%w: peer %s: every lane failed, the last (qp %d): %w", ErrControl, c.cfg.Peer, l.qpn, cause)
	if c.err == nil && !k.byeHeard && !c.closing {
		c.log.Warn("cell driver: control channel failed; paths can no longer be reset", "peer", c.cfg.Peer, "err", cause)
	}
	down := ctlMsg{kind: msgCtlDown, err: k.err}
	for _, p := range c.paths {
		if p.Resetting() {
			down.path = p.idx
			p.notify(down)
		}
	}
	for _, o := range k.lanes {
		if o.repairing {
			o.notify(down)
		}
	}
	c.signalBye()
}

// signalBye releases a Close waiting for its goodbye to leave.
func (c *Conn) signalBye() {
	select {
	case <-c.byeDone:
	default:
		close(c.byeDone)
	}
}
