package bootstrap

import (
	"context"
	"fmt"
	"slices"
)

// Notes are what the ranks of a job say to all of them and to whoever
// watches the job (the launcher): each rank holds at most one value per
// note name, which it may replace, and which ends with its lease. The
// communicator uses them for stall reports.

// Note publishes value as this rank's note name, replacing its last one.
func (j *Job) Note(ctx context.Context, name string, value []byte) error {
	if name == "" {
		return fmt.Errorf("bootstrap: job %q rank %d: note: empty name", j.cfg.Job, j.cfg.Rank)
	}
	if j.isClosed() {
		return ErrClosed
	}
	if err := j.store.Put(ctx, j.keys.note(j.cfg.Rank, name), value, j.lease); err != nil {
		return fmt.Errorf("bootstrap: job %q rank %d: note %q: %w", j.cfg.Job, j.cfg.Rank, name, err)
	}
	return nil
}

// Notes returns every rank's latest note name, by rank, and a version that
// grows each time one of them changes (see WaitNotes).
func (j *Job) Notes(name string) (map[int][]byte, int64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := make(map[int][]byte)
	for k, v := range j.state.notes {
		if k.key == name {
			out[k.from] = v // never modified once stored
		}
	}
	return out, j.state.noteVersion[name]
}

// WaitNotes waits until the version of the notes name has passed version,
// and returns the new one.
func (j *Job) WaitNotes(ctx context.Context, name string, version int64) (int64, error) {
	var v int64
	err := j.wait(ctx, func(s *state) (bool, error) {
		v = s.noteVersion[name]
		return v > version, nil
	})
	return v, err
}

// NoteEvent is a note as WatchNotes reports it.
type NoteEvent struct {
	Rank  int
	Name  string
	Value []byte
}

// WatchNotes reports every note the ranks of job publish, from outside
// the job (a launcher), those already there first, until ctx ends or the
// store ends the watch. keyPrefix is the job's Config.KeyPrefix ("" for
// DefaultKeyPrefix).
func WatchNotes(ctx context.Context, st Store, keyPrefix, job string) (<-chan NoteEvent, error) {
	if keyPrefix == "" {
		keyPrefix = DefaultKeyPrefix
	}
	keys := keyspace{prefix: keyPrefix + job + "/"}
	prefix := keys.prefix + "note/"
	kvs, rev, err := st.List(ctx, prefix)
	if err != nil {
		return nil, fmt.Errorf("bootstrap: job %q: list notes: %w", job, err)
	}
	ch := make(chan NoteEvent, len(kvs)+16)
	send := func(kv KeyValue) bool {
		k := keys.parse(kv.Key)
		if k.kind != kindNote {
			return true
		}
		select {
		case ch <- NoteEvent{Rank: k.rank, Name: k.name, Value: kv.Value}:
			return true
		case <-ctx.Done():
			return false
		}
	}
	for _, kv := range kvs {
		send(kv)
	}
	go func() {
		defer close(ch)
		for resp := range st.Watch(ctx, prefix, rev+1) {
			for _, ev := range resp.Events {
				if !ev.Deleted && !send(ev.KV) {
					return
				}
			}
			if resp.Err != nil || resp.Compacted {
				return
			}
		}
	}()
	return ch, nil
}

// LauncherRank is the rank the notes of a launcher (PutNote) come from.
const LauncherRank = -1

// PutNote publishes a note of job from outside it, as LauncherRank: a
// launcher asking the ranks for something (their traces). The note has no
// lease; it goes with the job's keys.
func PutNote(ctx context.Context, st Store, keyPrefix, job, name string, value []byte) error {
	if keyPrefix == "" {
		keyPrefix = DefaultKeyPrefix
	}
	keys := keyspace{prefix: keyPrefix + job + "/"}
	if err := st.Put(ctx, keys.note(LauncherRank, name), value, NoLease); err != nil {
		return fmt.Errorf("bootstrap: job %q: note %q: %w", job, name, err)
	}
	return nil
}

// Decide settles name for the whole job: the first rank to call it with
// a name makes its value the decision, and every call with that name, by
// any rank, returns that value. A rank that proposes and dies does not
// undo it: decisions live as long as the job's keys.
func (j *Job) Decide(ctx context.Context, name string, proposal []byte) ([]byte, error) {
	if name == "" {
		return nil, fmt.Errorf("bootstrap: job %q rank %d: decide: empty name", j.cfg.Job, j.cfg.Rank)
	}
	if j.isClosed() {
		return nil, ErrClosed
	}
	created, existing, err := j.store.Create(ctx, j.keys.decision(name), proposal, NoLease)
	if err != nil {
		return nil, fmt.Errorf("bootstrap: job %q rank %d: decide %q: %w", j.cfg.Job, j.cfg.Rank, name, err)
	}
	if created {
		return slices.Clone(proposal), nil
	}
	return existing, nil
}

// GatherNotes waits until each of ranks has published its note name or
// left the job, and returns the notes of those that published, by rank.
func (j *Job) GatherNotes(ctx context.Context, name string, ranks []int) (map[int][]byte, error) {
	out := make(map[int][]byte, len(ranks))
	err := j.wait(ctx, func(s *state) (bool, error) {
		clear(out)
		for _, r := range ranks {
			if v, ok := s.notes[inboxKey{from: r, key: name}]; ok {
				out[r] = v
			} else if s.gone[r] == nil {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("bootstrap: job %q rank %d: gather note %q: %w", j.cfg.Job, j.cfg.Rank, name, err)
	}
	return out, nil
}
