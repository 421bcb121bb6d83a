package comm

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdmacell/rdmacell/bootstrap"
	"github.com/rdmacell/rdmacell/cell/driver"
	"github.com/rdmacell/rdmacell/flight"
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
	// metrics is the metrics endpoint, nil unless Options.MetricsAddr.
	metrics *metricsServer

	// rec is the flight recorder of the process's operations; traffic
	// what every connection posted, which it reads.
	rec     *flight.Recorder
	traffic driver.Counters
	// epoch counts the watchdog's ticks; watch is its state.
	epoch atomic.Uint64
	watch watchdog

	// life ends with Close; it stops the background goroutines.
	life    context.Context
	endLife context.CancelFunc
	wg      sync.WaitGroup
	// dialCtx ends when Close releases the links, and with it the dials
	// still under way, which dials counts.
	dialCtx context.Context
	endDial context.CancelFunc
	dials   sync.WaitGroup

	// fail, once set, fails every operation: an abort, or Close.
	fail atomic.Pointer[failure]

	// wild holds the receives from any rank that no message has taken
	// yet, and the probes waiting (wildcard.go).
	wild wildcards

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
	w.rec = flight.New(opts.FlightOps, w.readTraffic)
	w.ttl = opts.LeaseTTL
	if w.ttl == 0 {
		w.ttl = bootstrap.DefaultLeaseTTL
	}
	w.ttl = time.Duration(math.Ceil(w.ttl.Seconds())) * time.Second
	w.sendStage = stagePool{mem: &w.mem, what: "send"}
	w.recvStage = stagePool{mem: &w.mem, what: "receive"}
	w.life, w.endLife = context.WithCancel(context.Background())
	w.dialCtx, w.endDial = context.WithCancel(w.life)
	return w
}

// readTraffic reads what the connections posted, the paths past
// flight.MaxPaths counted with the last.
func (w *world) readTraffic() flight.Traffic {
	var t flight.Traffic
	k := &w.traffic
	for i := range w.opts.Paths {
		j := min(i, flight.MaxPaths-1)
		t.Cells[j] += k.Cells[i].Load()
		t.Bytes[j] += k.Bytes[i].Load()
	}
	t.Reposts, t.GiveUps, t.Resets = k.Reposts.Load(), k.ResetsStarted.Load(), k.Resets.Load()
	return t
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

// watchDepartures turns the bootstrap's departures into peer failures.
func (w *world) watchDepartures() {
	defer w.wg.Done()
	for err := range w.job.Departures() {
		w.departed(err)
	}
}
