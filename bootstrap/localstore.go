package bootstrap

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// localHistory is how many changes a local store keeps for watches that
// fall behind; a watch older than that is told to list again, as etcd
// does after a compaction.
const localHistory = 1 << 16

// errLocalClosed is the error of a local store's operations after Close.
var errLocalClosed = errors.New("bootstrap: local store closed")

// errLeaseNotFound is the error of an operation on a lease that ended or
// never was.
var errLeaseNotFound = errors.New("bootstrap: lease not found")

// localStore is a Store in this process's memory.
type localStore struct {
	mu        sync.Mutex
	rev       int64
	kv        map[string]localValue
	leases    map[LeaseID]*localLease
	lastLease LeaseID
	history   []Event // the changes after revision compacted, in order
	compacted int64
	changed   chan struct{} // closed, and replaced, on every change
	closed    bool
}

type localValue struct {
	value []byte
	rev   int64
	lease LeaseID
}

type localLease struct {
	ttl      time.Duration
	deadline time.Time
	keys     map[string]bool
	timer    *time.Timer
	// kept counts the KeepAlive loops renewing the lease. While one runs
	// the lease does not end on time: its holder is in this process and
	// alive, and a renewal that runs late on a loaded machine (the timer
	// and the loop are goroutines alike) is no sign of death. It ends a
	// TTL after the last renewal once they stop, or on Revoke.
	kept int
}

// NewLocalStore returns a store that lives in this process: the ranks of
// a job that all run in one program (a test of the program's own
// distributed code, say) meet in it with no server. A lease ends a TTL
// after its last renewal, as etcd's do, but not while a KeepAlive of this
// process renews it, however late a renewal runs on a loaded machine: a
// rank is lost when it stops (closes, or its context ends), not when it
// is slow. Ranks of other processes cannot reach it: give every rank of
// the job the same store. Close ends it for every rank.
func NewLocalStore() Store {
	return &localStore{
		kv:      make(map[string]localValue),
		leases:  make(map[LeaseID]*localLease),
		changed: make(chan struct{}),
	}
}

func (s *localStore) Describe() string { return "the in-process store" }

func (s *localStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		for _, l := range s.leases {
			l.timer.Stop()
		}
		close(s.changed)
	}
	return nil
}

func (s *localStore) Grant(ctx context.Context, ttl time.Duration) (LeaseID, time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return NoLease, 0, err
	}
	if ttl <= 0 {
		return NoLease, 0, errors.New("bootstrap: lease TTL must be positive")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return NoLease, 0, errLocalClosed
	}
	s.lastLease++
	id := s.lastLease
	l := &localLease{ttl: ttl, deadline: time.Now().Add(ttl), keys: make(map[string]bool)}
	l.timer = time.AfterFunc(ttl, func() { s.expire(id) })
	s.leases[id] = l
	return id, ttl, nil
}

// expire ends a lease whose TTL ran out, unless it was renewed while the
// timer fired.
func (s *localStore) expire(id LeaseID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l, ok := s.leases[id]; ok {
		if l.kept > 0 {
			l.timer.Reset(l.ttl)
			return
		}
		if left := time.Until(l.deadline); left > 0 {
			l.timer.Reset(left)
			return
		}
	}
	s.revokeLocked(id)
}

func (s *localStore) revokeLocked(id LeaseID) bool {
	l, ok := s.leases[id]
	if !ok {
		return false
	}
	l.timer.Stop()
	delete(s.leases, id)
	for _, k := range slices.Sorted(maps.Keys(l.keys)) {
		s.deleteLocked(k)
	}
	s.notifyLocked()
	return true
}

// renew extends the lease by its TTL from now, and reports whether it
// was still alive. The store served to other processes (netserver.go)
// renews through it, once per request of the client.
func (s *localStore) renew(id LeaseID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, alive := s.leases[id]
	if alive && !s.closed {
		l.deadline = time.Now().Add(l.ttl)
		l.timer.Reset(l.ttl)
	}
	return alive && !s.closed
}

// KeepAlive renews at a third of the TTL, as etcd's client does; while it
// runs the lease does not expire (see localLease.kept).
func (s *localStore) KeepAlive(ctx context.Context, id LeaseID) (<-chan struct{}, error) {
	s.mu.Lock()
	l, ok := s.leases[id]
	if ok {
		l.kept++
	}
	s.mu.Unlock()
	if !ok {
		return nil, errLeaseNotFound
	}
	out := make(chan struct{}, 1)
	go func() {
		defer close(out)
		defer func() {
			s.mu.Lock()
			if l.kept--; l.kept == 0 && s.leases[id] == l && !s.closed {
				l.timer.Reset(max(time.Until(l.deadline), 0))
			}
			s.mu.Unlock()
		}()
		tick := time.NewTicker(l.ttl / 3)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if !s.renew(id) {
				return
			}
			select {
			case out <- struct{}{}:
			default:
			}
		}
	}()
	return out, nil
}

