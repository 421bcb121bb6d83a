package bootstrap

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// watchRetryDelay spaces out new watches after the cluster cancelled one,
// e.g. while it has no leader.
const watchRetryDelay = 500 * time.Millisecond

// startFollowing lists the job's keys and starts watching it from just after
// that listing, so that no change is missed between the two.
func (j *Job) startFollowing(ctx context.Context) error {
	resp, err := j.cli.Get(ctx, j.keys.prefix, clientv3.WithPrefix())
	if err != nil {
		return fmt.Errorf("bootstrap: job %q rank %d: list job: %w", j.cfg.Job, j.cfg.Rank, err)
	}
	j.mu.Lock()
	j.state.resync(resp.Kvs)
	j.mu.Unlock()
	j.activity.applied.Store(resp.Header.Revision)
	j.wg.Add(1)
	go j.follow(resp.Header.Revision + 1)
	return nil
}

// follow applies every change of the job's keys to the state, in revision
// order, until Close. If etcd has compacted the history it needs, it lists
// the job again and carries on from there.
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
			// The watch ended without progress (etcd cancelled it, or the
			// client is gone): do not spin on it.
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
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(j.ctx))
	defer cancel()
	for resp := range j.cli.Watch(ctx, j.keys.prefix, clientv3.WithPrefix(), clientv3.WithRev(rev)) {
		j.activity.watchResponses.Add(1)
		if resp.CompactRevision != 0 {
			return j.relist()
		}
		if err := resp.Err(); err != nil {
			return rev, fmt.Errorf("watch job keys: %w", err)
		}
		if len(resp.Events) == 0 {
			continue
		}
		j.mu.Lock()
		for _, ev := range resp.Events {
			switch ev.Type {
			case clientv3.EventTypePut:
				j.state.put(ev.Kv)
			case clientv3.EventTypeDelete:
				j.state.del(string(ev.Kv.Key))
			}
			rev = ev.Kv.ModRevision + 1
		}
		j.state.notify()
		j.mu.Unlock()
		j.activity.applied.Store(rev - 1)
	}
	return rev, nil
}

// relist rebuilds the state from a full listing of the job.
func (j *Job) relist() (int64, error) {
	resp, err := j.cli.Get(j.ctx, j.keys.prefix, clientv3.WithPrefix())
	if err != nil {
		return 0, fmt.Errorf("list job after compaction: %w", err)
	}
	j.mu.Lock()
	j.state.resync(resp.Kvs)
	j.state.notify()
	j.mu.Unlock()
	j.activity.applied.Store(resp.Header.Revision)
	return resp.Header.Revision + 1, nil
}
