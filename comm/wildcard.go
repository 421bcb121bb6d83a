package comm

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
)

// AnySource is the peer that, given to Recv, Irecv, Sendrecv's receive,
// Probe or Iprobe, takes or looks for a message from any rank of the
// communicator, this one included; Status says which rank sent it. It is
// MPI_ANY_SOURCE. It is not -1, so that a peer computed wrong (rank-1 on
// rank 0) stays an error instead of becoming a wildcard.
const AnySource = -2

// AnyTag is the tag that, given to a receive or a probe on the user
// channel, matches a message with any tag; Status says which. It is
// MPI_ANY_TAG. A message cannot be sent with it.
const AnyTag = ^uint64(0)

// Status tells what a receive took or a probe found: the rank of the
// communicator that sent the message, its tag, and its length in bytes
// (for a receive, the bytes received). It is MPI_Status.
type Status struct {
	Source int
	Tag    uint64
	Len    int
}

// Receives from any rank. Such a receive is bound to no peer until a
// message takes it, so it waits in a queue of its communicator, in post
// order, instead of in a peer's. Every receive of the user channel gets a
// sequence number of its communicator when posted; a message arriving
// from peer p goes to the oldest of the first receive posted at p that it
// fits and the first receive from any rank that it fits, so a peer's
// messages keep their order however wildcard and specific receives are
// mixed. The world's wildcards lock, taken under a peer's lock and never
// the other way round, makes the claim atomic: one message takes the
// receive and it leaves the queue at once.
//
// Posting looks first at the messages already waiting, one peer at a
// time, under that peer's lock: a message waiting at a peer looked at
// takes the receive. Until the receive has looked at a peer, that peer's
// arrivals do not claim it (its scan counts the peers looked at), so a
// message cannot overtake an older one of its sender that is still
// waiting to be found.
//
// A receive from any rank cannot know which rank would have sent its
// message, so, as MPI's fault-tolerance proposal has it, one pending when
// a rank of its communicator fails fails with that rank's *PeerError; a
// rank that closes cleanly is no longer waited for, and once no rank but
// this one is left, pending and new receives from any rank fail with a
// *PeerError of the last one to go (wrapping ErrPeerClosed when it
// closed). The probes follow the same rules.

// wildcards holds, per communicator, the receives from any rank no
// message has taken yet, and wakes the probes waiting for a message.
type wildcards struct {
	// active counts the receives queued and the probes waiting, over
	// every communicator: an arrival looks here only when it is not 0.
	active atomic.Int64
	mu     sync.Mutex
	comms  map[uint64]*wildQueue
}

// wildQueue is one communicator's receives from any rank, linked by next.
type wildQueue struct {
	head, tail *Handle
	// arrived is closed when a message is queued unexpected or a rank of
	// the communicator goes, for the probes; nil when none waits.
	arrived chan struct{}
	// deaths counts the ranks of the communicator that failed; lost is
	// the last one's error.
	deaths uint64
	lost   error
}

// queueLocked returns the queue of communicator id, made if need be.
func (wc *wildcards) queueLocked(id uint64) *wildQueue {
	q := wc.comms[id]
	if q == nil {
		if wc.comms == nil {
			wc.comms = make(map[uint64]*wildQueue)
		}
		q = &wildQueue{}
		wc.comms[id] = q
	}
	return q
}

func (wc *wildcards) push(h *Handle) {
	wc.mu.Lock()
	q := wc.queueLocked(h.ctx)
	h.next, h.queued = nil, true
	if q.tail == nil {
		q.head = h
	} else {
		q.tail.next = h
	}
	q.tail = h
	wc.active.Add(1)
	wc.mu.Unlock()
}

// unlinkLocked takes h, which is queued, off its queue.
func (wc *wildcards) unlinkLocked(h *Handle) {
	q := wc.comms[h.ctx]
	var prev *Handle
	for r := q.head; r != h; r = r.next {
		prev = r
	}
	if prev == nil {
		q.head = h.next
	} else {
		prev.next = h.next
	}
	if q.tail == h {
		q.tail = prev
	}
	h.next, h.queued = nil, false
	wc.active.Add(-1)
}

// claimLocked returns the receive from any rank that a message from p
// with tag takes on the user channel of communicator id, if one was
// posted before the receive r of p's own queue (nil if none) and has
// looked at p already. The caller holds p's lock; the receive is p's
// from now on.
func (wc *wildcards) claimLocked(p *peer, id uint64, tag uint64, r *Handle) *Handle {
	wc.mu.Lock()
	defer wc.mu.Unlock()
	q := wc.comms[id]
	if q == nil || q.head == nil {
		return nil
	}
	cr, ok := q.head.c.member[p.rank]
	if !ok {
		return nil
	}
	for a := q.head; a != nil; a = a.next {
		if r != nil && a.seq > r.seq {
			continue // posted after r (in the queue's order unless posted concurrently)
		}
		if a.scan > cr && tagMatches(a.tag, tag) {
			wc.unlinkLocked(a)
			a.p, a.peerCR = p, cr
			p.linkLive(a)
			return a
		}
	}
	return nil
}

