package driver

import (
	"errors"

	"github.com/rdmacell/rdmacell/cell"
)

// The engine takes at most MaxRanges ranges per direction, counted from
// the oldest still open: one range held by a reset can fill the window
// while later ones finish. Ranges posted beyond it wait here, in order, so
// that posting never fails for want of window and the k-th send still
// fills the k-th receive; they go to the engine as the window slides.

// queued is a range posted while its direction's window was full.
type queued struct {
	op   *Op
	addr uint64
	key  uint32
	n    int64
}

// postLocked hands a range to the engine, or queues it behind those
// already waiting.
func (c *Conn) postLocked(now int64, r queued) error {
	q := c.queueOf(r.op.kind)
	if len(*q) > 0 {
		*q = append(*q, r)
		return nil
	}
	busy, err := c.submitLocked(now, &r)
	if busy {
		*q = append(*q, r)
	}
	return err
}

func (c *Conn) queueOf(k cell.EventKind) *[]queued {
	if k == cell.Sent {
		return &c.sendQ
	}
	return &c.recvQ
}

// submitLocked passes r to the engine; busy says its window is full.
func (c *Conn) submitLocked(now int64, r *queued) (busy bool, err error) {
	tag, ok := c.ops.put(r.op)
	if !ok {
		return true, nil // cannot happen: each window fits half the table
	}
	if r.op.kind == cell.Sent {
		err = c.eng.Send(now, cell.SendRange{Tag: tag, Addr: r.addr, LKey: r.key, Len: r.n})
	} else {
		err = c.eng.Recv(now, cell.RecvRange{Tag: tag, Addr: r.addr, RKey: r.key, Len: r.n})
	}
	c.fed = true
	if err != nil {
		c.ops.take(tag)
		return errors.Is(err, cell.ErrBusy), ignoreBusy(err)
	}
	return false, nil
}

func ignoreBusy(err error) error {
	if errors.Is(err, cell.ErrBusy) {
		return nil
	}
	return err
}

// admitLocked submits queued ranges, in order, while the engine takes
// them; a range the engine refuses for another reason fails.
func (c *Conn) admitLocked() {
	if len(c.sendQ)+len(c.recvQ) == 0 || c.err != nil {
		return
	}
	now := c.now()
	for _, q := range [2]*[]queued{&c.sendQ, &c.recvQ} {
		for len(*q) > 0 {
			r := &(*q)[0]
			busy, err := c.submitLocked(now, r)
			if busy {
				break
			}
			if err != nil {
				r.op.complete(0, err)
				c.completed = true
			}
			*r = queued{}
			*q = (*q)[1:]
		}
	}
}

// failAllLocked completes every range in flight or queued with err; the
// QPs are closed already.
func (c *Conn) failAllLocked(err error) {
	if c.ops.live()+len(c.sendQ)+len(c.recvQ) > 0 {
		c.completed = true
	}
	c.ops.failAll(err)
	for _, q := range [2]*[]queued{&c.sendQ, &c.recvQ} {
		for i := range *q {
			(*q)[i].op.complete(0, err)
		}
		*q = nil
	}
}
