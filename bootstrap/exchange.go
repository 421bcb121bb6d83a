package bootstrap

import (
	"context"
	"fmt"
	"slices"
)

// Put publishes value for rank to under key, e.g. the connection info of
// one QP with key "qp/<path>". The value lives under this rank's lease, so
// it disappears when this rank leaves: ranks should pass a Barrier after
// exchanging, before any of them may exit. Publishing the same key again
// replaces the value for a Get that has not returned yet.
func (j *Job) Put(ctx context.Context, to int, key string, value []byte) error {
	if err := j.checkPeer(to, key, "put for"); err != nil {
		return err
	}
	if j.isClosed() {
		return ErrClosed
	}
	if err := j.store.Put(ctx, j.keys.p2p(j.cfg.Rank, to, key), value, j.lease); err != nil {
		return fmt.Errorf("bootstrap: job %q rank %d: put %q for rank %d: %w", j.cfg.Job, j.cfg.Rank, key, to, err)
	}
	return nil
}

// Get returns the value rank from published for this rank under key,
// waiting for it as long as ctx allows. It fails early with rank from's
// *RankDeadError or *RankExitedError if that rank leaves without having
// published it. A value once received stays readable, even without etcd.
func (j *Job) Get(ctx context.Context, from int, key string) ([]byte, error) {
	if err := j.checkPeer(from, key, "get from"); err != nil {
		return nil, err
	}
	var value []byte
	err := j.wait(ctx, func(s *state) (bool, error) {
		if v, ok := s.inbox[inboxKey{from: from, key: key}]; ok {
			value = slices.Clone(v)
			return true, nil
		}
		return false, s.gone[from]
	})
	if err != nil {
		return nil, fmt.Errorf("bootstrap: job %q rank %d: get %q from rank %d: %w", j.cfg.Job, j.cfg.Rank, key, from, err)
	}
	return value, nil
}

// checkPeer validates the peer rank and key of a Put or Get.
func (j *Job) checkPeer(peer int, key, op string) error {
	if peer < 0 || peer >= j.cfg.WorldSize {
		return fmt.Errorf("bootstrap: job %q rank %d: %s rank %d: want 0 <= rank < world size %d",
			j.cfg.Job, j.cfg.Rank, op, peer, j.cfg.WorldSize)
	}
	if key == "" {
		return fmt.Errorf("bootstrap: job %q rank %d: %s rank %d: empty key", j.cfg.Job, j.cfg.Rank, op, peer)
	}
	return nil
}

func (j *Job) isClosed() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.state.closed
}
