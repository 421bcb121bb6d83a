package comm

import (
	"sync/atomic"
	"time"

	"github.com/rdmacell/rdmacell/cell"
	"github.com/rdmacell/rdmacell/cell/driver"
	"github.com/rdmacell/rdmacell/flight"
	"github.com/rdmacell/rdmacell/internal/hostseg"
)

// Stats is a snapshot of what this process's communicators did and hold,
// for programs that export it elsewhere (OpenTelemetry, logs); the
// metrics endpoint (Options.MetricsAddr) serves the same numbers. Every
// communicator of a process shares the peers, the memory and the flight
// recorder, so Stats of any of them returns the same.
//
// Counts of events (messages, cells, bytes, tokens, give-ups, resets)
// only grow while the process runs; the metrics serve them as counters.
// The other numbers (RTTs, queue depths, states, memory) say how things
// stand at the time of the snapshot.
type Stats struct {
	// Job, Rank and Host name this rank: its rank in the job (the world
	// communicator) and the host name it registered with.
	Job  string
	Rank int
	Host string
	// Ops are the latency histograms of the operations the flight
	// recorder counted, one per operation name and size class, in the
	// order each was first seen.
	Ops []OpStats
	// Peers has one entry per rank of the job, this one included (its
	// Transport is "self"), by rank.
	Peers []PeerStats
	// Traffic is what every connection of the process posted, by path
	// number.
	Traffic TrafficStats
	// Memory is the registered memory in use.
	Memory MemoryStats
}

// OpStats is the latency histogram of one operation and size class.
type OpStats struct {
	// Op names the operation, e.g. "AllReduce"; Size its size class, as
	// flight.SizeClassName names it ("le1KiB" ... "gt16MiB"), by the
	// bytes of this rank's vector; MaxBytes is the class's upper bound,
	// 0 for the last class, which has none.
	Op       string
	Size     string
	MaxBytes int64
	// Count is how many operations finished, Failed how many of those
	// failed, Sum their total latency.
	Count, Failed uint64
	Sum           time.Duration
	// Buckets[b] counts the operations that took more than
	// flight.BucketBound(b-1) and at most flight.BucketBound(b); the last
	// bucket counts every longer one too. They are not cumulative.
	Buckets [flight.NumBuckets]uint64
}

// PeerStats is this rank's view of one rank of the job.
type PeerStats struct {
	// Rank is the peer's rank in the job, Host the host name it
	// registered with, Transport how this rank reaches it: "shm", "tcp",
	// "ibv", or "self".
	Rank      int
	Host      string
	Transport string
	// Connected says its links are up: a peer is connected when an
	// operation first needs it. Err is why operations with it fail, ""
	// while it works.
	Connected bool
	Err       string
	// SentBytes and SentMessages count the messages sent to the peer that
	// completed, ReceivedBytes and ReceivedMessages those received from
	// it, on every channel (point-to-point, the collectives' ordered one,
	// every communicator's).
	SentBytes, SentMessages         uint64
	ReceivedBytes, ReceivedMessages uint64
	// LiveHandles is how many sends and receives with the peer are in
	// progress; ControlPending how many control messages (eager sends,
	// grants, credits) wait for a free control slot. Both are queue
	// depths: a peer that falls behind shows them growing.
	LiveHandles, ControlPending int
	// Links are the peer's two connections, the control link first, then
	// the bulk link; empty until it is connected, and for this rank.
	Links []LinkStats
}

// The names of a peer's links in LinkStats.Name.
const (
	LinkControl = "control"
	LinkBulk    = "bulk"
)

// LinkStats are the counters of one cell connection.
type LinkStats struct {
	// Name is LinkControl or LinkBulk.
	Name string
	// InFlight counts the ranges outstanding on the link, queued ones
	// included.
	InFlight int
	// CellsPosted counts cell copies posted, CellsReposted those among
	// them that went again after their path was given up.
	CellsPosted, CellsReposted uint64
	// TokensAccepted counts tokens that acknowledged a copy,
	// TokensStale those that matched nothing outstanding; TokensSent
	// counts the tokens this end sent for cells it received, Duplicates
	// those for a cell seen before, NACKsSent its refusals.
	TokensAccepted, TokensStale       uint64
	TokensSent, Duplicates, NACKsSent uint64
	// RangesSent and RangesReceived count the ranges (a control slot, a
	// message or a chunk of one) that moved whole, RangesFailed those
	// that failed.
	RangesSent, RangesReceived, RangesFailed uint64
	// GiveUps counts paths given up (on a soft timeout or an error),
	// Readmissions paths reset and usable again; ResetsStarted and
	// Resets count path resets begun and completed with the peer,
	// ResetsAgain attempts that failed and started over, DeadPaths the
	// paths closed for good.
	GiveUps, Readmissions                         uint64
	ResetsStarted, Resets, ResetsAgain, DeadPaths uint64
	// Holds counts ranges held at the receiver before a cell of theirs
	// went again; Keepalives rounds of probes sent while ranges were
	// outstanding and nothing completed.
	Holds, Keepalives uint64
	// Paths has one entry per path (queue pair) of the link.
	Paths []PathStats
}

