package comm

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rdmacell/rdmacell/verbs"
)

// close is Close of the world communicator: goodbyes, then release.
func (w *world) close() error {
	w.closeOnce.Do(func() {
		closed := fmt.Errorf("comm: rank %d: %w", w.rank, ErrClosed)
		w.quiet.Store(true)
		if w.setFailure(closed) {
			w.goodbye(closed)
		}
		w.writeTrace("close")
		w.closeErr = w.release(closed)
	})
	return w.closeErr
}

// goodbye fails the operations in progress, says goodbye to every peer
// and waits, at most CloseTimeout, for theirs: a rank that is still
// working can then send nothing more to this one, and nothing this rank
// sent before is cut off by its leaving.
func (w *world) goodbye(closed error) {
	for _, p := range w.peers {
		p.mu.Lock()
		p.cancelWhereLocked(closed, nil)
		if !p.self {
			p.queueByeLocked()
		}
		p.mu.Unlock()
		p.wake()
	}
	w.wild.cancelWhere(0, closed, nil)
	w.log.Debug("closing: goodbyes sent")
	t := time.NewTimer(w.opts.CloseTimeout)
	defer t.Stop()
	for _, p := range w.peers {
		if p.self || !p.connected() {
			continue // a peer never connected has nothing of ours in flight
		}
		select {
		case <-p.quiet:
		case <-t.C:
			w.log.Warn("comm: closing without the goodbye of every rank", "waited", w.opts.CloseTimeout)
			return
		}
	}
}

// release stops everything and frees every link, region, device and the
// job membership. It is also how a failed Init cleans up.
func (w *world) release(cause error) error {
	w.quiet.Store(true)
	w.stopMetrics()
	var errs []error
	for _, p := range w.peers {
		p.mu.Lock()
		p.stop = true
		p.markDownLocked()
		p.mu.Unlock()
		p.wake()
	}
	for _, p := range w.peers {
		<-p.exited
	}
	w.endDial()
	w.dials.Wait()
	var wg sync.WaitGroup
	var emu sync.Mutex
	keep := func(err error) {
		if err != nil {
			emu.Lock()
			errs = append(errs, err)
			emu.Unlock()
		}
	}
	for _, p := range w.peers {
		for _, l := range []link{p.ctl, p.bulk} {
			if l != nil {
				wg.Go(func() { keep(l.close()) })
			}
		}
	}
	wg.Wait()
	for _, p := range w.peers {
		p.mu.Lock()
		p.forgetRangesLocked() // the links are closed: nothing touches their memory
		p.checkQuietLocked()
		p.cancelWhereLocked(cause, nil)
		p.mu.Unlock()
	}
	w.wild.cancelWhere(0, cause, nil)
	keep(w.mem.close())
	for _, pd := range w.mem.pds {
		if pd != nil {
			keep(pd.Close())
		}
	}
	for _, d := range w.devs {
		if d != nil {
			keep(d.Close())
		}
	}
	if w.job != nil {
		ctx, cancel := context.WithTimeout(context.Background(), w.ttl+diagnoseGrace)
		if err := w.job.Close(ctx); err != nil {
			w.log.Warn("comm: leaving the job", "err", err)
		}
		cancel()
	}
	w.endLife()
	w.wg.Wait()
	var real []error
	for _, err := range errs {
		if !errors.Is(err, verbs.ErrClosed) {
			real = append(real, err)
		}
	}
	if len(real) > 0 {
		return fmt.Errorf("comm: rank %d: close: %w", w.rank, errors.Join(real...))
	}
	return nil
}