// arrived wakes the probes of communicator id.
func (wc *wildcards) arrived(id uint64) {
	wc.mu.Lock()
	if q := wc.comms[id]; q != nil && q.arrived != nil {
		close(q.arrived)
		q.arrived = nil
	}
	wc.mu.Unlock()
}

// finishAlone completes a receive no message took, which nothing else
// names any more.
func (h *Handle) finishAlone(err error) {
	h.n, h.err = 0, err
	h.state.Store(1)
	h.signal()
}

// cancel gives up h, a receive from any rank, with err if no message has
// taken it yet, and reports whether it did; otherwise h belongs to its
// peer, h.p.
func (wc *wildcards) cancel(h *Handle, err error) bool {
	wc.mu.Lock()
	defer wc.mu.Unlock()
	if !h.queued {
		return false
	}
	wc.unlinkLocked(h)
	h.finishAlone(err)
	return true
}

// cancelWhere gives up, with err, the queued receives of communicator id
// for which match holds (every one if match is nil), and wakes its
// probes. id 0 means every communicator.
func (wc *wildcards) cancelWhere(id uint64, err error, match func(*Handle) bool) {
	wc.mu.Lock()
	defer wc.mu.Unlock()
	for qid, q := range wc.comms {
		if id != 0 && qid != id {
			continue
		}
		for h := q.head; h != nil; {
			next := h.next
			if match == nil || match(h) {
				wc.unlinkLocked(h)
				h.finishAlone(err)
			}
			h = next
		}
		if q.arrived != nil {
			close(q.arrived)
			q.arrived = nil
		}
	}
}

// lost records that a rank of communicator id failed, for the probes
// waiting on it, and gives up its queued receives with err.
func (wc *wildcards) lost(id uint64, err error) {
	wc.mu.Lock()
	q := wc.queueLocked(id)
	q.deaths++
	q.lost = err
	wc.mu.Unlock()
	wc.cancelWhere(id, err, nil)
}

// drop forgets communicator id, which is closed.
func (wc *wildcards) drop(id uint64, err error) {
	wc.cancelWhere(id, err, nil)
	wc.mu.Lock()
	delete(wc.comms, id)
	wc.mu.Unlock()
}

// postAny posts a receive from any rank of c: it takes a message already
// waiting at one of them, or waits in c's queue for the next that fits.
func (c *Comm) postAny(tag uint64, buf []byte, pooled bool) (*Handle, error) {
	if err := c.channelErr(chanUser); err != nil {
		return nil, err
	}
	var h *Handle
	if pooled {
		h = handles.Get().(*Handle)
	} else {
		h = newHandle()
	}
	h.c, h.peerCR, h.any, h.chKind, h.ctx, h.tag, h.gotTag, h.buf = c, AnySource, true, chanUser, c.id, tag, tag, buf
	h.reg, h.regOff = c.w.mem.lookup(buf, anyDevice)
	h.epoch = c.w.epoch.Load()
	h.seq = c.recvSeq.Add(1)
	wc := &c.w.wild
	wc.push(h)
	k := chanKey{c.id, chanUser}
	alive := 0
	var gone error
	for cr, jr := range c.ranks {
		p := c.w.peers[jr]
		p.mu.Lock()
		wc.mu.Lock()
		if !h.queued {
			// Claimed by an arrival at a peer looked at already, or
			// given up.
			wc.mu.Unlock()
			p.mu.Unlock()
			return h, nil
		}
		var m *inMsg
		if ch := p.chans[k]; ch != nil {
			m = p.takeUnexp(ch, tag, false)
			if m != nil && m.kind == kindRTS && p.err != nil {
				// The peer left: the bytes it announced can no longer
				// be asked for.
				p.freeMsgLocked(m)
				m = nil
			}
		}
		if m != nil {
			wc.unlinkLocked(h)
			h.p, h.peerCR = p, cr
			wc.mu.Unlock()
			p.linkLive(h)
			p.deliverLocked(h, m, nil)
			p.freeMsgLocked(m)
			p.progressLocked()
			p.mu.Unlock()
			return h, nil
		}
		h.scan = cr + 1
		wc.mu.Unlock()
		alive, gone = countSender(p, alive, gone)
		p.mu.Unlock()
	}
	if alive == 0 && gone != nil {
		wc.cancel(h, c.noSenderErr(gone))
	}
	return h, nil
}

// noSenderErr is what a receive or probe from any rank of c fails with
// when no rank but this one is left; last is the last one's error.
func (c *Comm) noSenderErr(last error) error {
	return fmt.Errorf("comm: rank %d: receive from any rank of communicator %#x: no other rank is left: %w", c.rank, c.id, last)
}

