package comm

import (
	"sync"
	"sync/atomic"
)

// peer is this rank's end of everything it exchanges with one other rank
// (or with itself): the two links, the control slots, the matching state of
// every channel, and the goroutine that makes progress. Its state is
// guarded by mu; handles of operations involving the peer are too.
type peer struct {
	w    *world
	rank int // in the job
	host string
	pid  int
	self bool
	dev  device // the device of its links

	ctl, bulk link
	slots     *region // control slots: ctlSlots to receive into, then ctlSlots to send from
	slotLKey  uint32
	slotRKey  uint32

	kick   chan struct{} // wakes the pump
	exited chan struct{} // closed when the pump returns
	quiet  chan struct{} // closed when Close may release the links
	gone   chan struct{} // closed when the bootstrap reported the rank gone
	downCh chan struct{} // closed when the links went down
	parked atomic.Bool   // the pump waits with nothing to do
	// wakes counts the pump's returns from its wait. Nothing but a
	// completed range, a post or a failure wakes it, so an idle
	// communicator's count stands still (see TestIdleParks).
	wakes atomic.Uint64
	// counts are the messages completed with the peer, for Stats.
	counts peerCounts

	mu sync.Mutex
	// err fails every operation that involves the peer.
	err error
	// down: the links were aborted (or failed); nothing moves any more.
	down bool
	// suspect: a link failed and the cause is being looked for.
	suspect bool
	linkErr error
	goneErr error // the bootstrap's report, once gone is closed
	stop    bool  // the pump must return
	dialing bool  // its control connection is being set up
	// wantBulk: a message needs the bulk connection, which is being set
	// up while bulkDialing (see startBulkLocked). bulkSetup is the peer's
	// half of its setup, come over the control stream; bulkSetupIn is
	// closed when it has, bulkUpIn when the peer has said its end of the
	// connection is connected (bulkExchange.Confirm).
	wantBulk, bulkDialing bool
	bulkSetup             []byte
	bulkSetupIn, bulkUpIn chan struct{}

	// Control stream, receiving: rops[s%ctlSlots] is the receive of slot
	// sequence s; rseq is the next slot to process.
	rops [ctlSlots]op
	rseq uint64
	// Control stream, sending: slots sdone..sseq-1 are in flight.
	sslots [ctlSlots]sendSlot
	sseq   uint64
	sdone  uint64
	pend   ring[ctlItem]
	sw     slotWriter
	// Eager credits: how many eager messages may still be sent, and how
	// many matched messages of the peer's are to be credited back.
	credits int
	owed    int

	nextID uint64
	tx     map[uint64]*Handle // rendezvous sends waiting for their CTSs

	// Bulk stream: sends answered and waiting to be posted, posted sends,
	// posted receives, and receives with chunks still to ask for.
	bsendQ ring[bulkXfer]
	bsendF ring[bulkXfer]
	brecvF ring[bulkXfer]
	rxWait []*Handle

	chans map[chanKey]*channel
	live  *Handle // handles of operations in progress, linked by nextLive

	// Free lists of unexpected-message records and eager copies.
	freeMsgs *inMsg
	freeBufs [][]byte

	helloSeen          bool
	byeQueued          bool
	byeSeq             uint64 // the slot the goodbye went in
	byeLanded, byeSeen bool
	quietDone          bool
	abortQueued        bool
	abortSeq           uint64
	abortLanded        bool

	// Actions the pump takes after releasing mu, because they lock other
	// peers: a peer failure to spread, an abort to spread.
	failPending  error
	abortPending *AbortError
}

// sendSlot is a control slot in flight.
type sendSlot struct {
	op op
}

// ctlItem is a control message waiting for a slot.
type ctlItem struct {
	h       header
	payload []byte
	handle  *Handle // an eager send, complete once copied into its slot
}

// bulkXfer is one range of the bulk stream.
type bulkXfer struct {
	op     op
	h      *Handle // nil for the answer to a CTS of a message given up
	off, n int
	stage  int // staging buffer index, -1 when the range is the handle's own memory
}

// Limits of the bulk stream per peer, within the engine's 64 ranges per
// direction: ranges posted, and chunks in flight for one staged message.
const (
	maxBulkRanges = 32
	maxChunkDepth = 4
)

