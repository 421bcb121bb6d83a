package comm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdmacell/rdmacell/bootstrap"
	"github.com/rdmacell/rdmacell/verbs"
)

// world is what the communicators of one process share: the job, the
// devices, the registered memory, and one peer per rank of the job. Every
// communicator (the world one and those Split from it) moves its messages
// over the same peers, on channels of its own.
type world struct {
	opts Options
	log  *slog.Logger
	base *slog.Logger // the user's logger, for the components below
	// quiet is set once this rank is closing: the connection losses its
	// peers' leaving causes are expected then, not worth a warning.
	quiet atomic.Bool
	job   *bootstrap.Job
	rank  int
	size  int
	host  string
	pid   int
	ttl   time.Duration

	localRank, localSize int

	devs      [numDevices]verbs.Device
	mem       memory
	sendStage stagePool
	recvStage stagePool
	peers     []*peer
	comm      *Comm // the world communicator

	// life ends with Close; it stops the background goroutines.
	life    context.Context
	endLife context.CancelFunc
	wg      sync.WaitGroup

	// fail, once set, fails every operation: an abort, or Close.
	fail atomic.Pointer[failure]

	// closedCtx holds the context ids of communicators closed by Close:
	// messages still arriving for them are turned away.
	closedCtx sync.Map

	mu        sync.Mutex
	comms     map[uint64]*Comm
	closeOnce sync.Once
	closeErr  error
}

// failure boxes an error for atomic.Pointer.
type failure struct{ err error }

// worldID is the context id of the world communicator.
const worldID = 1

// abortKey is the bootstrap key an aborting rank publishes its cause
// under, for ranks its connections no longer reach.
const abortKey = "comm/abort"

// abortNotifyTimeout bounds how long Abort tries to reach the others.
const abortNotifyTimeout = time.Second

func (w *world) failure() error {
	if f := w.fail.Load(); f != nil {
		return f.err
	}
	return nil
}

func (w *world) setFailure(err error) bool {
	return w.fail.CompareAndSwap(nil, &failure{err})
}

func newWorld(opts Options, log *slog.Logger) *world {
	w := &world{
		opts:  opts,
		log:   log.With("component", "comm", "job", opts.Job, "rank", opts.Rank),
		base:  log,
		rank:  opts.Rank,
		size:  opts.WorldSize,
		pid:   os.Getpid(),
		comms: make(map[uint64]*Comm),
	}
	w.ttl = opts.LeaseTTL
	if w.ttl == 0 {
		w.ttl = bootstrap.DefaultLeaseTTL
	}
	w.ttl = time.Duration(math.Ceil(w.ttl.Seconds())) * time.Second
	w.sendStage = stagePool{mem: &w.mem, what: "send"}
	w.recvStage = stagePool{mem: &w.mem, what: "receive"}
	w.life, w.endLife = context.WithCancel(context.Background())
	return w
}

