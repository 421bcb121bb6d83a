package flight

import (
	"sync"
	"time"
)

// DefaultSize is how many operations a Recorder keeps unless told
// otherwise.
const DefaultSize = 1000

// MaxPaths is how many paths an Op counts cells and bytes for; the
// traffic of higher-numbered paths is added to the last one.
const MaxPaths = 8

// maxPeers is how many distinct peers an Op remembers.
const maxPeers = 8

// State is where an operation stands.
type State uint8

// The states of an Op.
const (
	Running State = iota
	Done
	Failed
)

var stateNames = [...]string{Running: "running", Done: "done", Failed: "failed"}

func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "unknown"
}

// Dir says which way an operation waits: for a send to complete or for a
// message to arrive.
type Dir uint8

// The directions of a wait. NoWait is an operation that is not waiting
// for a peer; Memory one that waits for a rank to arrive in the memory the
// ranks of a host share.
const (
	NoWait Dir = iota
	Send
	Recv
	Memory
)

var dirNames = [...]string{NoWait: "", Send: "send", Recv: "recv", Memory: "memory"}

func (d Dir) String() string {
	if int(d) < len(dirNames) {
		return dirNames[d]
	}
	return "unknown"
}

// Op is one recorded operation. The fields the caller sets at Begin are
// Comm to Bytes; the recorder sets the rest.
type Op struct {
	// Comm tells the communicator apart (its context id): sequence
	// numbers count per communicator.
	Comm uint64
	// Seq is the operation's sequence number in its communicator.
	Seq uint64
	// Name is the operation, e.g. "AllReduce"; Algorithm and DType name
	// how it runs and on what. They should be constants: the recorder
	// keeps the strings, it does not copy them.
	Name, Algorithm, DType string
	// Count is the element count and Bytes the size of this rank's
	// vector.
	Count, Bytes int64

	// ID numbers the operations of the recorder from 1.
	ID uint64
	// Start and End are the wall-clock times the operation began and
	// finished; End is zero while it runs. The ring keeps them as
	// monotonic offsets (start, end), cheaper to read than the wall clock,
	// and sets these on the copies it hands out, which have no offsets.
	Start, End time.Time
	start, end time.Duration
	State      State
	// Err is the failure of a Failed operation.
	Err string

	// Step, Peer and Dir describe the wait the operation is in, or its
	// last one once finished; Peer is -1 before its first, Step -1
	// outside the algorithm's steps (set-up, the fingerprint exchange).
	Step int
	Peer int
	Dir  Dir
	// Peers lists the distinct peers it waited on, at most maxPeers.
	peers  [maxPeers]int32
	npeers int

	// Traffic is what the transport did for the process while the
	// operation ran (every operation running at the time shares it).
	Traffic Traffic
}

// Peers returns the distinct peers the operation waited on, in the order
// it first did.
func (o *Op) Peers() []int {
	ps := make([]int, o.npeers)
	for i := range ps {
		ps[i] = int(o.peers[i])
	}
	return ps
}

// Duration is how long the operation took, or has taken by now.
func (o *Op) Duration(now time.Time) time.Duration {
	if o.State != Running {
		return o.End.Sub(o.Start)
	}
	return now.Sub(o.Start)
}

// Traffic counts what the transport moved: cells and bytes posted per
// path number, cells posted again after a soft timeout or a failure,
// paths given up, and path resets completed.
type Traffic struct {
	Cells, Bytes             [MaxPaths]uint64
	Reposts, GiveUps, Resets uint64
}

// sub returns t - u, field by field.
func (t Traffic) sub(u Traffic) Traffic {
	for i := range t.Cells {
		t.Cells[i] -= u.Cells[i]
		t.Bytes[i] -= u.Bytes[i]
	}
	t.Reposts -= u.Reposts
	t.GiveUps -= u.GiveUps
	t.Resets -= u.Resets
	return t
}

// Handle names an operation begun in a Recorder.
type Handle uint64

// Recorder keeps the last operations of a rank. Its methods are safe for
// concurrent use and allocate nothing.
type Recorder struct {
	// traffic, when set, reads the transport's counters; failed is told
	// of every operation that ends in failure.
	traffic func() Traffic
	failed  func(Op)

	// base is the wall-clock time of offset 0 of start and end.
	base time.Time

	mu    sync.Mutex
	ring  []Op
	next  uint64 // the ID the next Begin gives
	open  int    // operations running
	hist  Histograms
	start []Traffic // the transport's counters at each running op's Begin, by ring slot
}

// New returns a recorder of the last n operations (DefaultSize if n is 0
// or less). traffic, if not nil, reads the transport's counters at the
// start and end of each operation.
func New(n int, traffic func() Traffic) *Recorder {
	if n <= 0 {
		n = DefaultSize
	}
	r := &Recorder{traffic: traffic, base: time.Now(), ring: make([]Op, n), start: make([]Traffic, n), next: 1}
	// Touch every page now: the ring is fresh memory, and faulting it in
	// one page at a time would cost the first operations of a process
	// (measured: an 8-byte AllReduce of four processes on two cores
	// 1.6 times slower over its first thousand operations).
	for i := range r.ring {
		r.ring[i].Peer = -1
		r.start[i].Reposts = 0
	}
	return r
}

