package driver

import (
	"encoding/binary"
	"encoding/json"
	"fmt"

	"github.com/rdmacell/rdmacell/verbs"
)

// The control channel is one extra QP per connection carrying SEND
// messages that coordinate path resets (see reset.go) and the end of the
// connection. It is not on the data path: a reset sends two messages each
// way.

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
	// msgCtlDown never travels: it tells reset workers that the control
	// channel failed.
	msgCtlDown
)

var msgNames = [...]string{"invalid", "endpoint", "rts", "dead", "bye", "control down"}

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
	path int
	gen  uint32
	ep   verbs.Endpoint // msgEP only
	err  error          // msgCtlDown only
}

const (
	ctlMagic  = 0xD5
	ctlHeader = 10 // magic, kind, path (2), gen (4), endpoint length (2)
)

// encode writes m into b and returns its length.
func (m *ctlMsg) encode(b []byte) (int, error) {
	var ep []byte
	if m.kind == msgEP {
		var err error
		if ep, err = json.Marshal(&m.ep); err != nil {
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
	copy(b[ctlHeader:], ep)
	return ctlHeader + len(ep), nil
}

// decodeCtl reads a message the peer sent; it checks every field.
func decodeCtl(b []byte, paths int, provider string) (ctlMsg, error) {
	if len(b) < ctlHeader || b[0] != ctlMagic {
		return ctlMsg{}, fmt.Errorf("control message of %d bytes without a valid header", len(b))
	}
	m := ctlMsg{kind: msgKind(b[1]), path: int(binary.LittleEndian.Uint16(b[2:])), gen: binary.LittleEndian.Uint32(b[4:])}
	n := int(binary.LittleEndian.Uint16(b[8:]))
	switch {
	case m.kind < msgEP || m.kind > msgBye:
		return ctlMsg{}, fmt.Errorf("control message of kind %d", b[1])
	case m.kind != msgBye && m.path >= paths:
		return ctlMsg{}, fmt.Errorf("%v message for path %d of %d", m.kind, m.path, paths)
	case ctlHeader+n > len(b):
		return ctlMsg{}, fmt.Errorf("%v message claims %d bytes of endpoint, has %d", m.kind, n, len(b)-ctlHeader)
	case m.kind == msgEP && n == 0:
		return ctlMsg{}, fmt.Errorf("endpoint message for path %d without an endpoint", m.path)
	}
	if m.kind == msgEP {
		if err := json.Unmarshal(b[ctlHeader:ctlHeader+n], &m.ep); err != nil {
			return ctlMsg{}, fmt.Errorf("endpoint message for path %d: %w", m.path, err)
		}
		if msg := checkEndpoint(&m.ep, provider); msg != "" {
			return ctlMsg{}, fmt.Errorf("endpoint message for path %d: %s", m.path, msg)
		}
	}
	return m, nil
}

// control is the state of the control channel, guarded by Conn.mu.
type control struct {
	qp   verbs.QP
	qpn  uint32
	free []int // send slots not in use
	// pending holds messages waiting for a send slot.
	pending []ctlMsg
	// byeSlot is the send slot of the goodbye, or -1.
	byeSlot int
	down    bool
	err     error
	recvs   []verbs.RecvWR
	rsge    []verbs.SGE
	wr      verbs.SendWR
	sge     [1]verbs.SGE
}

// postCtlRecvLocked posts the receive of control slot i.
func (c *Conn) postCtlRecvLocked(i int) error {
	wr := &c.ctl.recvs[i]
	wr.Next = nil
	_, err := c.ctl.qp.PostRecv(wr)
	return err
}

// sendCtlLocked sends m to the peer, or queues it until a send slot is
// free.
func (c *Conn) sendCtlLocked(m ctlMsg) error {
	k := &c.ctl
	if k.down {
		return k.err
	}
	if len(k.free) == 0 {
		k.pending = append(k.pending, m)
		return nil
	}
	slot := k.free[len(k.free)-1]
	off := c.lay.ctlSendOff(slot)
	n, err := m.encode(c.stage[off : off+ctlMsgSize])
	if err != nil {
		return err
	}
	k.free = k.free[:len(k.free)-1]
	k.sge[0] = verbs.SGE{Addr: c.stageAddr + uint64(off), Length: uint32(n), LKey: c.stageMR.LKey()}
	k.wr = verbs.SendWR{ID: uint64(slot), Opcode: verbs.OpSend, Flags: verbs.Signaled, SGL: k.sge[:]}
	if m.kind == msgBye {
		k.byeSlot = slot
	}
	if _, err := k.qp.PostSend(&k.wr); err != nil {
		c.ctlDownLocked(fmt.Errorf("post %v message: %w", m.kind, err))
		return k.err
	}
	return nil
}

// sendCtl is sendCtlLocked for goroutines that do not hold the lock.
func (c *Conn) sendCtl(m ctlMsg) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sendCtlLocked(m)
}

// ctlCompletionLocked handles a completion of the control QP.
func (c *Conn) ctlCompletionLocked(now int64, wc *verbs.WC) {
	k := &c.ctl
	if k.down {
		return
	}
	slot := int(wc.ID)
	if wc.Status != verbs.StatusSuccess || slot < 0 || slot >= c.lay.ctlSlots {
		c.ctlDownLocked(&verbs.WCError{WC: *wc})
		return
	}
	if wc.Opcode != verbs.OpRecv {
		// A send completed: its slot is free.
		if slot == k.byeSlot {
			k.byeSlot = -1
			c.signalBye()
		}
		k.free = append(k.free, slot)
		if len(k.pending) > 0 {
			m := k.pending[0]
			k.pending = k.pending[1:]
			_ = c.sendCtlLocked(m)
		}
		return
	}
	off := c.lay.ctlRecvOff(slot)
	m, err := decodeCtl(c.stage[off:off+min(int(wc.ByteLen), ctlMsgSize)], c.cfg.Paths, c.provider)
	if err := c.postCtlRecvLocked(slot); err != nil {
		c.ctlDownLocked(fmt.Errorf("post control receive: %w", err))
		return
	}
	if err != nil {
		c.log.Warn("cell driver: malformed control message", "peer", c.cfg.Peer, "err", err)
		return
	}
	c.dispatchLocked(now, m)
}

// ctlDownLocked records that the control channel failed: resets under way
// cannot finish, and later ones fail at once.
func (c *Conn) ctlDownLocked(cause error) {
	k := &c.ctl
	if k.down {
		return
	}
	k.down = true
	k.err = fmt.Errorf("%w: peer %s (qp %d): %w", ErrControl, c.cfg.Peer, k.qpn, cause)
	k.pending = nil
	if c.err == nil {
		c.log.Warn("cell driver: control channel failed; paths can no longer be reset", "peer", c.cfg.Peer, "err", cause)
	}
	for _, p := range c.paths {
		if p.resetting {
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
