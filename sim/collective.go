package sim

import (
	"fmt"
	"math"
)

// Collective is a training-shaped workload: every rank starts one
// collective operation at time 0 and its messages follow the schedule of
// package collectives, dependencies included, instead of Poisson
// arrivals. Ranks run one per host. Messages between two hosts share one
// QP (baselines) or one RDMACell connection, as the communicator keeps
// one connection per peer; they are posted in the order the rank issues
// them.
type Collective struct {
	// Kind is "allreduce" (ring: reduce-scatter, then all-gather, as
	// collectives/ring.go) or "alltoall" (pairwise exchange, as
	// collectives/pairwise.go).
	Kind string
	// Ranks is the number of ranks (default: every host).
	Ranks int
	// Bytes is each rank's buffer: the AllReduce vector, or the AllToAll
	// send buffer, of which each peer gets Bytes/Ranks.
	Bytes int64
	// Chunk is the ring's pipelining unit (default 256 KiB, the
	// collectives' DefaultChunkBytes); Window the pairwise steps kept in
	// flight (default 4, pairwiseWindow there). ElemSize is the element
	// size block boundaries fall on (default 4, float32).
	Chunk    int64
	Window   int
	ElemSize int64
	// Placement is "linear" (rank r on host r, as a launcher starting
	// ranks in host order; default) or "random" (a permutation drawn from
	// the run's seed, as a scheduler scattering the job).
	Placement string
}

// CollectiveKinds lists the kinds a Collective may name.
var CollectiveKinds = []string{"allreduce", "alltoall"}

// The events a message's successors wait for: its post by the sender
// (an algorithm issues its sends in order), its last byte landing at the
// receiver (the receiver may combine and forward it), and its completion
// at the sender (the sender may reuse the buffer: flush in the ring,
// waitSend in the pairwise window).
const (
	depStart = iota
	depArrive
	depDone
	depKinds
)

// schedule is a collective's messages as flows with their dependencies:
// flow j starts once need[j] of the events it waits for have happened.
type schedule struct {
	flows []Flow
	need  []int32
	// off[k][i] .. off[k][i+1] index into to[k] the flows waiting on
	// event k of flow i.
	off [depKinds][]int32
	to  [depKinds][]int32
}

type dep struct {
	from, to int32
	kind     uint8
}

func (c *Collective) defaults(hosts int) {
	if c.Ranks == 0 {
		c.Ranks = hosts
	}
	if c.Chunk == 0 {
		c.Chunk = 256 << 10
	}
	if c.Window == 0 {
		c.Window = 4
	}
	if c.ElemSize == 0 {
		c.ElemSize = 4
	}
	if c.Placement == "" {
		c.Placement = "linear"
	}
}

func (c *Collective) validate(hosts int) error {
	switch {
	case c.Kind != "allreduce" && c.Kind != "alltoall":
		return fmt.Errorf("collective %q, want one of %v", c.Kind, CollectiveKinds)
	case c.Chunk < 1 || c.Window < 1 || c.ElemSize < 1:
		return fmt.Errorf("collective chunk %d, window %d, element %d: want all >= 1", c.Chunk, c.Window, c.ElemSize)
	case c.Ranks < 2 || c.Ranks > hosts:
		return fmt.Errorf("collective of %d ranks on %d hosts, want 2..%d", c.Ranks, hosts, hosts)
	case c.Bytes < c.ElemSize:
		return fmt.Errorf("collective of %d bytes per rank, want at least one element (%d bytes)", c.Bytes, c.ElemSize)
	case c.Kind == "allreduce" && c.Bytes/c.ElemSize < int64(c.Ranks):
		return fmt.Errorf("ring allreduce of %d bytes over %d ranks leaves empty blocks, want at least %d bytes", c.Bytes, c.Ranks, int64(c.Ranks)*c.ElemSize)
	case c.Placement != "linear" && c.Placement != "random":
		return fmt.Errorf("placement %q, want linear or random", c.Placement)
	}
	return nil
}

