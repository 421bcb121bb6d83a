package collectives

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/rdmacell/rdmacell/comm"
	"github.com/rdmacell/rdmacell/flight"
)

// EnvAlgorithm is the environment variable OptionsFromEnv reads
// Options.Algorithm from; its value is an algorithm name.
const EnvAlgorithm = "RDMACELL_ALGO"

// OptionsFromEnv returns the Options the launcher's environment asks for:
// Algorithm from RDMACELL_ALGO and Reproducible from RDMACELL_REPRODUCIBLE,
// when they are set. A value that cannot be used is an error naming the
// variable.
func OptionsFromEnv() (Options, error) {
	var o Options
	if v, ok := os.LookupEnv(EnvAlgorithm); ok {
		a, err := ParseAlgorithm(v)
		if err != nil {
			return Options{}, fmt.Errorf("collectives: environment variable %s=%q: %w", EnvAlgorithm, v, err)
		}
		o.Algorithm = a
	}
	repro, err := reproducibleFromEnv()
	if err != nil {
		return Options{}, fmt.Errorf("collectives: %w", err)
	}
	o.Reproducible = repro
	return o, nil
}

// DefaultChunkBytes is the pipelining unit of Ring, Chain and Shared.
// Measured with cellbench on two ranks of this project's test machine:
// over tcp a message costs hundreds of microseconds beside its bytes, and
// a 64 MiB AllReduce took 131–152 ms with 256 KiB chunks, 84 ms with
// 1 MiB, 71–80 ms with 2 MiB and 59–83 ms with 4 MiB; through shared
// memory, 1 MiB and larger chunks make Go's copies bypass the cache,
// which made a 64 MiB AllReduce 1.6 times faster than 256 KiB chunks,
// and 2 MiB an AllToAll (whose share per destination is a chunk over the
// ranks) 1.5 times faster than 1 MiB.
const DefaultChunkBytes = 2 << 20

// Options configure a Group. The zero value is the default.
type Options struct {
	// Algorithm forces an algorithm on every collective that implements
	// it; the others choose for themselves. Auto chooses by message and
	// world size.
	// All ranks must force the same algorithm: the fingerprint exchange
	// reports those that do not.
	Algorithm Algorithm
	// ChunkBytes is the unit in which Ring and Chain cut their blocks, so
	// that receiving one chunk overlaps combining and forwarding the
	// previous one, and Shared its phases. Rounded down to whole
	// elements; 0 is DefaultChunkBytes.
	ChunkBytes int
	// SkipVerify leaves out the fingerprint exchange that starts every
	// operation (log2(n) rounds of 32 bytes per rank). Ranks that
	// disagree are then caught only by the tags of the data messages:
	// those that receive a wrong message report it, and the others wait
	// until their context ends.
	SkipVerify bool
	// Reproducible makes every reduction (AllReduce, ReduceScatter,
	// Reduce and their non-blocking forms) combine each element in one
	// fixed order, rank 0's value first, then rank 1's and so on, so
	// that its bits depend only on the world size and the inputs, not
	// on the algorithm, transport, message size, chunk size or number
	// of paths (see reproducible.go). The RDMACELL_REPRODUCIBLE
	// environment variable turns it on too.
	Reproducible bool
	// Exact makes float32 and float64 Sum and Avg the correctly rounded
	// sum of the ranks' values, whatever their order (Avg then divides
	// it once); it implies Reproducible for the other reductions. See
	// package exact, and AllReduceAcc for sums independent of how the
	// data is split between ranks.
	Exact bool
	// Comm configures the communicator Open joins the job with; New,
	// Split and Shrink ignore it. With a zero WorldSize, Open reads the
	// launcher's environment (see Open).
	Comm comm.Options
}

// pipelineSlots is how many chunk receives a pipeline keeps posted ahead
// of the one it is combining. At least 2 (see chainReduce).
const pipelineSlots = 4

