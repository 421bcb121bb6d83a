package driver

import (
	"errors"
	"fmt"
	"time"

	"github.com/rdmacell/rdmacell/verbs"
)

// Abort ends the connection at once: every QP is closed, so nothing lands
// any more, and every range in flight fails with an error wrapping
// ErrAborted and err. Close must still be called to release resources.
func (c *Conn) Abort(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return
	}
	if !c.ctl.down {
		_ = c.sendCtlLocked(ctlMsg{kind: msgBye}) // best effort: the QPs close now
	}
	c.failLocked(fmt.Errorf("driver: peer %s: %w: %w", c.cfg.Peer, ErrAborted, err))
	c.failAllLocked(c.err)
}

// Close tells the peer goodbye, fails every range still in flight with an
// error wrapping ErrClosed, and releases the QPs, the CQ and the rings.
// It waits for the connection's goroutines, each of which is bounded. It
// is idempotent; later calls wait for the first.
func (c *Conn) Close() error {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		<-c.closed
		return nil
	}
	c.closing = true
	bye := false
	if c.err == nil && !c.ctl.down {
		bye = c.sendCtlLocked(ctlMsg{kind: msgBye}) == nil
		c.kickLocked()
	}
	c.mu.Unlock()
	if bye {
		// Let the goodbye leave, so that the peer fails fast instead of
		// learning from its QPs; its completion proves it was placed.
		t := time.NewTimer(byeTimeout)
		select {
		case <-c.byeDone:
		case <-t.C:
		}
		t.Stop()
	}
	c.mu.Lock()
	c.failLocked(fmt.Errorf("driver: peer %s: %w", c.cfg.Peer, ErrClosed))
	c.failAllLocked(c.err)
	c.mu.Unlock()
	<-c.exited
	c.workers.Wait()
	err := c.release()
	close(c.closed)
	return err
}

// failLocked ends the connection with err: the QPs are closed, so that
// nothing can land any more in the memory of the ranges in flight, which
// the caller fails after.
func (c *Conn) failLocked(err error) {
	if c.err != nil {
		return
	}
	c.err = err
	c.endLife()
	for _, p := range c.paths {
		p.closed = true
		p.qmu.Lock()
		_ = p.qp.Close()
		p.qmu.Unlock()
	}
	for _, l := range c.ctl.lanes {
		l.qmu.Lock()
		_ = l.qp.Close()
		l.qmu.Unlock()
	}
	c.signalBye()
	c.kickLocked()
}

// release frees what build created; the QPs are closed already unless
// Dial failed.
func (c *Conn) release() error {
	var errs []error
	keep := func(err error) {
		if err != nil && !errors.Is(err, verbs.ErrClosed) {
			errs = append(errs, err)
		}
	}
	for _, p := range c.paths {
		keep(p.qp.Close())
	}
	for _, l := range c.ctl.lanes {
		keep(l.qp.Close())
	}
	c.mu.Lock()
	c.failAllLocked(c.err)
	c.mu.Unlock()
	if c.cq != nil {
		keep(c.cq.Close())
	}
	if c.ringMR != nil {
		if w, ok := c.ringMR.(verbs.WriteWatcher); ok {
			w.OnRemoteWrite(nil)
		}
		keep(c.ringMR.Close())
	}
	if c.stageMR != nil {
		keep(c.stageMR.Close())
	}
	if c.mem != nil {
		keep(c.mem.Free())
	}
	if len(errs) > 0 {
		return fmt.Errorf("driver: peer %s: close: %w", c.cfg.Peer, errors.Join(errs...))
	}
	return nil
}