// newComm registers a communicator over the given ranks of the job.
func (w *world) newComm(id uint64, ranks []int) (*Comm, error) {
	c := &Comm{w: w, id: id, rank: -1, ranks: ranks, member: make(map[int]int, len(ranks))}
	for i, r := range ranks {
		c.member[r] = i
		if r == w.rank {
			c.rank = i
		}
	}
	for _, r := range ranks {
		if w.peers[r].host == w.host {
			if r == w.rank {
				c.localRank = c.localSize
			}
			c.localSize++
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, dup := w.comms[id]; dup {
		return nil, fmt.Errorf("comm: rank %d: communicator id %#x is in use", w.rank, id)
	}
	w.comms[id] = c
	return c, nil
}

// commsWith returns the live communicators that rank belongs to.
func (w *world) commsWith(rank int) []*Comm {
	w.mu.Lock()
	defer w.mu.Unlock()
	var cs []*Comm
	for _, c := range w.comms {
		if _, ok := c.member[rank]; ok {
			cs = append(cs, c)
		}
	}
	return cs
}

// abort fails the job with this rank as the aborter: it tells every rank
// it can reach (over the control streams, and through the bootstrap for
// ranks those do not reach), waits a bounded time for the word to land,
// then takes every link down and fails every operation.
func (w *world) abort(cause error) {
	text := "aborted"
	if cause != nil {
		text = cause.Error()
	}
	if len(text) > maxCauseLen {
		text = text[:maxCauseLen]
	}
	ae := &AbortError{Rank: w.rank, Host: w.host, PID: w.pid, Cause: text, Err: cause}
	if !w.setFailure(ae) {
		return
	}
	w.log.Error("comm: aborting the job", "cause", text)
	for _, p := range w.peers {
		if !p.self {
			p.mu.Lock()
			p.queueAbortLocked([]byte(text))
			p.mu.Unlock()
			p.wake()
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), abortNotifyTimeout)
	defer cancel()
	var wg sync.WaitGroup
	if w.job != nil {
		for _, p := range w.peers {
			if !p.self {
				wg.Go(func() { _ = w.job.Put(ctx, p.rank, abortKey, []byte(text)) })
			}
		}
	}
	for _, p := range w.peers {
		for !p.self && ctx.Err() == nil {
			p.mu.Lock()
			done := p.down || p.abortLanded || !p.abortQueued
			p.mu.Unlock()
			if done {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	wg.Wait()
	w.failAll(ae)
}

// abortFrom handles another rank's abort.
func (w *world) abortFrom(ae *AbortError) {
	if !w.setFailure(ae) {
		return
	}
	w.log.Error("comm: the job was aborted", "by_rank", ae.Rank, "host", ae.Host, "pid", ae.PID, "cause", ae.Cause)
	w.failAll(ae)
}

// watchAborts waits for another rank's abort published through the
// bootstrap.
func (w *world) watchAborts(p *peer) {
	defer w.wg.Done()
	v, err := w.job.Get(w.life, p.rank, abortKey)
	if err != nil {
		return // the rank left, or this one is closing
	}
	w.abortFrom(&AbortError{Rank: p.rank, Host: p.host, PID: p.pid, Cause: string(v)})
}

// watchDepartures turns the bootstrap's departures into peer failures.
func (w *world) watchDepartures() {
	defer w.wg.Done()
	for err := range w.job.Departures() {
		w.departed(err)
	}
}

// close is Close of the world communicator: goodbyes, then release.
func (w *world) close() error {
	w.closeOnce.Do(func() {
		closed := fmt.Errorf("comm: rank %d: %w", w.rank, ErrClosed)
		w.quiet.Store(true)
		if w.setFailure(closed) {
			w.goodbye(closed)
		}
		w.closeErr = w.release(closed)
	})
	return w.closeErr
}

// goodbye fails the operations in progress, says goodbye to every peer
// and waits, at most CloseTimeout, for theirs: a rank that is still
// working can then send nothing more to this one, and nothing this rank
// sent before is cut off by its leaving.
func (w *world) goodbye(closed error) {
	for _, p := range w.peers {
		p.mu.Lock()
		p.closing = true
		p.cancelWhereLocked(closed, nil)
		if !p.self {
			p.queueByeLocked()
		}
		p.mu.Unlock()
		p.wake()
	}
	t := time.NewTimer(w.opts.CloseTimeout)
	defer t.Stop()
	for _, p := range w.peers {
		if p.self || p.ctl == nil {
			continue
		}
		select {
		case <-p.quiet:
		case <-t.C:
			w.log.Warn("comm: closing without the goodbye of every rank", "waited", w.opts.CloseTimeout)
			return
		}
	}
}

// release stops everything and frees every link, region, device and the
// job membership. It is also how a failed Init cleans up.
func (w *world) release(cause error) error {
	w.quiet.Store(true)
	var errs []error
	for _, p := range w.peers {
		p.mu.Lock()
		p.stop = true
		p.markDownLocked()
		p.mu.Unlock()
		p.wake()
	}
	for _, p := range w.peers {
		<-p.exited
	}
	var wg sync.WaitGroup
	var emu sync.Mutex
	keep := func(err error) {
		if err != nil {
			emu.Lock()
			errs = append(errs, err)
			emu.Unlock()
		}
	}
	for _, p := range w.peers {
		for _, l := range []link{p.ctl, p.bulk} {
			if l != nil {
				wg.Go(func() { keep(l.close()) })
			}
		}
	}
	wg.Wait()
	for _, p := range w.peers {
		p.mu.Lock()
		p.forgetRangesLocked() // the links are closed: nothing touches their memory
		p.checkQuietLocked()
		p.cancelWhereLocked(cause, nil)
		p.mu.Unlock()
	}
	keep(w.mem.close())
	for _, pd := range w.mem.pds {
		if pd != nil {
			keep(pd.Close())
		}
	}
	for _, d := range w.devs {
		if d != nil {
			keep(d.Close())
		}
	}
	if w.job != nil {
		ctx, cancel := context.WithTimeout(context.Background(), w.ttl+diagnoseGrace)
		if err := w.job.Close(ctx); err != nil {
			w.log.Warn("comm: leaving the job", "err", err)
		}
		cancel()
	}
	w.endLife()
	w.wg.Wait()
	var real []error
	for _, err := range errs {
		if !errors.Is(err, verbs.ErrClosed) {
			real = append(real, err)
		}
	}
	if len(real) > 0 {
		return fmt.Errorf("comm: rank %d: close: %w", w.rank, errors.Join(real...))
	}
	return nil
}

// logger returns the logger of a component below the communicator: the
// cell connections, a provider; "" for one that names itself (the
// bootstrap).
func (w *world) logger(component string) *slog.Logger {
	l := w.base
	if component != "" {
		l = l.With("component", component, "job", w.opts.Job, "rank", w.opts.Rank)
	}
	return slog.New(&closingFilter{inner: l.Handler(), quiet: &w.quiet})
}

// closingFilter drops warnings once its world is closing.
type closingFilter struct {
	inner slog.Handler
	quiet *atomic.Bool
}

func (h *closingFilter) Enabled(ctx context.Context, l slog.Level) bool {
	if h.quiet.Load() && l >= slog.LevelWarn && l < slog.LevelError {
		return false
	}
	return h.inner.Enabled(ctx, l)
}

func (h *closingFilter) Handle(ctx context.Context, r slog.Record) error {
	if h.quiet.Load() && r.Level >= slog.LevelWarn && r.Level < slog.LevelError {
		return nil
	}
	return h.inner.Handle(ctx, r)
}

func (h *closingFilter) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &closingFilter{inner: h.inner.WithAttrs(attrs), quiet: h.quiet}
}

func (h *closingFilter) WithGroup(name string) slog.Handler {
	return &closingFilter{inner: h.inner.WithGroup(name), quiet: h.quiet}
}
