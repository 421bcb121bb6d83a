package comm

import (
	"context"
	"errors"
	"fmt"

	"github.com/rdmacell/rdmacell/bootstrap"
	"github.com/rdmacell/rdmacell/cell/driver"
)

// Connections on demand. Init connects to no one: a peer is connected
// when an operation first involves it (connectLocked, from a post), or
// when the peer connects to this rank, which it says by publishing its
// half of the control connection in the bootstrap (answerDials). A rank
// of a ring then holds two connections, not one per rank of the job, and
// the bootstrap carries setup keys for the pairs that talk, not for every
// pair. Both ends run the same dial, which publishes this rank's half of
// each connection and waits for the peer's, so it does not matter which
// end starts or whether both do.
//
// Until its links are up a peer queues what is posted to it: its first
// control message is the HELLO, queued when the peer was made, so that
// it is the first the other end reads, whatever was posted before the
// connection came up.

// ctlKey is the bootstrap key of a peer's control connection, which
// answerDials watches for. The bulk connection is dialed only once a
// message needs it (startBulkLocked), and its setup crosses over the
// control connection.
const ctlKey = "comm/ctl"

// connectLocked starts connecting to p unless that is done or under way,
// or p has failed.
func (p *peer) connectLocked() {
	if p.self || p.dialing || p.ctl != nil || p.down || p.err != nil || p.stop {
		return
	}
	p.dialing = true
	w := p.w
	w.dials.Add(1)
	go w.dial(p)
}

// answerDials connects to each peer that connects to this rank.
func (w *world) answerDials() {
	defer w.wg.Done()
	for r := range w.job.Published(ctlKey) {
		p := w.peers[r]
		p.mu.Lock()
		p.connectLocked()
		p.mu.Unlock()
	}
}

// dial sets up p's control connection and starts its stream, and the
// bulk connection's dial if a message already needs it.
func (w *world) dial(p *peer) {
	defer w.dials.Done()
	ctx, cancel := context.WithTimeout(w.dialCtx, w.opts.RendezvousTimeout)
	defer cancel()
	var ctl link
	err := w.allocSlots(p)
	if err == nil {
		ctl, err = w.dialLink(ctx, p, ctlKey, storeExchange{job: w.job, peer: p.rank, key: ctlKey})
	}
	p.mu.Lock()
	p.dialing = false
	if err == nil && (p.stop || p.down) {
		err = ErrClosed
	}
	if err != nil {
		p.mu.Unlock()
		if ctl != nil {
			_ = ctl.close()
		}
		w.dialFailed(p, err)
		return
	}
	p.ctl = ctl
	for s := uint64(0); s < ctlSlots && err == nil; s++ {
		err = p.postCtlRecvLocked(s)
	}
	if err != nil {
		p.linkFailedLocked(fmt.Errorf("post control receives: %w", err))
	} else {
		if p.wantBulk {
			p.startBulkLocked()
		}
		p.progressLocked()
	}
	p.mu.Unlock()
	p.wake()
}

// startBulkLocked makes sure p's bulk connection is up or coming: a
// message too large for the control stream (an RTS, sent or received)
// needs it. A job of small messages never dials it, and each of its
// peers costs one connection's QPs instead of two. Both ends start the
// dial on the same RTS, so it needs no announcement. The stream's ranges
// wait until it is up.
func (p *peer) startBulkLocked() {
	p.wantBulk = true
	if p.bulk != nil || p.bulkDialing || p.ctl == nil || p.self || p.down || p.err != nil || p.stop {
		return
	}
	p.bulkDialing = true
	p.w.dials.Add(1)
	go p.w.dialBulk(p)
}

// dialBulk sets up p's bulk connection. A dial that fails is a link
// failure, whose cause the bootstrap is asked for as for a failed link.
func (w *world) dialBulk(p *peer) {
	defer w.dials.Done()
	ctx, cancel := context.WithTimeout(w.dialCtx, w.opts.RendezvousTimeout)
	defer cancel()
	bulk, err := w.dialLink(ctx, p, "comm/bulk", bulkExchange{p})
	p.mu.Lock()
	p.bulkDialing = false
	switch {
	case p.stop || p.down:
		p.mu.Unlock()
		if bulk != nil {
			_ = bulk.close()
		}
		return
	case err != nil:
		p.linkFailedLocked(fmt.Errorf("connect the bulk stream over %s: %w", p.dev, err))
	default:
		p.bulk = bulk
		p.progressLocked()
	}
	p.mu.Unlock()
	p.wake()
}

