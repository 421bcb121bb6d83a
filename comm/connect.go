package comm

import (
	"context"
	"errors"
	"fmt"
	"sync"

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

// dialKeys are the bootstrap keys of a peer's two connections; the first
// is the one answerDials watches for.
var dialKeys = [2]string{"comm/ctl", "comm/bulk"}

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
	for r := range w.job.Published(dialKeys[0]) {
		p := w.peers[r]
		p.mu.Lock()
		p.connectLocked()
		p.mu.Unlock()
	}
}

// dial sets up p's two connections and starts their streams.
func (w *world) dial(p *peer) {
	defer w.dials.Done()
	ctx, cancel := context.WithTimeout(w.dialCtx, w.opts.RendezvousTimeout)
	defer cancel()
	ctl, bulk, err := w.dialLinks(ctx, p)
	p.mu.Lock()
	p.dialing = false
	if err == nil && (p.stop || p.down) {
		err = ErrClosed
	}
	if err != nil {
		p.mu.Unlock()
		for _, l := range []link{ctl, bulk} {
			if l != nil {
				_ = l.close()
			}
		}
		w.dialFailed(p, err)
		return
	}
	p.ctl, p.bulk = ctl, bulk
	for s := uint64(0); s < ctlSlots && err == nil; s++ {
		err = p.postCtlRecvLocked(s)
	}
	if err != nil {
		p.linkFailedLocked(fmt.Errorf("post control receives: %w", err))
	} else {
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

// dialLinks dials the control and the bulk connection to p at once.
func (w *world) dialLinks(ctx context.Context, p *peer) (ctl, bulk link, err error) {
	if p.slots == nil {
		if p.slots, err = w.mem.alloc(2*ctlSlots*slotSize, false); err != nil {
			return nil, nil, fmt.Errorf("control slots for rank %d: %w", p.rank, err)
		}
		p.slotLKey, p.slotRKey = p.slots.mrs[p.dev].LKey(), p.slots.mrs[p.dev].RKey()
	}
	var links [2]link
	var errs [2]error
	var wg sync.WaitGroup
	for i, key := range dialKeys {
		wg.Go(func() {
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
			}, storeExchange{job: w.job, peer: p.rank, key: key})
			if err == nil {
				links[i] = driverLink{c}
			}
			errs[i] = err
		})
	}
	wg.Wait()
	if err := errors.Join(errs[:]...); err != nil {
		return links[0], links[1], err
	}
	return links[0], links[1], nil
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

// connected reports whether p's links are up.
func (p *peer) connected() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ctl != nil
}
