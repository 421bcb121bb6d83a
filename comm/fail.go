package comm

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rdmacell/rdmacell/bootstrap"
)

// diagnoseGrace is added to the lease TTL when waiting for the bootstrap
// to say why a peer's connection failed: its lease expires about one TTL
// after it died.
const diagnoseGrace = 2 * time.Second

// downLocked ends the peer's links: they are aborted, so nothing lands in
// or is read from the memory of their ranges any more, and every range in
// flight is forgotten.
func (p *peer) downLocked(cause error) {
	if p.down || p.self {
		return
	}
	p.markDownLocked()
	if p.ctl != nil {
		p.ctl.abort(cause)
	}
	if p.bulk != nil {
		p.bulk.abort(cause)
	}
	p.forgetRangesLocked()
	p.salvageLocked()
	p.checkQuietLocked()
}

// markDownLocked notes that the links are down.
func (p *peer) markDownLocked() {
	if !p.down {
		p.down = true
		close(p.downCh)
	}
}

// forgetRangesLocked drops every range in flight on links that can no
// longer touch their memory, returning staging buffers. Handles whose
// memory is thereby free and that were given up finish.
func (p *peer) forgetRangesLocked() {
	for i := range p.rops {
		p.rops[i] = nil
	}
	for i := range p.sslots {
		p.sslots[i].op = nil
	}
	p.sdone = p.sseq
	p.pend.clear()
	for p.brecvF.len() > 0 {
		x := p.brecvF.pop()
		p.w.recvStage.put(x.stage)
		x.h.inflight--
		x.h.settleLocked()
	}
	for p.bsendF.len() > 0 {
		x := p.bsendF.pop()
		p.w.sendStage.put(x.stage)
		if x.h != nil {
			x.h.inflight--
			x.h.settleLocked()
		}
	}
	p.bsendQ.clear()
}

// salvageLocked reads the control slots that landed but whose receives
// never completed, because the link failed before the sender's final got
// through: a goodbye or an abort there says why the link failed. Each
// slot carries its sequence number and a checksum, so a slot that did not
// land whole, or an old one, is never taken for new.
func (p *peer) salvageLocked() {
	if p.slots == nil || p.stop {
		return // no slots yet, or released
	}
	for s := p.rseq; s < p.rseq+ctlSlots; s++ {
		b := p.recvSlot(int(s % ctlSlots))
		n := slotLen(b)
		if n == 0 || p.dispatchSlotLocked(b[:n], s, true) != nil {
			return
		}
	}
}

// linkFailedLocked handles a failed range or post. Once the links are
// down the cause is looked for: a goodbye or abort salvaged from the
// control slots, the failure already known, or else the bootstrap's word
// on the rank, which diagnose waits for.
func (p *peer) linkFailedLocked(cause error) {
	if p.down {
		return
	}
	p.linkErr = cause
	p.w.log.Debug("link failed", "peer", p.rank, "err", cause)
	p.downLocked(cause)
	switch {
	case p.err != nil:
		p.cancelWhereLocked(p.err, nil)
	case p.abortPending != nil:
	case p.w.failure() != nil:
		p.cancelWhereLocked(p.w.failure(), nil)
	default:
		p.suspect = true
		p.w.wg.Add(1)
		go p.w.diagnose(p)
	}
}

// checkQuietLocked notes when Close may release the links: the goodbyes
// have crossed, or the links are down.
func (p *peer) checkQuietLocked() {
	if p.quietDone || !(p.down || p.byeLanded && p.byeSeen) {
		return
	}
	p.quietDone = true
	close(p.quiet)
}

// diagnose waits for the bootstrap to report why p's link failed, for
// about one lease TTL, and then fails the peer with what it learned.
func (w *world) diagnose(p *peer) {
	defer w.wg.Done()
	t := time.NewTimer(w.ttl + diagnoseGrace)
	defer t.Stop()
	select {
	case <-p.gone:
	case <-t.C:
	case <-w.life.Done():
	}
	if ae := w.abortedBy(p); ae != nil {
		w.abortFrom(ae)
		return
	}
	p.mu.Lock()
	cause := p.goneErr
	if cause == nil {
		cause = p.linkErr
	}
	p.mu.Unlock()
	w.failPeer(p, &PeerError{Rank: p.rank, Host: p.host, PID: p.pid, Err: cause}, true)
}