// dialFailed fails p's operations: a peer that cannot be reached is
// named, with the bootstrap's word on it when it left the job. A dial that
// failed for a reason of its own (a peer that died while its QPs were
// connecting, say) is a link failure: the bootstrap is asked why, as when
// a connected link fails.
func (w *world) dialFailed(p *peer, err error) {
	if w.failure() != nil || errors.Is(err, ErrClosed) {
		return // closing: nothing waits for the peer any more
	}
	var dead *bootstrap.RankDeadError
	var exited *bootstrap.RankExitedError
	switch {
	case errors.As(err, &exited):
		// It closed its communicator without needing this rank.
		err = fmt.Errorf("%w: %w", ErrPeerClosed, exited)
	case !errors.As(err, &dead):
		p.mu.Lock()
		p.linkFailedLocked(fmt.Errorf("connect over %s: %w", p.dev, err))
		p.mu.Unlock()
		p.wake()
		return
	}
	w.failPeer(p, &PeerError{Rank: p.rank, Host: p.host, PID: p.pid, Err: err}, false)
}

// allocSlots registers p's control slots, once: the dial that runs while
// p.dialing is the only one that gets here.
func (w *world) allocSlots(p *peer) error {
	if p.slots != nil {
		return nil
	}
	slots, err := w.mem.alloc(2*ctlSlots*slotSize, false)
	if err != nil {
		return fmt.Errorf("control slots for rank %d: %w", p.rank, err)
	}
	p.slots, p.slotLKey, p.slotRKey = slots, slots.mrs[p.dev].LKey(), slots.mrs[p.dev].RKey()
	return nil
}

// dialLink dials p's connection named key, swapping its setup through x.
func (w *world) dialLink(ctx context.Context, p *peer, key string, x driver.Exchanger) (link, error) {
	c, err := driver.Dial(ctx, driver.Config{
		Peer:       fmt.Sprintf("rank %d %s", p.rank, key[len("comm/"):]),
		Device:     w.devs[p.dev],
		PD:         w.mem.pds[p.dev],
		Paths:      w.opts.Paths,
		Policy:     string(w.opts.Policy),
		CellSize:   w.opts.CellSize,
		Counters:   &w.traffic,
		OnComplete: p.linkEvent,
		Logger:     w.logger("cell"),
	}, x)
	if err != nil {
		return nil, err
	}
	return driverLink{c}, nil
}

// bulkExchange swaps the bulk connection's setup with the peer over the
// control stream: a pair once connected needs the bootstrap no more,
// though its bulk connection is dialed only when a message first needs
// it.
type bulkExchange struct{ p *peer }

func (x bulkExchange) Exchange(ctx context.Context, local []byte) ([]byte, error) {
	p := x.p
	if len(local) > eagerMax {
		return nil, fmt.Errorf("bulk connection setup of %d bytes, more than a control message holds", len(local))
	}
	if err := x.swap(ctx, header{kind: kindSetup}, append([]byte(nil), local...), p.bulkSetupIn); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.bulkSetup, nil
}

// setupConnected is the aux of a kindSetup message that confirms the
// bulk connection instead of carrying its setup.
const setupConnected = 1

// Confirm tells the peer this end's bulk QPs are connected and waits for
// the peer's word that its are.
func (x bulkExchange) Confirm(ctx context.Context) error {
	return x.swap(ctx, header{kind: kindSetup, aux: setupConnected}, nil, x.p.bulkUpIn)
}

// swap queues a setup message for the peer and waits until in, which the
// peer's answer closes, is closed.
func (x bulkExchange) swap(ctx context.Context, h header, payload []byte, in <-chan struct{}) error {
	p := x.p
	p.mu.Lock()
	p.pend.push(ctlItem{h: h, payload: payload})
	p.progressLocked()
	p.mu.Unlock()
	select {
	case <-in:
		return nil
	case <-p.downCh:
		return errors.New("the control connection went down")
	case <-ctx.Done():
		return ctx.Err()
	}
}

// storeExchange swaps a connection's setup information with the peer
// through the bootstrap.
type storeExchange struct {
	job  *bootstrap.Job
	peer int
	key  string
}

func (x storeExchange) Exchange(ctx context.Context, local []byte) ([]byte, error) {
	if err := x.job.Put(ctx, x.peer, x.key, local); err != nil {
		return nil, err
	}
	return x.job.Get(ctx, x.peer, x.key)
}

// Confirm tells the peer, through the bootstrap, that this end's QPs
// are connected, and waits for the peer's word that its are.
func (x storeExchange) Confirm(ctx context.Context) error {
	key := x.key + "/up"
	if err := x.job.Put(ctx, x.peer, key, nil); err != nil {
		return err
	}
	_, err := x.job.Get(ctx, x.peer, key)
	return err
}

// connected reports whether p's links are up.
func (p *peer) connected() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ctl != nil
}