// othersGone returns the error of one of c's other ranks if none of them
// is left, nil while one is or c has no other rank.
func (c *Comm) othersGone() error {
	var gone error
	for _, jr := range c.ranks {
		p := c.w.peers[jr]
		if p.self {
			continue
		}
		p.mu.Lock()
		err := p.err
		p.mu.Unlock()
		if err == nil {
			return nil
		}
		gone = err
	}
	return gone
}

// peerGone updates c's receives and probes from any rank after rank p
// failed with err: if it died they fail; if it left they do once no other
// rank is left.
func (c *Comm) peerGone(err error, left bool) {
	wc := &c.w.wild
	switch {
	case !left:
		wc.lost(c.id, err)
	default:
		if gone := c.othersGone(); gone != nil {
			wc.cancelWhere(c.id, c.noSenderErr(gone), nil)
		}
	}
	wc.arrived(c.id) // a probe of that rank learns it is gone
}

// Iprobe reports, without blocking, whether a message from rank source
// (or AnySource) with tag (or AnyTag) is waiting to be received on the
// user channel, and if so its Status. It receives nothing: a Recv or
// Irecv for the Status's Source and Tag posted next takes that message,
// unless another receive of this rank takes it first; as in MPI, a
// program that probes and receives from several goroutines must
// serialise them. It fails when no message can come any more: the
// communicator is closed, source has gone (or, for AnySource, every other
// rank has).
func (c *Comm) Iprobe(source int, tag uint64) (Status, bool, error) {
	if source != AnySource && (source < 0 || source >= len(c.ranks)) {
		return Status{}, false, fmt.Errorf("%w: comm rank %d: probe of peer %d: want 0 <= peer < size %d or AnySource", ErrInvalidArgument, c.rank, source, len(c.ranks))
	}
	if err := c.channelErr(chanUser); err != nil {
		return Status{}, false, err
	}
	k := chanKey{c.id, chanUser}
	alive := 0
	var gone error
	for cr, jr := range c.ranks {
		if source != AnySource && cr != source {
			continue
		}
		p := c.w.peers[jr]
		p.mu.Lock()
		if ch := p.chans[k]; ch != nil {
			for m := ch.unexpHead; m != nil; m = m.next {
				stale := m.kind == kindLocal && (m.local.done() || m.local.abandoned) ||
					m.kind == kindRTS && p.err != nil
				if !stale && tagMatches(tag, m.tag) {
					st := Status{Source: cr, Tag: m.tag, Len: m.n}
					p.mu.Unlock()
					return st, true, nil
				}
			}
		}
		alive, gone = countSender(p, alive, gone)
		p.mu.Unlock()
	}
	switch {
	case alive > 0 || gone == nil:
		return Status{}, false, nil
	case source == AnySource:
		return Status{}, false, c.noSenderErr(gone)
	}
	return Status{}, false, gone
}

// Probe waits until a message from rank source (or AnySource) with tag
// (or AnyTag) is waiting to be received on the user channel and returns
// its Status, without receiving it; see Iprobe for what receives it. It
// fails when ctx ends, when no message can come any more (see Iprobe),
// and, for AnySource, when a rank of the communicator fails while it
// waits, as a receive from any rank does.
func (c *Comm) Probe(ctx context.Context, source int, tag uint64) (Status, error) {
	if _, _, err := c.Iprobe(source, tag); err != nil {
		return Status{}, err
	}
	wc := &c.w.wild
	wc.active.Add(1)
	defer wc.active.Add(-1)
	wc.mu.Lock()
	deaths := wc.queueLocked(c.id).deaths
	wc.mu.Unlock()
	for {
		// Take the channel before looking, so that a message arriving
		// after the look closes it.
		wc.mu.Lock()
		q := wc.queueLocked(c.id)
		if q.arrived == nil {
			q.arrived = make(chan struct{})
		}
		arrived, lost := q.arrived, q.lost
		died := q.deaths != deaths
		wc.mu.Unlock()
		st, ok, err := c.Iprobe(source, tag)
		switch {
		case ok || err != nil:
			return st, err
		case died && source == AnySource:
			return Status{}, lost
		}
		select {
		case <-arrived:
		case <-ctx.Done():
			return Status{}, fmt.Errorf("comm: rank %d: probe of %s: %w", c.rank, describeMatch(source, tag), ctx.Err())
		}
	}
}

// describeMatch names a source and tag in errors.
func describeMatch(source int, tag uint64) string {
	from, with := "any rank", "any tag"
	if source != AnySource {
		from = fmt.Sprintf("rank %d", source)
	}
	if tag != AnyTag {
		with = fmt.Sprintf("tag %#x", tag)
	}
	return from + " with " + with
}

// countSender adds peer p, whose lock the caller holds, to a wildcard's
// tally of the ranks that could still send it a message: alive counts the
// others still there, gone is the failure of the last one to go.
func countSender(p *peer, alive int, gone error) (int, error) {
	switch {
	case p.self:
	case p.err == nil:
		alive++
	default:
		gone = p.err
	}
	return alive, gone
}