// abortedBy returns p's abort if p aborted the job before it left: an
// abort it sent lies in a control slot (whether or not its receive
// completed), or in the bootstrap, where it was published before the
// rank's departure.
func (w *world) abortedBy(p *peer) *AbortError {
	p.mu.Lock()
	if p.abortPending == nil && !p.self {
		p.salvageLocked()
	}
	ae := p.abortPending
	p.mu.Unlock()
	if ae != nil {
		return ae
	}
	return w.abortPublished(p)
}

// abortPublished returns p's abort if the bootstrap has it already.
func (w *world) abortPublished(p *peer) *AbortError {
	if w.job == nil || p.self {
		return nil
	}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if v, err := w.job.Get(done, p.rank, abortKey); err == nil {
		return &AbortError{Rank: p.rank, Host: p.host, PID: p.pid, Cause: string(v)}
	}
	return nil
}

// failPeer fails every operation involving p with err. Unless p left
// cleanly, it also fails every operation on the ordered channel of the
// communicators p belongs to: a rank that died mid-collective leaves the
// others waiting on each other, and only that tells them. A rank that
// closed its communicator or exited finished every collective it was in;
// the others may still be finishing theirs among themselves, and a
// collective that still needs it fails on its own operations with it.
func (w *world) failPeer(p *peer, err error, abortLinks bool) {
	p.mu.Lock()
	if p.err == nil {
		p.err = err
		w.log.Debug("peer failed", "peer", p.rank, "err", err)
	}
	err = p.err
	if abortLinks {
		p.downLocked(err)
	}
	p.suspect = false
	left := errors.Is(err, ErrPeerClosed) || isExited(err)
	var match func(*Handle) bool
	if left && !p.down {
		// A peer leaves only once its sends are done, which means their
		// bytes have landed here; the ranges' ends may still be on the
		// way, and its links stay up until this end says goodbye too. A
		// receive that has asked for all of its message completes with
		// them, or fails when the links go down. So does a send with
		// bytes in flight: the peer hands a range back as soon as its
		// last cell lands, and may take a message and leave before the
		// acknowledgements of its cells are back here.
		match = func(h *Handle) bool { return h.send && h.inflight == 0 || !h.send && !h.asked }
	}
	p.cancelWhereLocked(err, match)
	p.mu.Unlock()
	p.wake()
	for _, c := range w.commsWith(p.rank) {
		c.peerGone(err, left)
		if !left {
			c.poisonOrdered(err)
		}
	}
}

// departed records the bootstrap's report that a rank left the job.
func (w *world) departed(err error) {
	rank := departureRank(err)
	if rank < 0 || rank >= w.size {
		return
	}
	if rank == w.rank {
		w.log.Warn("comm: the bootstrap reports this rank's own lease ended; failure detection is degraded", "err", err)
		return
	}
	p := w.peers[rank]
	p.mu.Lock()
	if p.goneErr == nil {
		p.goneErr = err
		close(p.gone)
	}
	suspect, failed := p.suspect, p.err != nil
	p.mu.Unlock()
	if suspect || failed {
		return // diagnose takes it from here, or it is known already
	}
	if ae := w.abortedBy(p); ae != nil {
		w.abortFrom(ae)
		return
	}
	exited := isExited(err)
	if exited {
		// A rank may close because another aborted the job: an aborter
		// publishes before it tells anyone, so its word is in the
		// bootstrap ahead of any exit it caused.
		for _, q := range w.peers {
			if ae := w.abortPublished(q); ae != nil {
				w.abortFrom(ae)
				return
			}
		}
	}
	if exited {
		// It closed its communicator: said by the bootstrap when no
		// goodbye came first, as for a peer this rank never connected to.
		err = fmt.Errorf("%w: %w", ErrPeerClosed, err)
	}
	w.failPeer(p, &PeerError{Rank: p.rank, Host: p.host, PID: p.pid, Err: err}, !exited)
}

// failAll fails every operation of the job with err and takes every link
// down.
func (w *world) failAll(err error) {
	w.quiet.Store(true) // the links are torn down on purpose
	for _, p := range w.peers {
		p.mu.Lock()
		p.downLocked(err)
		p.cancelWhereLocked(err, nil)
		p.mu.Unlock()
		p.wake()
	}
	w.wild.cancelWhere(0, err, nil)
}

// departureRank is the rank a departure reports, -1 if none.
func departureRank(err error) int {
	var dead *bootstrap.RankDeadError
	var exited *bootstrap.RankExitedError
	switch {
	case errors.As(err, &dead):
		return dead.Rank
	case errors.As(err, &exited):
		return exited.Rank
	}
	return -1
}

func isExited(err error) bool {
	var exited *bootstrap.RankExitedError
	return errors.As(err, &exited)
}