// buildSchedule lays out the collective's flows and dependencies.
func (c *Collective) buildSchedule(seed uint64) *schedule {
	n := c.Ranks
	host := make([]int32, n)
	for r := range host {
		host[r] = int32(r)
	}
	if c.Placement == "random" {
		r := newRNG(seed ^ 0xc011)
		perm := make([]int32, n) // a random n-subset of the hosts, in random order
		for i := range perm {
			perm[i] = int32(i)
		}
		for i := n - 1; i > 0; i-- {
			j := r.intn(i + 1)
			perm[i], perm[j] = perm[j], perm[i]
		}
		copy(host, perm)
	}
	sc := &schedule{}
	var deps []dep
	add := func(src, dst int, size int64) int32 {
		sc.flows = append(sc.flows, Flow{Src: host[src], Dst: host[dst], Size: max(size, 1)})
		return int32(len(sc.flows) - 1)
	}
	after := func(from int32, kind uint8, to int32) { deps = append(deps, dep{from, to, kind}) }
	mod := func(a int) int { return ((a % n) + n) % n }
	// Block b is [off[b], off[b+1]), the elements split as evenly as
	// possible, the first total % n blocks one element longer
	// (run.offsets).
	total := c.Bytes / c.ElemSize
	off := make([]int64, n+1)
	for b := range n {
		cnt := total / int64(n)
		if int64(b) < total%int64(n) {
			cnt++
		}
		off[b+1] = off[b] + cnt*c.ElemSize
	}
	switch c.Kind {
	case "allreduce":
		cb := max(c.Chunk/c.ElemSize, 1) * c.ElemSize
		// chunks(b) are block b's pieces of at most cb bytes.
		chunks := func(b int) []int64 {
			var out []int64
			for lo := off[b]; lo < off[b+1]; lo += cb {
				out = append(out, min(cb, off[b+1]-lo))
			}
			return out
		}
		// A ring phase: rank r first sends the chunks of block own(r),
		// then, for each chunk it receives at step s (block
		// first(r) − s) but the last step's, forwards the combined chunk.
		// Sends are issued in order; the k-th message from r−1 is r's
		// k-th receive. gate[r], if not nil, holds what r's first send
		// waits for.
		phase := func(own, first func(r int) int, gate [][]dep) [][]int32 {
			sends := make([][]int32, n)
			nOwn := make([]int, n)
			for r := range n {
				for _, sz := range chunks(own(r)) {
					sends[r] = append(sends[r], add(r, mod(r+1), sz))
				}
				nOwn[r] = len(sends[r])
				for s := 0; s < n-2; s++ {
					for _, sz := range chunks(mod(first(r) - s)) {
						sends[r] = append(sends[r], add(r, mod(r+1), sz))
					}
				}
			}
			for r := range n {
				// Forward i carries receive i, (r−1)'s send i, combined.
				left := mod(r - 1)
				for i := nOwn[r]; i < len(sends[r]); i++ {
					after(sends[left][i-nOwn[r]], depArrive, sends[r][i])
				}
				for i := 1; i < len(sends[r]); i++ {
					after(sends[r][i-1], depStart, sends[r][i])
				}
				for _, d := range gate[r] {
					after(d.from, d.kind, sends[r][0])
				}
			}
			return sends
		}
		none := make([][]dep, n)
		rs := phase(func(r int) int { return mod(r - 1) }, func(r int) int { return mod(r - 2) }, none)
		// The all-gather starts once the reduce-scatter has returned:
		// every receive combined (the last ones into the rank's own
		// block) and every send completed (flush).
		gate := make([][]dep, n)
		for r := range n {
			for _, f := range rs[mod(r-1)] {
				gate[r] = append(gate[r], dep{from: f, kind: depArrive})
			}
			for _, f := range rs[r] {
				gate[r] = append(gate[r], dep{from: f, kind: depDone})
			}
		}
		phase(func(r int) int { return r }, func(r int) int { return mod(r - 1) }, gate)
	case "alltoall":
		// Step s (1..n−1): rank r sends block r+s to r+s. Before step
		// s > Window it waits for step s − Window: that step's receive
		// (from r − (s − Window)) and its send.
		at := make([][]int32, n) // at[r][s]
		for r := range n {
			at[r] = make([]int32, n)
			for s := 1; s < n; s++ {
				to := mod(r + s)
				at[r][s] = add(r, to, off[to+1]-off[to])
			}
		}
		for r := range n {
			for s := 2; s < n; s++ {
				after(at[r][s-1], depStart, at[r][s])
				if w := s - c.Window; w >= 1 {
					after(at[mod(r-w)][w], depArrive, at[r][s])
					after(at[r][w], depDone, at[r][s])
				}
			}
		}
	}
	sc.need = make([]int32, len(sc.flows))
	for k := range depKinds {
		sc.off[k] = make([]int32, len(sc.flows)+1)
	}
	for _, d := range deps {
		sc.need[d.to]++
		sc.off[d.kind][d.from+1]++
	}
	for k := range depKinds {
		for i := range sc.flows {
			sc.off[k][i+1] += sc.off[k][i]
		}
		sc.to[k] = make([]int32, sc.off[k][len(sc.flows)])
	}
	fill := [depKinds][]int32{}
	for k := range depKinds {
		fill[k] = append([]int32(nil), sc.off[k][:len(sc.flows)]...)
	}
	for _, d := range deps {
		sc.to[d.kind][fill[d.kind][d.from]] = d.to
		fill[d.kind][d.from]++
	}
	return sc
}