// OnFailure makes r call f with a copy of each operation that ends in
// failure, outside its lock; f must not block. Call it before recording.
func (r *Recorder) OnFailure(f func(Op)) { r.failed = f }

// Size is how many operations r keeps.
func (r *Recorder) Size() int { return len(r.ring) }

// Begin records the start of op (its fields Comm to Bytes) and returns
// the handle Wait and End take.
func (r *Recorder) Begin(op *Op) Handle {
	now := time.Since(r.base)
	var t Traffic
	if r.traffic != nil {
		t = r.traffic()
	}
	r.mu.Lock()
	id := r.next
	r.next++
	i := int(id % uint64(len(r.ring)))
	o := &r.ring[i]
	if o.ID != 0 && o.State == Running {
		r.open-- // overwritten while running: more ops open than slots
	}
	*o = Op{Comm: op.Comm, Seq: op.Seq, Name: op.Name, Algorithm: op.Algorithm, DType: op.DType,
		Count: op.Count, Bytes: op.Bytes, ID: id, start: now, Step: -1, Peer: -1}
	r.start[i] = t
	r.open++
	r.mu.Unlock()
	return Handle(id)
}

// slot returns the operation h names, nil once the ring has moved past it.
func (r *Recorder) slot(h Handle) *Op {
	o := &r.ring[uint64(h)%uint64(len(r.ring))]
	if o.ID != uint64(h) {
		return nil
	}
	return o
}

// SetAlgorithm records the algorithm of the operation h, once chosen.
func (r *Recorder) SetAlgorithm(h Handle, name string) {
	r.mu.Lock()
	if o := r.slot(h); o != nil {
		o.Algorithm = name
	}
	r.mu.Unlock()
}

// Wait records that the operation h starts waiting for peer, at step of
// its algorithm (-1 outside its steps).
func (r *Recorder) Wait(h Handle, step, peer int, d Dir) {
	r.mu.Lock()
	if o := r.slot(h); o != nil {
		o.Step, o.Peer, o.Dir = step, peer, d
		o.addPeer(peer)
	}
	r.mu.Unlock()
}

func (o *Op) addPeer(p int) {
	for i := range o.npeers {
		if o.peers[i] == int32(p) {
			return
		}
	}
	if o.npeers < maxPeers {
		o.peers[o.npeers] = int32(p)
		o.npeers++
	}
}

// End records that the operation h finished, failed if err is not nil.
// Only a failure formats a string.
func (r *Recorder) End(h Handle, err error) {
	now := time.Since(r.base)
	var t Traffic
	if r.traffic != nil {
		t = r.traffic()
	}
	var msg string
	if err != nil {
		msg = err.Error()
	}
	var failed Op
	r.mu.Lock()
	if o := r.slot(h); o != nil && o.State == Running {
		o.end, o.State, o.Err = now, Done, msg
		if err != nil {
			o.State = Failed
		}
		o.Traffic = t.sub(r.start[uint64(h)%uint64(len(r.ring))])
		r.open--
		r.hist.observe(o.Name, o.Bytes, now-o.start, err != nil)
		if err != nil && r.failed != nil {
			failed = r.export(o)
		}
	}
	r.mu.Unlock()
	if failed.ID != 0 {
		r.failed(failed)
	}
}

// Open appends a copy of every running operation to dst, oldest first,
// and returns it.
func (r *Recorder) Open(dst []Op) []Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.open == 0 {
		return dst
	}
	n := uint64(len(r.ring))
	first := uint64(1)
	if r.next > n {
		first = r.next - n
	}
	for id := first; id < r.next; id++ {
		if o := &r.ring[id%n]; o.State == Running && o.ID == id {
			dst = append(dst, r.export(o))
		}
	}
	return dst
}

// Last returns a copy of the newest operation of communicator comm, if r
// still holds one.
func (r *Recorder) Last(comm uint64) (Op, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := uint64(len(r.ring))
	for id := r.next - 1; id > 0 && id+n >= r.next; id-- {
		if o := &r.ring[id%n]; o.ID == id && o.Comm == comm {
			return r.export(o), true
		}
	}
	return Op{}, false
}

// Ops returns a copy of every operation r holds, oldest first.
func (r *Recorder) Ops() []Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := uint64(len(r.ring))
	first := uint64(1)
	if r.next > n {
		first = r.next - n
	}
	ops := make([]Op, 0, r.next-first)
	for id := first; id < r.next; id++ {
		ops = append(ops, r.export(&r.ring[id%n]))
	}
	return ops
}

// export is a copy of o with its wall-clock times set.
func (r *Recorder) export(o *Op) Op {
	c := *o
	c.Start, c.start, c.end = r.base.Add(o.start), 0, 0
	if o.State != Running {
		c.End = r.base.Add(o.end)
	}
	return c
}

// Histograms returns a copy of r's latency histograms.
func (r *Recorder) Histograms() Histograms {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.hist
}
