package bootstrap

import (
	"errors"
	"fmt"
)

// keepAlive renews the lease until Close. The client stops renewing, and
// closes the channel, once etcd has not answered for a whole TTL or says the
// lease is gone: from then on the other ranks will, or already did, see this
// rank as dead, and this rank no longer hears of theirs reliably.
func (j *Job) keepAlive() {
	defer j.wg.Done()
	ch, err := j.store.KeepAlive(j.ctx, j.lease)
	if err != nil {
		j.degrade(fmt.Errorf("keep lease alive: %w", err))
		return
	}
	for range ch {
		// Each answer is a renewal; only the channel's end is news.
		j.activity.renewals.Add(1)
	}
	if j.ctx.Err() == nil {
		j.degrade(errors.New("lease keepalive stopped: store unreachable or lease expired"))
	}
}

// degrade logs, once, that failure detection can no longer be trusted. The
// job itself goes on: nothing on the data path needs etcd.
func (j *Job) degrade(reason error) {
	j.mu.Lock()
	closing := j.state.closing
	j.mu.Unlock()
	if closing {
		return
	}
	j.degradeOnce.Do(func() {
		j.log.Warn("bootstrap: lost contact with the store; rank failure detection is degraded, exchanged connection info stays valid",
			"store", j.store.Describe(), "reason", reason.Error())
	})
}

// Departures reports each rank that leaves the job after Join, once: a
// *RankDeadError when its lease ended without a clean exit (noticed about
// one lease TTL after it died), a *RankExitedError when it called Close.
// This rank's own lease expiring is reported too, as a *RankDeadError. The
// channel is buffered for the whole world, so an unread report never blocks
// the job; it is closed by Close.
func (j *Job) Departures() <-chan error { return j.state.departures }

// Departed returns the departure of rank (a *RankDeadError or a
// *RankExitedError), or nil while the rank is still in the job or has not
// registered yet.
func (j *Job) Departed(rank int) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.state.gone[rank]
}