// Group is ranks of the job that run collectives together and send each
// other messages, over one communicator: Open's, or the one New is given.
// Collectives run one at a time, in the order they were issued, on every
// rank, so that the ranks
// post their point-to-point messages in the same order: a blocking call
// issued while nothing is pending runs on the caller's goroutine, anything
// else joins a FIFO that the group's goroutine drains.
//
// A Group is safe for concurrent use, but the ranks must issue the same
// operations in the same order: issuing from several goroutines at once
// leaves that order to chance.
type Group struct {
	p          comm.P2P
	rank, size int
	algo       Algorithm
	chunk      int
	verify     bool
	mode       mode
	opts       Options // what Split and Shrink give their groups

	// c is the communicator p is the ordered channel of, nil when p is
	// another P2P; owns says Close closes it.
	c    *comm.Comm
	owns bool

	mu     sync.Mutex
	seq    uint64
	queue  fifo
	busy   bool  // an operation is executing (scratch is in use)
	closed bool  // no more operations are accepted
	failed error // the first failure that misaligned the streams
	free   []*operation
	wake   chan struct{}
	exited chan struct{}

	// The executor's state, used only by the holder of busy.
	x  run
	sc scratch
	// shm is the memory the ranks share, if they do; decided tells
	// whether the ranks have agreed on that yet (before the first
	// operation).
	shm     *shared
	decided bool
	// hier is the split of the ranks by host, for Hierarchical, when the
	// group spans hosts (decided with shm).
	hier *hierarchy

	// rec records the operations, under the communicator id cid, when p
	// has a flight recorder.
	rec *flight.Recorder
	cid uint64
}

// recorded is a P2P with a flight recorder (comm's is).
type recorded interface {
	Recorder() *flight.Recorder
	ID() uint64
}

// New returns a Group over p, which the caller keeps: Close leaves it
// open. Over a communicator's p (Comm.P2P) the group has messages, Split
// and Shrink too. New fails on an invalid option and reads no
// environment: see Open and OptionsFromEnv.
func New(p comm.P2P, opts Options) (*Group, error) {
	if p == nil {
		return nil, &ArgError{Rank: -1, Op: "New", Arg: "p", Problem: "is nil, want a communicator"}
	}
	rank, size := p.Rank(), p.Size()
	if size < 1 || rank < 0 || rank >= size {
		return nil, &ArgError{Rank: rank, Op: "New", Arg: "p", Problem: fmt.Sprintf("has rank %d of size %d, want 0 <= rank < size", rank, size)}
	}
	if err := opts.check(rank, "New"); err != nil {
		return nil, err
	}
	chunk := opts.ChunkBytes
	if chunk == 0 {
		chunk = DefaultChunkBytes
	}
	g := &Group{
		p: p, rank: rank, size: size, algo: opts.Algorithm, chunk: chunk, verify: !opts.SkipVerify, mode: groupMode(opts),
		opts: opts, wake: make(chan struct{}, 1), exited: make(chan struct{}),
	}
	if r, ok := p.(recorded); ok {
		g.rec, g.cid = r.Recorder(), r.ID()
	}
	if c, ok := p.(interface{ Comm() *comm.Comm }); ok {
		g.c = c.Comm()
	}
	g.sc.p = p
	g.x.g = g
	go g.worker()
	return g, nil
}

// check reports the first option that cannot be used, for op.
func (o Options) check(rank int, op string) error {
	if o.Algorithm > lastAlgorithm {
		return &ArgError{Rank: rank, Op: op, Arg: "Options.Algorithm", Problem: fmt.Sprintf("%d is not an algorithm", o.Algorithm)}
	}
	if o.ChunkBytes < 0 {
		return &ArgError{Rank: rank, Op: op, Arg: "Options.ChunkBytes", Problem: fmt.Sprintf("%d is negative, want 0 (default) or a size in bytes", o.ChunkBytes)}
	}
	return nil
}

// Rank returns this rank.
func (g *Group) Rank() int { return g.rank }

// Size returns the number of ranks.
func (g *Group) Size() int { return g.size }

// Close stops accepting operations, lets those already issued finish (each
// is bounded by its own context), and returns the group's scratch memory
// to the communicator. A group from Open, Split or Shrink then closes its
// communicator, which fails the point-to-point requests still pending;
// one from New leaves its P2P open.
func (g *Group) Close() error {
	g.mu.Lock()
	already := g.closed
	g.closed = true
	g.mu.Unlock()
	if !already {
		g.signal()
	}
	<-g.exited
	if already {
		return nil
	}
	err := g.sc.release()
	if g.shm != nil {
		err = errors.Join(err, g.shm.close())
	}
	err = errors.Join(err, g.hier.close())
	if g.owns {
		err = errors.Join(err, g.c.Close())
	}
	return err
}