func (s *localStore) Revoke(ctx context.Context, id LeaseID) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.revokeLocked(id) {
		return errLeaseNotFound
	}
	return nil
}

func (s *localStore) Put(ctx context.Context, key string, value []byte, lease LeaseID) error {
	_, _, err := s.put(ctx, key, value, lease, false)
	return err
}

func (s *localStore) Create(ctx context.Context, key string, value []byte, lease LeaseID) (bool, []byte, error) {
	return s.put(ctx, key, value, lease, true)
}

func (s *localStore) put(ctx context.Context, key string, value []byte, lease LeaseID, create bool) (bool, []byte, error) {
	if err := ctx.Err(); err != nil {
		return false, nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false, nil, errLocalClosed
	}
	if old, ok := s.kv[key]; ok {
		if create {
			return false, slices.Clone(old.value), nil
		}
		if l := s.leases[old.lease]; l != nil {
			delete(l.keys, key)
		}
	}
	if lease != NoLease {
		l, ok := s.leases[lease]
		if !ok {
			return false, nil, errLeaseNotFound
		}
		l.keys[key] = true
	}
	s.rev++
	v := localValue{value: slices.Clone(value), rev: s.rev, lease: lease}
	s.kv[key] = v
	s.recordLocked(Event{KV: KeyValue{Key: key, Value: v.value, Revision: s.rev}})
	s.notifyLocked()
	return true, nil, nil
}

func (s *localStore) Delete(ctx context.Context, key string, prefix bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errLocalClosed
	}
	if !prefix {
		s.deleteLocked(key)
	} else {
		var keys []string
		for k := range s.kv {
			if strings.HasPrefix(k, key) {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			s.deleteLocked(k)
		}
	}
	s.notifyLocked()
	return nil
}

func (s *localStore) deleteLocked(key string) {
	old, ok := s.kv[key]
	if !ok {
		return
	}
	if l := s.leases[old.lease]; l != nil {
		delete(l.keys, key)
	}
	delete(s.kv, key)
	s.rev++
	s.recordLocked(Event{Deleted: true, KV: KeyValue{Key: key, Revision: s.rev}})
}

func (s *localStore) recordLocked(ev Event) {
	s.history = append(s.history, ev)
	if len(s.history) > localHistory {
		drop := len(s.history) / 2
		s.compacted = s.history[drop-1].KV.Revision
		s.history = slices.Delete(s.history, 0, drop)
	}
}

func (s *localStore) notifyLocked() {
	if !s.closed {
		close(s.changed)
		s.changed = make(chan struct{})
	}
}

func (s *localStore) List(ctx context.Context, prefix string) ([]KeyValue, int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, 0, errLocalClosed
	}
	var kvs []KeyValue
	for k, v := range s.kv {
		if strings.HasPrefix(k, prefix) {
			kvs = append(kvs, KeyValue{Key: k, Value: slices.Clone(v.value), Revision: v.rev})
		}
	}
	slices.SortFunc(kvs, func(a, b KeyValue) int { return strings.Compare(a.Key, b.Key) })
	return kvs, s.rev, nil
}

func (s *localStore) Watch(ctx context.Context, prefix string, rev int64) <-chan WatchResponse {
	out := make(chan WatchResponse)
	go func() {
		defer close(out)
		for {
			s.mu.Lock()
			if s.closed {
				s.mu.Unlock()
				_ = send(ctx, out, WatchResponse{Err: errLocalClosed})
				return
			}
			if rev <= s.compacted {
				s.mu.Unlock()
				_ = send(ctx, out, WatchResponse{Compacted: true})
				return
			}
			i := sort.Search(len(s.history), func(i int) bool { return s.history[i].KV.Revision >= rev })
			var evs []Event
			for _, ev := range s.history[i:] {
				if strings.HasPrefix(ev.KV.Key, prefix) {
					ev.KV.Value = slices.Clone(ev.KV.Value)
					evs = append(evs, ev)
				}
			}
			rev = s.rev + 1
			changed := s.changed
			s.mu.Unlock()
			if len(evs) > 0 && !send(ctx, out, WatchResponse{Events: evs}) {
				return
			}
			select {
			case <-changed:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

func send(ctx context.Context, out chan<- WatchResponse, wr WatchResponse) bool {
	select {
	case out <- wr:
		return true
	case <-ctx.Done():
		return false
	}
}
