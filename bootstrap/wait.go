package bootstrap

import (
	"context"
	"fmt"
)

// wait blocks until check reports done or an error, re-checking after every
// change of the state, until ctx ends or the job is closed. check runs with
// j.mu held.
func (j *Job) wait(ctx context.Context, check func(*state) (bool, error)) error {
	for {
		j.mu.Lock()
		if j.state.closed {
			j.mu.Unlock()
			return ErrClosed
		}
		done, err := check(j.state)
		changed := j.state.changed
		j.mu.Unlock()
		if done || err != nil {
			return err
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// WaitWorld waits until every rank of the job has registered and returns
// them, indexed by rank (their slices must not be modified). If ctx ends first the error is a
// *MissingRanksError naming the ranks that never registered; if a rank
// leaves before the world is complete, its *RankDeadError or
// *RankExitedError; if a rank disagrees about the world size, an error
// wrapping ErrWorldSize. Once the world is complete, WaitWorld returns at
// once, even without etcd.
func (j *Job) WaitWorld(ctx context.Context) ([]Member, error) {
	var members []Member
	err := j.wait(ctx, func(s *state) (bool, error) {
		if s.worldErr != nil {
			return false, s.worldErr
		}
		if s.worldDone {
			members = append([]Member(nil), s.worldMembers...)
			return true, nil
		}
		return false, nil
	})
	if err == nil {
		return members, nil
	}
	if ctx.Err() != nil && err == ctx.Err() {
		j.mu.Lock()
		miss := missing(j.cfg.WorldSize, j.state.seen)
		j.mu.Unlock()
		return nil, &MissingRanksError{Job: j.cfg.Job, What: "world", WorldSize: j.cfg.WorldSize, Missing: miss, Err: err}
	}
	return nil, fmt.Errorf("bootstrap: job %q rank %d: wait for world: %w", j.cfg.Job, j.cfg.Rank, err)
}
