package sim

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// Flow is one message from Src to Dst of Size bytes, starting at Start.
// Run fills Finish (0 if it never completed).
type Flow struct {
	Src, Dst int32
	Size     int64
	Start    int64
	Finish   int64
	// Arrive is when its last byte landed at Dst (for RDMACell, when the
	// receiver's range was handed back); Finish when Src saw it complete.
	Arrive int64
	qp     int32
}

// Sim is one run. Build it with New, then Run.
type Sim struct {
	cfg   Config
	now   int64
	seq   uint64 // of the event being handled
	ev    eventQueue
	rng   rng
	pl    pool
	f     *fabric
	hosts []host
	qps   []qp
	// lbs[qp] is the switches' state for the QP's flow, for the schemes
	// that keep some (nil for the others).
	lbs   []lbState
	freeQ []int32
	flows []Flow

	// order lists the flows by start time: their arrivals (and receive
	// posts) are queued one at a time along it, each with the sequence
	// number reserved for it (feedSeq + feedPer·flow), so that the queue
	// holds one pending arrival rather than all of them.
	order   []int32
	feedSeq uint64
	feedPer int

	lb     balancer
	cells  *cellDriver
	hula   *hula
	stopAt int64
	// pfcHdrm is the headroom per ingress port, 0 without PFC.
	pfcHdrm int64
	// sched is the running collective, if any, ideal its completion time
	// without contention; pairQP[src·hosts+dst] is the QP every message
	// of a host pair shares in a collective or with Conn "pair"
	// (baseline schemes).
	sched  *schedule
	ideal  int64
	pairQP map[int32]int32
	left   int   // flows not finished
	touch  uint8 // the sum of packet bytes Run reads ahead (see Run)

	st Stats
}

// Stats counts what happened in a run.
type Stats struct {
	Events                uint64
	DataPkts, CtrlPkts    uint64
	Drops, DropBytes      uint64
	Timeouts, Nacks       uint64
	BytesSent, BytesAcked int64
	Retransmits           uint64
	Reordered             uint64 // ConWeave: packets held at the destination ToR
	PathResets            uint64 // RDMACell: QPs given up and reset
	CellsReposted         uint64
	MaxQueue              int64
	Pauses                uint64 // PFC PAUSE frames sent
	PausedNs              int64  // PFC: total time ports spent paused
	Wall                  time.Duration
	SimTime               int64
	Unfinished            int
}

// New builds a run from cfg (after Defaults).
func New(cfg Config) (*Sim, error) {
	cfg.Defaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	f, err := buildFabric(cfg.Topology, cfg.Gbps, cfg.LinkDelay)
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	if cfg.MinSoftTimeout == 0 {
		// Only PFC leaves it unset (Defaults).
		cfg.MinSoftTimeout = cfg.losslessSoftFloor(f.diameter())
	}
	s := &Sim{cfg: cfg, f: f, rng: newRNG(cfg.Seed), hosts: make([]host, f.hosts)}
	if cfg.PFC {
		s.pfcHdrm = cfg.pfcHeadroom()
		if pool := cfg.BufferPerPort - s.pfcHdrm; pool <= 0 {
			return nil, fmt.Errorf("sim: PFC headroom %d B per port leaves no shared buffer of %d B per port", s.pfcHdrm, cfg.BufferPerPort)
		}
	}
	switch {
	case cfg.Collective != nil:
		c := *cfg.Collective
		c.defaults(f.hosts)
		if err := c.validate(f.hosts); err != nil {
			return nil, fmt.Errorf("sim: %w", err)
		}
		s.cfg.Collective = &c
		s.sched = c.buildSchedule(cfg.Seed)
		s.flows = s.sched.flows
		s.ideal = s.idealCollective(s.sched)
	case cfg.Flows != nil:
		s.flows = append([]Flow(nil), cfg.Flows...)
	default:
		s.flows = cfg.Workload.Generate(f.hosts, cfg.Load, cfg.Gbps, cfg.Duration, cfg.Seed)
	}
	if cfg.Conn == "pair" && !cfg.rdmacell() {
		s.pairQP = map[int32]int32{}
	}
	for i := range s.flows {
		fl := &s.flows[i]
		if fl.Src == fl.Dst || fl.Src < 0 || fl.Dst < 0 || int(fl.Src) >= f.hosts || int(fl.Dst) >= f.hosts || fl.Size < 1 {
			return nil, fmt.Errorf("sim: flow %d: %d → %d of %d bytes: want distinct hosts in 0..%d and size >= 1", i, fl.Src, fl.Dst, fl.Size, f.hosts-1)
		}
		fl.Finish, fl.Arrive, fl.qp = 0, 0, -1
	}
	s.left = len(s.flows)
	if s.sched != nil {
		// A collective is over when every message is complete at both
		// ends: an RDMACell receiver learns of a range after its sender.
		s.left *= 2
	}
	s.lb = newBalancer(s)
	switch cfg.Scheme {
	case "letflow", "conga", "hula", "conweave":
		s.lbs = []lbState{}
	}
	if cfg.rdmacell() {
		d, err := newCellDriver(s)
		if err != nil {
			return nil, fmt.Errorf("sim: %w", err)
		}
		s.cells = d
	}
	if s.sched != nil {
		// Messages start as their prerequisites are met; receivers have
		// their connections open, buffers posted, from the start.
		for i := range s.flows {
			if s.sched.need[i] == 0 {
				s.ev.push(0, evFlowStart, int32(i), 0)
			}
		}
		if s.cells != nil {
			s.cells.openPairs()
		}
		return s, nil
	}
	s.order = make([]int32, len(s.flows))
	for i := range s.order {
		s.order[i] = int32(i)
	}
	slices.SortStableFunc(s.order, func(a, b int32) int { return cmp.Compare(s.flows[a].Start, s.flows[b].Start) })
	s.feedPer = 1
	if s.cells != nil {
		s.feedPer = 2
		s.cells.queueFlows(s.order)
	}
	s.feedSeq = s.ev.reserve(s.feedPer * len(s.flows))
	s.feed(evFlowStart, 0)
	s.feed(evRecvPost, 0)
	return s, nil
}

