package comm

import (
	"context"
	"sync"
	"time"
)

// abort fails the job with this rank as the aborter: it tells every rank
// through the bootstrap, then over the control streams those connected
// hear it on first, waits a bounded time for the word to land, then takes
// every link down and fails every operation. The bootstrap goes first so
// that a rank that closes on hearing of the abort cannot be seen leaving
// by a rank that has not heard yet (departed checks the bootstrap).
func (w *world) abort(cause error) {
	text := "aborted"
	if cause != nil {
		text = cause.Error()
	}
	if len(text) > maxCauseLen {
		text = text[:maxCauseLen]
	}
	ae := &AbortError{Rank: w.rank, Host: w.host, PID: w.pid, Cause: text, Err: cause}
	if !w.setFailure(ae) {
		return
	}
	w.log.Error("comm: aborting the job", "cause", text)
	ctx, cancel := context.WithTimeout(context.Background(), abortNotifyTimeout)
	defer cancel()
	var wg sync.WaitGroup
	if w.job != nil {
		for _, p := range w.peers {
			if !p.self {
				wg.Go(func() { _ = w.job.Put(ctx, p.rank, abortKey, []byte(text)) })
			}
		}
	}
	wg.Wait()
	for _, p := range w.peers {
		if !p.self {
			p.mu.Lock()
			p.queueAbortLocked([]byte(text))
			p.mu.Unlock()
			p.wake()
		}
	}
	for _, p := range w.peers {
		for !p.self && ctx.Err() == nil {
			p.mu.Lock()
			done := p.down || p.abortLanded || !p.abortQueued
			p.mu.Unlock()
			if done {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	w.failAll(ae)
}

// abortFrom handles another rank's abort.
func (w *world) abortFrom(ae *AbortError) {
	if !w.setFailure(ae) {
		return
	}
	w.log.Error("comm: the job was aborted", "by_rank", ae.Rank, "host", ae.Host, "pid", ae.PID, "cause", ae.Cause)
	w.failAll(ae)
}

// watchAborts waits for another rank's abort published through the
// bootstrap.
func (w *world) watchAborts(p *peer) {
	defer w.wg.Done()
	v, err := w.job.Get(w.life, p.rank, abortKey)
	if err != nil {
		return // the rank left, or this one is closing
	}
	w.abortFrom(&AbortError{Rank: p.rank, Host: p.host, PID: p.pid, Cause: string(v)})
}
