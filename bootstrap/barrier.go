package bootstrap

import (
	"context"
	"fmt"
)

// Barrier returns once every rank has entered the barrier called name as
// many times as this rank has (each call is the next generation of that
// barrier, so a name is reusable). It fails early if a rank that has not
// arrived leaves the job, and with a *MissingRanksError naming the ranks not
// arrived if ctx ends first. After a failed Barrier the barrier's
// generations are out of step: the job should be torn down.
func (j *Job) Barrier(ctx context.Context, name string) error {
	if name == "" {
		return fmt.Errorf("bootstrap: job %q rank %d: barrier: empty name", j.cfg.Job, j.cfg.Rank)
	}
	j.mu.Lock()
	if j.state.closed {
		j.mu.Unlock()
		return ErrClosed
	}
	j.barrierGen[name]++
	gen := j.barrierGen[name]
	j.mu.Unlock()
	what := fmt.Sprintf("barrier %q generation %d", name, gen)

	// Arriving at this generation retires our key of the previous one: every
	// rank arrived there before we could pass it, and the followers of the
	// job see the arrival before the deletion.
	err := j.store.Put(ctx, j.keys.barrier(j.cfg.Rank, gen, name), nil, j.lease)
	if err == nil && gen > 1 {
		err = j.store.Delete(ctx, j.keys.barrier(j.cfg.Rank, gen-1, name), false)
	}
	if err != nil {
		return fmt.Errorf("bootstrap: job %q rank %d: enter %s: %w", j.cfg.Job, j.cfg.Rank, what, err)
	}

	var absent []int
	err = j.wait(ctx, func(s *state) (bool, error) {
		arrived := s.arrivals[name][gen]
		absent = missing(s.worldSize, arrived)
		if len(absent) == 0 {
			s.passed[name] = gen
			for g := range s.arrivals[name] {
				if g <= gen {
					delete(s.arrivals[name], g)
				}
			}
			return true, nil
		}
		for _, r := range absent {
			if err := s.gone[r]; err != nil {
				return false, err
			}
		}
		return false, nil
	})
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil && err == ctx.Err():
		return &MissingRanksError{Job: j.cfg.Job, What: what, WorldSize: j.cfg.WorldSize, Missing: absent, Err: err}
	default:
		return fmt.Errorf("bootstrap: job %q rank %d: %s: %w", j.cfg.Job, j.cfg.Rank, what, err)
	}
}