// feed queues the arrival (or, for RDMACell, the receive post) of the
// k-th flow to start.
func (s *Sim) feed(kind evKind, k int32) {
	if int(k) >= len(s.order) || (kind == evRecvPost && s.cells == nil) {
		return
	}
	i := s.order[k]
	e := event{at: s.flows[i].Start, seq: s.feedSeq + uint64(s.feedPer)*uint64(i), kind: kind, a: i, b: k}
	if kind == evRecvPost {
		e.at = max(0, e.at-s.cfg.RecvLead)
		e.seq++
	}
	s.ev.pushSeq(e)
}

// Run simulates until every flow is done or the time limit.
func (s *Sim) Run() {
	t0 := time.Now()
	s.stopAt = s.cfg.Duration + s.cfg.Drain
	for s.ev.len() > 0 && s.left > 0 {
		e := s.ev.pop()
		if e.at > s.stopAt {
			break
		}
		s.now, s.seq = e.at, e.seq
		s.st.Events++
		// A packet is first read long after it was written (a queue, a
		// link): its cache miss was a fifth of the run. Reading the next
		// event's packet now lets the processor wait for it while it
		// handles this one.
		if nx := s.ev.peek(); nx != nil && nx.kind == evArrive {
			s.touch += s.pl.p[nx.a].flags
		}
		s.dispatch(&e)
	}
	s.st.Wall = time.Since(t0)
	s.st.SimTime = s.now
	s.st.Unfinished = s.left
	for i := range s.f.ports {
		s.st.MaxQueue = max(s.st.MaxQueue, s.f.ports[i].maxQ)
	}
	if s.cells != nil {
		s.cells.stats(&s.st)
	}
}

func (s *Sim) dispatch(e *event) {
	switch e.kind {
	case evTxDone:
		s.f.ports[e.a].txPending = false
		s.txStart(e.a)
	case evArrive:
		s.arrive(e.a, e.b)
	case evNicWake:
		h := &s.hosts[e.a]
		h.wakeAt = 0
		pi := s.f.nodes[e.a].ports[0]
		s.kick(pi)
	case evRTO:
		s.rto(e.a)
	case evFlowStart:
		if s.sched == nil {
			s.feed(evFlowStart, e.b+1)
		}
		s.startFlow(e.a)
	case evRecvPost:
		s.feed(evRecvPost, e.b+1)
		s.cells.event(e)
	case evTick, evPathDown, evPathUp:
		s.cells.event(e)
	case evProbe:
		s.hula.originate(e.a)
	case evFlush:
		s.lb.(*conweave).flushTimer(e.a, e.b)
	}
}

// Flows returns the run's flows with their finish times.
func (s *Sim) Flows() []Flow { return s.flows }

// Stats returns the run's counters.
func (s *Sim) Stats() Stats { return s.st }

// Hosts is the number of hosts of the fabric.
func (s *Sim) Hosts() int { return s.f.hosts }

// flowDone records a flow's completion.
func (s *Sim) flowDone(i int32) {
	if s.flows[i].Finish == 0 {
		s.flows[i].Finish = max(s.now, s.flows[i].Start+1)
		s.left--
		s.collEvent(depDone, i)
	}
}