// The states of a path in PathStats.State.
const (
	PathUp        = "up"
	PathSlow      = "slow"
	PathDown      = "down"
	PathResetting = "resetting"
	PathDead      = "dead"
)

// PathStats describes one path (queue pair) of a link.
type PathStats struct {
	// Index numbers the path in its link, from 0.
	Index int
	// State is PathUp (it carries cells), PathSlow (demoted: a cell on it
	// was late, and it takes no new cells until what it holds has
	// landed), PathResetting (given up, its reset under way), PathDown
	// (given up, waiting to be reset) or PathDead (closed for good).
	State string
	// CellsPosted and BytesPosted count every copy posted on the path,
	// re-posts included.
	CellsPosted, BytesPosted uint64
	// Tokens counts the tokens that acknowledged copies posted on it.
	Tokens uint64
	// SoftTimeouts counts the times a cell on the path waited past
	// T_soft, each of which demoted it, Promotions the times it was up
	// again once what it held had landed; GiveUps the times it was given
	// up (an error, its peer's request, or no progress at all while
	// demoted), and Resets its resets (completed or started over: the
	// incarnation of its queue pairs).
	SoftTimeouts, Promotions, GiveUps, Resets uint64
	// Reprobes counts the times the path had been left without cells on
	// measurements gone stale, and was probed again with one.
	Reprobes uint64
	// SRTT and RTTVar are the smoothed round-trip time and its mean
	// deviation, SoftTimeout T_soft, Delay the RTT without the time spent
	// behind earlier bytes on the path; Samples counts the RTT samples
	// since the path was last admitted. Before the first sample the
	// times derive from the configured initial RTT. LateMargin is how
	// long after its expected token a cell may wait before the path is
	// demoted, 0 while T_soft is that clock (see cell.PathInfo).
	SRTT, RTTVar, SoftTimeout, Delay, LateMargin time.Duration
	Samples                                      int
	// Bandwidth is the measured delivery rate in bytes per second, 0
	// until measured.
	Bandwidth int64
	// OutstandingCells and OutstandingBytes are posted and not yet
	// acknowledged; Credits is how many more cells the path may take.
	OutstandingCells int
	OutstandingBytes int64
	Credits          int
}

// TrafficStats is what every connection of the process posted.
type TrafficStats struct {
	// PathCells[i] and PathBytes[i] count the cells and bytes posted on
	// path i of any connection.
	PathCells, PathBytes []uint64
	// Reposts counts cells posted again after their path was given up,
	// ResetsStarted and Resets path resets begun and completed.
	Reposts, ResetsStarted, Resets uint64
}

// MemoryStats is the registered memory a process holds.
type MemoryStats struct {
	// UserBytes and UserRegions are what Alloc handed out and Free has
	// not taken back; RegisteredBytes and RegisteredRegions the
	// program's memory that Register registered and Unregister has not
	// released; InternalBytes and InternalRegions what the communicator
	// registered for itself (control slots, staging buffers).
	UserBytes         int64
	UserRegions       int
	RegisteredBytes   int64
	RegisteredRegions int
	InternalBytes     int64
	InternalRegions   int
	// SendStaging and ReceiveStaging are the staging buffers messages in
	// unregistered memory move through.
	SendStaging, ReceiveStaging StagingStats
	// HostSegmentBytes and HostSegments are the host memory this process
	// shares with the other ranks of its host (the collectives' segments,
	// one per group of ranks that all share the host).
	HostSegmentBytes int64
	HostSegments     int
}

// StagingStats describes one direction's staging buffers.
type StagingStats struct {
	// Bytes is the memory they take, 0 until first used; Buffers their
	// number once allocated, InUse how many hold a chunk now.
	Bytes          int64
	Buffers, InUse int
}

// peerCounts are a peer's message counters, added to when a send or
// receive completes (Handle.finishLocked), read by Stats without a lock.
type peerCounts struct {
	sentBytes, sentMsgs atomic.Uint64
	recvBytes, recvMsgs atomic.Uint64
}

// done counts a message of n bytes sent or received.
func (k *peerCounts) done(send bool, n int) {
	if send {
		k.sentBytes.Add(uint64(n))
		k.sentMsgs.Add(1)
	} else {
		k.recvBytes.Add(uint64(n))
		k.recvMsgs.Add(1)
	}
}

// Stats returns a snapshot of the process's operations, peers, links,
// paths and memory. It takes the locks the progress goroutines take, each
// briefly, and allocates: call it to export numbers, not on a hot path.
func (c *Comm) Stats() Stats {
	w := c.w
	s := Stats{Job: w.opts.Job, Rank: w.rank, Host: w.host}
	hs := w.rec.Histograms()
	hs.Each(func(name string, class int, h *flight.Histogram) {
		o := OpStats{Op: name, Size: flight.SizeClassName(class), Count: h.Count, Failed: h.Failed,
			Sum: h.Sum, Buckets: h.Buckets}
		if class < len(flight.SizeClasses) {
			o.MaxBytes = flight.SizeClasses[class]
		}
		s.Ops = append(s.Ops, o)
	})
	s.Peers = make([]PeerStats, len(w.peers))
	for i, p := range w.peers {
		s.Peers[i] = p.stats()
	}
	s.Traffic = w.trafficStats()
	s.Memory = w.memoryStats()
	return s
}

