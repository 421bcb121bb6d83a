package bootstrap

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
)

// inboxKey names a value published for this rank.
type inboxKey struct {
	from int
	key  string
}

// state is this rank's view of the job, built from one ordered watch of the
// job's keys. Because every change arrives in the store's revision order, a value
// a peer published before it exited is always seen before its exit, and a
// barrier arrival before the lease revocation that deletes it. Guarded by
// Job.mu.
type state struct {
	job       string
	self      int
	worldSize int
	keys      keyspace

	regs    map[int]registration // latest registration of each rank
	seen    map[int]bool         // ranks that have registered at least once
	present map[int]bool         // ranks whose registration is still there
	exits   map[int]int64        // clean-exit markers: rank -> lease it ended
	gone    map[int]error        // departed ranks: *RankDeadError or *RankExitedError

	worldDone    bool
	worldErr     error
	worldMembers []Member

	arrivals map[string]map[int64]map[int]bool // barrier name -> generation -> ranks
	passed   map[string]int64                  // barrier name -> last generation passed

	inbox map[inboxKey][]byte
	// published reports, per key, each rank that publishes the key for
	// this rank, once (see Job.Published).
	published map[string]*publication
	// notes holds every rank's latest note of each name (see Job.Note);
	// noteVersion counts the changes of each name.
	notes       map[inboxKey][]byte
	noteVersion map[string]int64

	// changed is closed, and replaced, whenever the state changes.
	changed    chan struct{}
	departures chan error
	closing    bool // Close has begun: our own exit is not news
	closed     bool // waits return ErrClosed (set together with closing)
}

func newState(job string, self, worldSize int, keys keyspace) *state {
	return &state{
		job:         job,
		self:        self,
		worldSize:   worldSize,
		keys:        keys,
		regs:        make(map[int]registration),
		seen:        make(map[int]bool),
		present:     make(map[int]bool),
		exits:       make(map[int]int64),
		gone:        make(map[int]error),
		arrivals:    make(map[string]map[int64]map[int]bool),
		passed:      make(map[string]int64),
		inbox:       make(map[inboxKey][]byte),
		published:   make(map[string]*publication),
		notes:       make(map[inboxKey][]byte),
		noteVersion: make(map[string]int64),
		changed:     make(chan struct{}),
		departures:  make(chan error, worldSize),
	}
}

// notify wakes every waiter.
func (s *state) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// close ends every wait, and makes this rank's own exit no news.
func (s *state) close() {
	s.closing = true
	s.closed = true
	s.notify()
}

// put applies a created or updated key.
func (s *state) put(kv KeyValue) {
	k := s.keys.parse(kv.Key)
	switch k.kind {
	case kindInfo:
		var reg registration
		if err := json.Unmarshal(kv.Value, &reg); err != nil {
			s.failWorld(fmt.Errorf("bootstrap: job %q: registration of rank %d is not valid: %w", s.job, k.rank, err))
			return
		}
		s.register(k.rank, reg)
	case kindExit:
		lease, err := strconv.ParseInt(string(kv.Value), 10, 64)
		if err == nil {
			s.exits[k.rank] = lease
		}
	case kindBarrier:
		if k.gen <= s.passed[k.name] {
			return // a generation this rank is already past
		}
		gens := s.arrivals[k.name]
		if gens == nil {
			gens = make(map[int64]map[int]bool)
			s.arrivals[k.name] = gens
		}
		if gens[k.gen] == nil {
			gens[k.gen] = make(map[int]bool)
		}
		gens[k.gen][k.rank] = true
	case kindNote:
		s.notes[inboxKey{from: k.rank, key: k.name}] = slices.Clone(kv.Value)
		s.noteVersion[k.name]++
	case kindP2P:
		if k.to == s.self {
			s.inbox[inboxKey{from: k.rank, key: k.name}] = slices.Clone(kv.Value)
			if pub := s.published[k.name]; pub != nil {
				pub.report(k.rank)
			}
		}
	}
}

// del applies a deleted key. Only a registration's deletion matters: barrier
// arrivals and published values stay valid once seen.
func (s *state) del(key string) {
	if k := s.keys.parse(key); k.kind == kindInfo {
		s.depart(k.rank)
	}
}

// register records a rank's registration and completes the world when it
// is the last one missing.
func (s *state) register(rank int, reg registration) {
	if rank != reg.Rank {
		s.failWorld(fmt.Errorf("bootstrap: job %q: registration under rank %d claims rank %d (host %s, pid %d)",
			s.job, rank, reg.Rank, reg.Host, reg.PID))
		return
	}
	if reg.WorldSize != s.worldSize {
		s.failWorld(fmt.Errorf("bootstrap: job %q: rank %d (host %s, pid %d) registered with world size %d, rank %d expects %d: %w",
			s.job, rank, reg.Host, reg.PID, reg.WorldSize, s.self, s.worldSize, ErrWorldSize))
		return
	}
	s.regs[rank] = reg
	s.seen[rank] = true
	s.present[rank] = true
	if s.worldDone || s.worldErr != nil || len(s.seen) < s.worldSize {
		return
	}
	s.worldDone = true
	s.worldMembers = make([]Member, s.worldSize)
	for r := range s.worldSize {
		s.worldMembers[r] = s.regs[r].Member
	}
}

// failWorld records why the world cannot complete, unless it already has.
func (s *state) failWorld(err error) {
	if !s.worldDone && s.worldErr == nil {
		s.worldErr = err
	}
}

// depart records that a rank's registration is gone and reports it, once.
func (s *state) depart(rank int) {
	if !s.present[rank] {
		return
	}
	s.present[rank] = false
	if _, dup := s.gone[rank]; dup {
		return
	}
	reg := s.regs[rank]
	var err error
	if lease, ok := s.exits[rank]; ok && lease == reg.Lease {
		err = &RankExitedError{Job: s.job, Rank: rank, Host: reg.Host, PID: reg.PID}
	} else {
		err = &RankDeadError{Job: s.job, Rank: rank, Host: reg.Host, PID: reg.PID}
	}
	s.gone[rank] = err
	// A rank that leaves before everyone arrived means the world will never
	// be complete: better to say so now than at the deadline.
	s.failWorld(err)
	if rank == s.self && s.closing {
		return
	}
	select {
	case s.departures <- err:
	default: // cannot happen: each rank departs once and the buffer holds them all
	}
}

// resync replaces the view by a full listing, after which the watch resumes.
// Ranks that disappeared meanwhile are reported as departed.
func (s *state) resync(kvs []KeyValue) {
	listed := make(map[int]bool)
	for _, kv := range kvs {
		if k := s.keys.parse(kv.Key); k.kind == kindInfo {
			listed[k.rank] = true
		}
		s.put(kv)
	}
	for _, r := range sortedKeys(s.present) {
		if s.present[r] && !listed[r] {
			s.depart(r)
		}
	}
}

// publication is the report of the ranks that publish one key.
type publication struct {
	ch   chan int // buffered for the whole world
	seen map[int]bool
}

func (p *publication) report(rank int) {
	if !p.seen[rank] {
		p.seen[rank] = true
		p.ch <- rank // never blocks: each rank is reported once
	}
}

// missing lists, ascending, the ranks in [0, worldSize) not in have.
func missing(worldSize int, have map[int]bool) []int {
	var out []int
	for r := range worldSize {
		if !have[r] {
			out = append(out, r)
		}
	}
	return out
}

func sortedKeys(m map[int]bool) []int {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