func newPeer(w *world, rank int) *peer {
	return &peer{
		w:           w,
		rank:        rank,
		kick:        make(chan struct{}, 1),
		exited:      make(chan struct{}),
		quiet:       make(chan struct{}),
		gone:        make(chan struct{}),
		downCh:      make(chan struct{}),
		bulkSetupIn: make(chan struct{}),
		bulkUpIn:    make(chan struct{}),
		credits:     eagerCredits,
		tx:          make(map[uint64]*Handle),
		chans:       make(map[chanKey]*channel),
	}
}

// wake makes the pump look again.
func (p *peer) wake() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

func (p *peer) linkLive(h *Handle) {
	h.live = true
	h.prevLive, h.nextLive = nil, p.live
	if p.live != nil {
		p.live.prevLive = h
	}
	p.live = h
}

func (p *peer) unlinkLive(h *Handle) {
	if h.prevLive != nil {
		h.prevLive.nextLive = h.nextLive
	} else {
		p.live = h.nextLive
	}
	if h.nextLive != nil {
		h.nextLive.prevLive = h.prevLive
	}
	h.prevLive, h.nextLive, h.live = nil, nil, false
}

// cancelWhereLocked gives up every live handle for which match holds.
func (p *peer) cancelWhereLocked(err error, match func(*Handle) bool) {
	for h := p.live; h != nil; {
		next := h.nextLive
		if match == nil || match(h) {
			h.cancelLocked(err)
		}
		h = next
	}
}

// run is the peer's pump: it acts on completed ranges in stream order,
// posts what can be posted, and does what needs no lock of the peer held
// (spreading a failure or an abort), then waits for its kick channel: an
// idle peer blocks there and costs no CPU. Ranges that complete are acted
// on by their link's progress goroutine (linkEvent), so a message moves
// without waking the pump; a post, a failure or Close kicks it.
func (p *peer) run() {
	defer close(p.exited)
	for {
		// The pass below sees everything done before a kick that is
		// already waiting, so that kick is spent: taking it now keeps it
		// from waking the pump once more for nothing.
		select {
		case <-p.kick:
		default:
		}
		p.mu.Lock()
		p.reapLocked()
		p.progressLocked()
		if p.stop {
			p.mu.Unlock()
			return
		}
		fail, abort := p.failPending, p.abortPending
		p.failPending, p.abortPending = nil, nil
		p.mu.Unlock()

		if abort != nil {
			p.w.abortFrom(abort)
			continue
		}
		if fail != nil {
			p.w.failPeer(p, fail, false)
			continue
		}
		p.parked.Store(true)
		<-p.kick
		p.parked.Store(false)
		p.wakes.Add(1)
	}
}

// linkEvent is the links' OnComplete: ranges completed, and their
// driver's progress goroutine acts on them here at once, as the pump
// would, sparing the message a hand-off to the pump. What must happen
// outside the peer's lock (spreading a failure or an abort) and stopping
// are left to the pump.
func (p *peer) linkEvent() {
	p.mu.Lock()
	p.reapLocked()
	p.progressLocked()
	handoff := p.stop || p.failPending != nil || p.abortPending != nil
	p.mu.Unlock()
	if handoff {
		p.wake()
	}
}

// reapLocked acts on every range at the head of its queue that has
// completed.
func (p *peer) reapLocked() {
	for !p.down {
		switch {
		case p.rops[p.rseq%ctlSlots] != nil && isDone(p.rops[p.rseq%ctlSlots]):
			p.ctlReceivedLocked()
		case p.sdone != p.sseq && isDone(p.sslots[p.sdone%ctlSlots].op):
			p.ctlSentLocked()
		case p.brecvF.len() > 0 && isDone(p.brecvF.front().op):
			p.bulkReceivedLocked()
		case p.bsendF.len() > 0 && isDone(p.bsendF.front().op):
			p.bulkSentLocked()
		default:
			return
		}
	}
}

// progressLocked posts what can be posted: chunks to ask for, control
// messages, bulk sends.
func (p *peer) progressLocked() {
	if p.down || p.self || p.ctl == nil {
		return // nothing moves before the links are up
	}
	p.askLocked()
	p.flushLocked()
	p.postBulkSendsLocked()
	p.checkQuietLocked()
}
