package bootstrap

import (
	"context"
	"fmt"
	"time"
)

// watchRetryDelay spaces out new watches after the cluster cancelled one,
// e.g. while it has no leader.
const watchRetryDelay = 500 * time.Millisecond

// startFollowing lists the job's keys and starts watching it from just after
// that listing, so that no change is missed between the two.
func (j *Job) startFollowing(ctx context.Context) error {
	kvs, rev, err := j.store.List(ctx, j.keys.prefix)
	if err != nil {
		return fmt.Errorf("bootstrap: job %q rank %d: list job: %w", j.cfg.Job, j.cfg.Rank, err)
	}
	j.mu.Lock()
	j.state.resync(kvs)
	j.mu.Unlock()
	j.activity.applied.Store(rev)
	j.wg.Add(1)
	go j.follow(rev + 1)
	return nil
}

// follow applies every change of the job's keys to the state, in revision
// order, until Close. If the store has compacted the history it needs, it
// lists the job again and carries on from there.
func (j *Job) follow(rev int64) {
	defer j.wg.Done()
	for {
		next, err := j.watchFrom(rev)
		if j.ctx.Err() != nil {
			return
		}
		j.activity.watchRestarts.Add(1)
		if err != nil {
			j.degrade(err)
		}
		if next == rev || err != nil {
			// The watch ended without progress (the store cancelled it, or
			// the client is gone): do not spin on it.
			select {
			case <-time.After(watchRetryDelay):
			case <-j.ctx.Done():
				return
			}
		}
		if next != 0 {
			rev = next
		}
	}
}

// watchFrom runs one watch from rev and returns the revision to resume at
// (0 when unknown).
func (j *Job) watchFrom(rev int64) (int64, error) {
	ctx, cancel := context.WithCancel(j.ctx)
	defer cancel()
	for resp := range j.store.Watch(ctx, j.keys.prefix, rev) {
		j.activity.watchResponses.Add(1)
		if resp.Compacted {
			return j.relist()
		}
		if resp.Err != nil {
			return rev, fmt.Errorf("watch job keys: %w", resp.Err)
		}
		if len(resp.Events) == 0 {
			continue
		}
		j.mu.Lock()
		for _, ev := range resp.Events {
			if ev.Deleted {
				j.state.del(ev.KV.Key)
			} else {
				j.state.put(ev.KV)
			}
			rev = ev.KV.Revision + 1
		}
		j.state.notify()
		j.mu.Unlock()
		j.activity.applied.Store(rev - 1)
	}
	return rev, nil
}

// relist rebuilds the state from a full listing of the job.
func (j *Job) relist() (int64, error) {
	kvs, rev, err := j.store.List(j.ctx, j.keys.prefix)
	if err != nil {
		return 0, fmt.Errorf("list job after compaction: %w", err)
	}
	j.mu.Lock()
	j.state.resync(kvs)
	j.state.notify()
	j.mu.Unlock()
	j.activity.applied.Store(rev)
	return rev + 1, nil
}