// stats is the peer's entry of Stats. The links are read after the
// peer's lock is released: they take their own.
func (p *peer) stats() PeerStats {
	ps := PeerStats{Rank: p.rank, Host: p.host, Transport: p.dev.String(),
		SentBytes: p.counts.sentBytes.Load(), SentMessages: p.counts.sentMsgs.Load(),
		ReceivedBytes: p.counts.recvBytes.Load(), ReceivedMessages: p.counts.recvMsgs.Load()}
	if p.self {
		ps.Transport = "self"
	}
	p.mu.Lock()
	ctl, bulk := p.ctl, p.bulk
	if p.err != nil {
		ps.Err = p.err.Error()
	}
	for h := p.live; h != nil; h = h.nextLive {
		ps.LiveHandles++
	}
	ps.ControlPending = p.pend.len()
	p.mu.Unlock()
	ps.Connected = ctl != nil && !p.self
	for i, l := range [...]link{ctl, bulk} {
		if l == nil {
			continue
		}
		ls := l.stats()
		ls.Name = [...]string{LinkControl, LinkBulk}[i]
		ps.Links = append(ps.Links, ls)
	}
	return ps
}

// stats converts the connection's snapshot into comm's own types.
func (l driverLink) stats() LinkStats {
	st := l.c.Stats()
	e := st.Engine
	ls := LinkStats{
		InFlight:    st.InFlight,
		CellsPosted: e.CellsPosted, CellsReposted: e.CellsReposted,
		TokensAccepted: e.TokensAccepted, TokensStale: e.TokensStale,
		TokensSent: e.TokensSent, Duplicates: e.Duplicates, NACKsSent: e.NACKsSent,
		RangesSent: e.RangesSent, RangesReceived: e.RangesReceived, RangesFailed: e.RangesFailed,
		GiveUps: e.GiveUps, Readmissions: e.Readmissions,
		ResetsStarted: st.ResetsStarted, Resets: st.Resets, ResetsAgain: st.ResetsAgain, DeadPaths: st.DeadPaths,
		Holds: e.Holds, Keepalives: st.Keepalives,
		Paths: make([]PathStats, len(st.Paths)),
	}
	for i, p := range st.Paths {
		ls.Paths[i] = pathStats(i, p)
	}
	return ls
}

func pathStats(i int, p driver.PathStats) PathStats {
	state := PathUp
	switch {
	case p.Dead || p.State == cell.PathDead:
		state = PathDead
	case p.Resetting:
		state = PathResetting
	case p.State == cell.PathSlow:
		state = PathSlow
	case p.State != cell.PathUp:
		state = PathDown
	}
	return PathStats{
		Index: i, State: state,
		CellsPosted: p.CellsPosted, BytesPosted: p.BytesPosted, Tokens: p.Tokens,
		SoftTimeouts: p.SoftTimeouts, Promotions: p.Promotions, GiveUps: p.GiveUps, Resets: uint64(p.Gen),
		Reprobes: p.Reprobes,
		SRTT:     p.SRTT, RTTVar: p.RTTVar, SoftTimeout: p.SoftTimeout, Delay: p.Delay, LateMargin: p.LateMargin, Samples: p.Samples,
		Bandwidth:        p.Bandwidth,
		OutstandingCells: p.Cells, OutstandingBytes: p.Bytes, Credits: p.Credits,
	}
}

// trafficStats reads the counters every connection adds to.
func (w *world) trafficStats() TrafficStats {
	k := &w.traffic
	n := w.opts.Paths
	t := TrafficStats{PathCells: make([]uint64, n), PathBytes: make([]uint64, n),
		Reposts: k.Reposts.Load(), ResetsStarted: k.ResetsStarted.Load(), Resets: k.Resets.Load()}
	for i := range n {
		t.PathCells[i], t.PathBytes[i] = k.Cells[i].Load(), k.Bytes[i].Load()
	}
	return t
}

// memoryStats sums the registered regions and the staging buffers.
func (w *world) memoryStats() MemoryStats {
	var m MemoryStats
	w.mem.mu.RLock()
	for _, r := range w.mem.byAddr {
		switch {
		case r.user:
			m.UserBytes += int64(r.n)
			m.UserRegions++
		case r.adopted:
			m.RegisteredBytes += int64(r.n)
			m.RegisteredRegions++
		default:
			m.InternalBytes += int64(r.n)
			m.InternalRegions++
		}
	}
	w.mem.mu.RUnlock()
	m.SendStaging, m.ReceiveStaging = w.sendStage.stats(), w.recvStage.stats()
	m.HostSegmentBytes, m.HostSegments = hostseg.Mapped()
	return m
}

func (s *stagePool) stats() StagingStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reg == nil {
		return StagingStats{}
	}
	return StagingStats{Bytes: int64(s.reg.n), Buffers: stageBuffers, InUse: stageBuffers - len(s.free)}
}
