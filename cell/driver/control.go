package driver

import (
	"encoding/binary"
	"encoding/json"
	"fmt"

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
// every lane that works, numbered. Each lane delivers in order and a lane
// that fails never delivers again, so the messages delivered at the peer
// are always a prefix of those sent: it takes a message only if it is
// the next one, and drops the copies the slower lanes bring. A failed
// lane is not repaired; the channel fails when its last lane does.

// maxLanes bounds the lanes of the control channel: each costs a QP and
// its buffers, and four routes failing at once is past what the paths
// survive anyway.
const maxLanes = 4

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
	// msgCtlDown never travels: it tells reset workers that the control
	// channel failed.
	msgCtlDown
)

var msgNames = [...]string{"invalid", "endpoint", "rts", "dead", "bye", "bell", "control down"}

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
	path int
	gen  uint32
	ep   verbs.Endpoint // msgEP only
	err  error          // msgCtlDown only
}

const (
	ctlMagic  = 0xD5
	ctlHeader = 14 // magic, kind, path (2), gen (4), endpoint length (2), seq (4)
)

// encode writes m into b and returns its length.
func (m *ctlMsg) encode(b []byte) (int, error) {
	var ep []byte
	if m.kind == msgEP {
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
	copy(b[ctlHeader:], ep)
	return ctlHeader + len(ep), nil
}

// decodeCtl reads a message the peer sent; it checks every field.
func decodeCtl(b []byte, paths int, provider string) (ctlMsg, error) {
	if len(b) < ctlHeader || b[0] != ctlMagic {
		return ctlMsg{}, fmt.Errorf("control message of %d bytes without a valid header", len(b))
	}
	m := ctlMsg{kind: msgKind(b[1]), path: int(binary.LittleEndian.Uint16(b[2:])), gen: binary.LittleEndian.Uint32(b[4:]),
		seq: binary.LittleEndian.Uint32(b[10:])}
	n := int(binary.LittleEndian.Uint16(b[8:]))
	switch {
	case m.kind < msgEP || m.kind > msgBell:
		return ctlMsg{}, fmt.Errorf("control message of kind %d", b[1])
	case m.kind != msgBye && m.kind != msgBell && m.path >= paths:
		return ctlMsg{}, fmt.Errorf("%v message for path %d of %d", m.kind, m.path, paths)
	case ctlHeader+n > len(b):
		return ctlMsg{}, fmt.Errorf("%v message claims %d bytes of endpoint, has %d", m.kind, n, len(b)-ctlHeader)
	case m.kind == msgEP && n == 0:
		return ctlMsg{}, fmt.Errorf("endpoint message for path %d without an endpoint", m.path)
	}
	if m.kind == msgEP {
		var ep verbs.Endpoint // not into m, which would then escape
		if err := json.Unmarshal(b[ctlHeader:ctlHeader+n], &ep); err != nil {
			return ctlMsg{}, fmt.Errorf("endpoint message for path %d: %w", m.path, err)
		}
		if msg := checkEndpoint(&ep, provider); msg != "" {
			return ctlMsg{}, fmt.Errorf("endpoint message for path %d: %s", m.path, msg)
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
	down  bool   // every lane failed
	err   error
}

// lane is one QP of the control channel.
type lane struct {
	idx  int
	qp   verbs.QP
	qpn  uint32
	free []int // send slots not in use
	// pending holds messages waiting for a send slot.
	pending []ctlMsg
	// byeSlot is the send slot of the goodbye, or -1.
	byeSlot int
	down    bool
	recvs   []verbs.RecvWR
	rsge    []verbs.SGE
	wr      verbs.SendWR
	sge     [1]verbs.SGE
}

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

// postCtlLocked posts m on lane l, which has a free send slot.
func (c *Conn) postCtlLocked(l *lane, m ctlMsg) {
	slot := l.free[len(l.free)-1]
	off := c.lay.ctlSendOff(l.idx, slot)
	n, err := m.encode(c.stage[off : off+ctlMsgSize])
	if err != nil {
		// Only an endpoint too long for the buffers, which no lane can
		// send either.
		c.laneDownLocked(l, fmt.Errorf("encode %v message: %w", m.kind, err))
		return
	}
	l.free = l.free[:len(l.free)-1]
	l.sge[0] = verbs.SGE{Addr: c.stageAddr + uint64(off), Length: uint32(n), LKey: c.stageMR.LKey()}
	l.wr = verbs.SendWR{ID: uint64(slot), Opcode: verbs.OpSend, Flags: verbs.Signaled, SGL: l.sge[:]}
	if m.kind == msgBye {
		l.byeSlot = slot
	}
	if _, err := l.qp.PostSend(&l.wr); err != nil {
		c.laneDownLocked(l, fmt.Errorf("post %v message: %w", m.kind, err))
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
	if l.down {
		return
	}
	slot := int(wc.ID)
	if wc.Status != verbs.StatusSuccess || slot < 0 || slot >= c.lay.ctlSlots {
		c.laneDownLocked(l, &verbs.WCError{WC: *wc})
		return
	}
	if wc.Opcode != verbs.OpRecv {
		// A send completed: its slot is free.
		if slot == l.byeSlot {
			l.byeSlot = -1
			c.signalBye()
		}
		l.free = append(l.free, slot)
		if len(l.pending) > 0 {
			m := l.pending[0]
			l.pending = l.pending[1:]
			c.postCtlLocked(l, m)
		}
		return
	}
	// A bell that found no free slot at the peer was left out for the
	// messages under way, which wake this end as well: whatever arrives,
	// a hold may have landed before it.
	c.holdsDue = true
	off := c.lay.ctlRecvOff(l.idx, slot)
	m, err := decodeCtl(c.stage[off:off+min(int(wc.ByteLen), ctlMsgSize)], c.cfg.Paths, c.provider)
	if err := c.postCtlRecvLocked(l, slot); err != nil {
		c.laneDownLocked(l, fmt.Errorf("post control receive: %w", err))
		return
	}
	if err != nil {
		c.log.Warn("cell driver: malformed control message", "peer", c.cfg.Peer, "lane", l.idx, "err", err)
		return
	}
	if m.kind == msgBell {
		return // it woke the progress goroutine: all it is for
	}
	if m.seq != c.ctl.next {
		return // a slower lane's copy of a message taken already
	}
	c.ctl.next++
	c.dispatchLocked(now, m)
}

// laneDownLocked records that lane l failed, and that the control
// channel did if it was the last lane: resets under way cannot finish
// then, and later ones fail at once.
func (c *Conn) laneDownLocked(l *lane, cause error) {
	if l.down {
		return
	}
	l.down, l.pending = true, nil
	k := &c.ctl
	left := 0
	for _, o := range k.lanes {
		if !o.down {
			left++
		}
	}
	if left > 0 {
		if c.err == nil {
			c.log.Warn("cell driver: control lane failed", "peer", c.cfg.Peer, "lane", l.idx, "qp", l.qpn, "lanes left", left, "err", cause)
		}
		return
	}
	k.down = true
	k.err = fmt.Errorf("%w: peer %s: every lane failed, the last (qp %d): %w", ErrControl, c.cfg.Peer, l.qpn, cause)
	if c.err == nil {
		c.log.Warn("cell driver: control channel failed; paths can no longer be reset", "peer", c.cfg.Peer, "err", cause)
	}
	for _, p := range c.paths {
		if p.Resetting() {
			p.notify(ctlMsg{kind: msgCtlDown, path: p.idx, err: k.err})
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