func (g *Group) signal() {
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

// worker drains the FIFO.
func (g *Group) worker() {
	defer close(g.exited)
	for {
		g.mu.Lock()
		for g.busy || g.queue.n == 0 {
			if g.closed && !g.busy && g.queue.n == 0 {
				g.mu.Unlock()
				return
			}
			g.mu.Unlock()
			<-g.wake
			g.mu.Lock()
		}
		op := g.queue.pop()
		g.busy = true
		g.mu.Unlock()

		op.finish(g, g.execute(op))
		g.idle()
	}
}

// idle releases the executor and hands it to the worker if work queued up.
func (g *Group) idle() {
	g.mu.Lock()
	g.busy = false
	more := g.queue.n > 0 || g.closed
	g.mu.Unlock()
	if more {
		g.signal()
	}
}

// issue assigns op its sequence number and either reserves the executor
// for the caller (inline) or queues op for the worker.
func (g *Group) issue(op *operation, inlineOK bool) (inline bool, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false, fmt.Errorf("collectives: rank %d: %s: %w", g.rank, op.kind, ErrClosed)
	}
	if g.failed != nil {
		return false, &OpError{Rank: g.rank, Op: op.kind.String(), Seq: g.seq, Step: -1, Peer: -1,
			Err: fmt.Errorf("%w by an earlier operation: %w", ErrGroupFailed, g.failed)}
	}
	op.seq = g.seq
	g.seq++
	if inlineOK && !g.busy && g.queue.n == 0 {
		g.busy = true
		return true, nil
	}
	g.queue.push(op)
	return false, nil
}

// call runs op to completion for a blocking collective.
func (g *Group) call(ctx context.Context, op *operation) error {
	if err := ctx.Err(); err != nil {
		g.recycle(op)
		return fmt.Errorf("collectives: rank %d: %s: not started: %w", g.rank, op.kind, err)
	}
	inline, err := g.issue(op, true)
	if err != nil {
		g.recycle(op)
		return err
	}
	if inline {
		err := g.execute(op)
		g.recycleIdle(op)
		return err
	}
	g.signal()
	return op.await(g, ctx)
}

// start issues op for a non-blocking collective.
func (g *Group) start(ctx context.Context, op *operation) (Request, error) {
	if err := ctx.Err(); err != nil {
		g.recycle(op)
		return Request{}, fmt.Errorf("collectives: rank %d: %s: not started: %w", g.rank, op.kind, err)
	}
	if _, err := g.issue(op, false); err != nil {
		g.recycle(op)
		return Request{}, err
	}
	req := Request{op: op, gen: op.gen.Load()}
	g.signal()
	return req, nil
}

// newOp takes an operation from the free list.
func (g *Group) newOp(ctx context.Context, k kind) *operation {
	g.mu.Lock()
	var op *operation
	if n := len(g.free); n > 0 {
		op = g.free[n-1]
		g.free = g.free[:n-1]
	}
	g.mu.Unlock()
	if op == nil {
		op = &operation{group: g, done: make(chan struct{}, 1)}
	}
	op.ctx, op.kind = ctx, k
	return op
}

// recycle clears op (so that it holds no user memory) and frees it.
func (g *Group) recycle(op *operation) {
	g.clear(op)
	g.mu.Lock()
	g.free = append(g.free, op)
	g.mu.Unlock()
}

// recycleIdle is recycle and idle under one lock, for a blocking call
// that ran on its caller's goroutine.
func (g *Group) recycleIdle(op *operation) {
	g.clear(op)
	g.mu.Lock()
	g.free = append(g.free, op)
	g.busy = false
	more := g.queue.n > 0 || g.closed
	g.mu.Unlock()
	if more {
		g.signal()
	}
}

func (g *Group) clear(op *operation) {
	op.ctx, op.red, op.send, op.recv, op.counts, op.counts2, op.err = nil, nil, nil, nil, nil, nil, nil
	op.kind, op.dt, op.rop, op.algo, op.root, op.count, op.inPlace = 0, 0, 0, 0, 0, 0, false
	op.state.Store(opPending)
	op.gen.Add(1)
}