// fire resolves event kind of flow i: the flows it completes the
// prerequisites of are handed to ready.
func (sc *schedule) fire(kind int, i int32, ready func(int32)) {
	for _, j := range sc.to[kind][sc.off[kind][i]:sc.off[kind][i+1]] {
		if sc.need[j]--; sc.need[j] == 0 {
			ready(j)
		}
	}
}

// collEvent tells the simulation that event kind of flow i happened.
func (s *Sim) collEvent(kind int, i int32) {
	if s.sched == nil {
		return
	}
	s.sched.fire(kind, i, func(j int32) {
		s.flows[j].Start = s.now
		s.ev.push(s.now, evFlowStart, j, 0)
	})
}

// flowArrived records that flow i's last byte landed at its receiver.
func (s *Sim) flowArrived(i int32) {
	if s.flows[i].Arrive == 0 {
		s.flows[i].Arrive = max(s.now, s.flows[i].Start+1)
		if s.sched != nil {
			s.left--
		}
		s.collEvent(depArrive, i)
	}
}

// idealCollective is the collective's completion time on a fabric with
// no contention: each host's NIC sends its messages in the order they
// become ready, at line rate, and receives at line rate; a message's last
// packet then crosses the path's links and switches (store-and-forward)
// and its acknowledgement comes back; dependencies as in the schedule.
// This is the ideal the slowdown of a collective is measured against.
func (s *Sim) idealCollective(sc *schedule) int64 {
	cfg := &s.cfg
	need := append([]int32(nil), sc.need...)
	tx := make([]float64, s.f.hosts)
	rx := make([]float64, s.f.hosts)
	var q eventHeap
	nsPerByte := 8 / cfg.Gbps
	pkt := float64(cfg.MTU+cfg.Header) * nsPerByte
	// at[i] are flow i's start, arrival and completion times, exact in
	// float and rounded only when queued.
	at := make([][depKinds]float64, len(sc.flows))
	ready := func(j int32, t float64) {
		fl := &sc.flows[j]
		h := s.f.hops(fl.Src, fl.Dst)
		pkts := (fl.Size + int64(cfg.MTU) - 1) / int64(cfg.MTU)
		wire := float64(fl.Size+pkts*int64(cfg.Header)) * nsPerByte
		start := max(t, tx[fl.Src])
		tx[fl.Src] = start + wire
		arrive := tx[fl.Src] + float64(h)*float64(cfg.LinkDelay) + float64(h-1)*pkt
		arrive = max(arrive, rx[fl.Dst]+wire)
		rx[fl.Dst] = arrive
		done := arrive + float64(h)*float64(cfg.LinkDelay)
		at[j] = [depKinds]float64{t, arrive, done}
		for k := range depKinds {
			q.push(int64(math.Ceil(at[j][k])), evKind(k), j, 0)
		}
	}
	for j := range sc.flows {
		if need[j] == 0 {
			ready(int32(j), 0)
		}
	}
	end := 0.0
	for q.len() > 0 {
		e := q.pop()
		k, i := int(e.kind), e.a
		end = max(end, at[i][k])
		for _, j := range sc.to[k][sc.off[k][i]:sc.off[k][i+1]] {
			if need[j]--; need[j] == 0 {
				ready(j, at[i][k])
			}
		}
	}
	return int64(math.Ceil(end))
}

// CollectiveResult is what a collective run measured.
type CollectiveResult struct {
	// Op is the collective run, defaults filled in.
	Op Collective
	// Time is when the last rank finished (every message landed and
	// complete at its sender), Ideal the same without contention (see
	// idealCollective), Slowdown their ratio.
	Time, Ideal int64
	Slowdown    float64
	// Messages is the number of messages, Unfinished those that never
	// completed; MsgSlowdown summarizes each message's FCT slowdown from
	// its post.
	Messages, Unfinished int
	MsgSlowdown          Summary
	Stats                Stats
}

// CollectiveResult computes a collective run's metrics.
func (s *Sim) CollectiveResult() CollectiveResult {
	r := CollectiveResult{Op: *s.cfg.Collective, Messages: len(s.flows), Ideal: s.ideal, Stats: s.st}
	var sd []float64
	for i := range s.flows {
		fl := &s.flows[i]
		if fl.Finish == 0 || fl.Arrive == 0 {
			r.Unfinished++
			continue
		}
		r.Time = max(r.Time, fl.Finish, fl.Arrive)
		sd = append(sd, max(1, float64(fl.Finish-fl.Start)/s.cfg.Ideal(fl.Size, s.f.hops(fl.Src, fl.Dst))))
	}
	r.MsgSlowdown = summarize(sd)
	if r.Unfinished > 0 {
		r.Time = 0
	}
	if r.Ideal > 0 && r.Time > 0 {
		r.Slowdown = float64(r.Time) / float64(r.Ideal)
	}
	return r
}