// execute runs op on the calling goroutine, which holds busy.
func (g *Group) execute(op *operation) error {
	if g.failed != nil {
		return &OpError{Rank: g.rank, Op: op.kind.String(), Seq: op.seq, Step: -1, Peer: -1,
			Err: fmt.Errorf("%w by an earlier operation: %w", ErrGroupFailed, g.failed)}
	}
	x := &g.x
	x.h = 0
	var err error
	if !g.decided && g.size > 1 {
		// The set-up's waits are the operation's: it is recorded before
		// its algorithm is known.
		x.h = g.record(op, "")
		g.hier = planHierarchy(g)
		if err = g.share(op.ctx); err != nil {
			err = &OpError{Rank: g.rank, Op: op.kind.String(), Seq: op.seq, Step: -1, Peer: -1, Err: err}
		}
		g.decided = err == nil
	}
	if err == nil {
		x.begin(op)
		if g.rec != nil {
			if x.h == 0 {
				x.h = g.record(op, op.algo.String())
			} else {
				g.rec.SetAlgorithm(x.h, op.algo.String())
			}
			if s := g.shm; s != nil {
				s.rec, s.h = g.rec, x.h
			}
		}
		err = x.exec()
		x.end()
	}
	if g.rec != nil && x.h != 0 {
		g.rec.End(x.h, err)
	}
	if err != nil && !x.aligned {
		// The ranks' streams may hold messages of this operation (or of
		// the setup): every later operation would read them. Fail those
		// fast instead.
		g.mu.Lock()
		if g.failed == nil {
			g.failed = err
		}
		g.mu.Unlock()
	}
	return err
}

// record begins op's record in the flight recorder, if there is one.
func (g *Group) record(op *operation, algo string) flight.Handle {
	if g.rec == nil {
		return 0
	}
	esize := max(op.dt.size(), 1)
	return g.rec.Begin(&flight.Op{Comm: g.cid, Seq: op.seq, Name: op.kind.String(), Algorithm: algo, DType: op.dt.String(),
		Count: int64(op.count), Bytes: int64(op.count * esize)})
}

// fifo is a growable ring of operations.
type fifo struct {
	items   []*operation
	head, n int
}

func (q *fifo) push(op *operation) {
	if q.n == len(q.items) {
		grown := make([]*operation, max(8, 2*len(q.items)))
		for i := range q.n {
			grown[i] = q.items[(q.head+i)%len(q.items)]
		}
		q.items, q.head = grown, 0
	}
	q.items[(q.head+q.n)%len(q.items)] = op
	q.n++
}

func (q *fifo) pop() *operation {
	op := q.items[q.head]
	q.items[q.head] = nil
	q.head = (q.head + 1) % len(q.items)
	q.n--
	return op
}

// Scratch buffers, by purpose, so that an algorithm can hold several.
const (
	bufVerify    = iota // fingerprint records
	bufTmp              // incoming data before it is combined
	bufWork             // a full-size working copy
	bufVerifyOut        // records and data of an exchange round
	bufVerifyIn         // the same, received
	nbuf
)

// scratch is memory reused from one operation to the next: registered
// buffers from the communicator, and the executor's bookkeeping.
type scratch struct {
	p      comm.P2P
	bufs   [nbuf][]byte
	reqs   []comm.Request
	sends  []pending
	ints   [2][]int
	chunks []chunk
}

// buf returns n bytes of scratch buffer i, growing it (to a power of two,
// so that a slowly growing size does not reallocate each time).
func (s *scratch) buf(i, n int) ([]byte, error) {
	if cap(s.bufs[i]) < n {
		size := 4096
		for size < n {
			size *= 2
		}
		if s.bufs[i] != nil {
			if err := s.p.Free(s.bufs[i][:cap(s.bufs[i])]); err != nil {
				return nil, err
			}
			s.bufs[i] = nil
		}
		b, err := s.p.Alloc(size)
		if err != nil {
			return nil, err
		}
		s.bufs[i] = b[:0]
	}
	return s.bufs[i][:n], nil
}

func (s *scratch) release() error {
	var errs []error
	for i, b := range s.bufs {
		if b != nil {
			errs = append(errs, s.p.Free(b[:cap(b)]))
			s.bufs[i] = nil
		}
	}
	return errors.Join(errs...)
}

// intsN returns a zeroed []int of length n from slot i.
func (s *scratch) intsN(i, n int) []int {
	if cap(s.ints[i]) < n {
		s.ints[i] = make([]int, n)
	}
	v := s.ints[i][:n]
	clear(v)
	return v
}
