package sim

import (
	"fmt"
	"math"
	"slices"
)

// Schemes lists the load-balancing schemes a Config may name. The
// rdmacell ones run cell.Engine over Paths QPs per host pair with the
// engine's Adaptive, ECMP (one primary QP, the next one on a timeout: the
// paper's policy) or Spray placement.
var Schemes = []string{"ecmp", "letflow", "conga", "hula", "conweave", "rdmacell", "rdmacell-ecmp", "rdmacell-spray"}

// ConnModels lists the connection models a Config may name (see
// Config.Conn).
var ConnModels = []string{"pair", "flow"}

// Config describes one run. Zero fields take the defaults of the paper's
// setting (see Defaults).
type Config struct {
	Topology Topology
	// Gbps is every link's rate, LinkDelay its propagation in ns.
	Gbps      float64
	LinkDelay int64
	// BufferPerPort sizes each switch's shared buffer (ports × this);
	// an egress queue may hold at most the free part of the pool.
	BufferPerPort int64
	// ECN marking at dequeue: probability rises linearly from 0 at Kmin
	// bytes queued to Pmax at Kmax, and is 1 above Kmax.
	Kmin, Kmax int64
	Pmax       float64
	// MTU is the payload per packet, Header the bytes each adds, AckSize
	// an ACK/NACK's size on the wire.
	MTU, Header, AckSize int
	// RTO is the Go-Back-N retransmission timeout (default 500 µs, 4 ms
	// with PFC).
	RTO int64
	// NoDCQCN leaves every QP at line rate.
	NoDCQCN bool
	// DCQCNKeepTarget keeps DCQCN's target rate through a burst of cuts
	// (CLAMP_TARGET_RATE 0 in the ConWeave setting; see dcqcn). Off,
	// every cut clamps the target to the current rate, and a QP cut to a
	// few Gb/s takes hundreds of milliseconds to climb back: harmless
	// with a QP per flow, which starts at line rate, but a long-lived
	// QP carries its cut to the flows after.
	DCQCNKeepTarget bool
	// PFC makes the fabric lossless: switches pause their upstream
	// neighbours' data class per ingress port instead of dropping (see
	// pfc.go). Off, the egress queues drop what the shared buffer cannot
	// take and Go-Back-N recovers.
	PFC bool

	Scheme string
	// Workload and Load drive Poisson arrivals per host; Flows, when set,
	// replaces them with an explicit list.
	Workload *Workload
	Load     float64
	Flows    []Flow
	// Collective, when set, replaces both: every rank runs one collective
	// operation from time 0 (see Collective).
	Collective *Collective
	// Flows start in [0, Duration); those starting before Warmup are not
	// counted. The run lasts until every flow is done or Duration+Drain.
	Duration, Warmup, Drain int64
	Seed                    uint64

	// RDMACell: Paths QPs per host pair, cells of CellBDP × BDP bytes
	// (negative: the engine's adaptive sizing), QPReset the time to take a QP
	// through ERR..RTS with its peer, RecvLead how long before a flow
	// starts its receiver posts the range.
	Paths      int
	CellBDP    float64
	BDP        int64
	QPReset    int64
	RecvLead   int64
	InitialRTT int64
	// MinSoftTimeout is the floor of the engine's T_soft: 1 ms lossy;
	// with PFC, by default, the lossless bound of losslessSoftFloor.
	MinSoftTimeout int64
	// SoftBackoff is the engine's MaxSoftBackoff (0: its default; 1: no
	// back-off, the engine before it had one).
	SoftBackoff int
	// Conn is how a workload's flows map to connections. "pair": one
	// long-lived connection per host pair, as a communicator keeps one
	// per peer; a pair's flows go over it in arrival order. For RDMACell
	// its receiver keeps their ranges posted ahead, as the
	// communicator's staging does, and its paths keep what they measured
	// from one flow to the next; for a baseline it is one QP per pair.
	// "flow": a fresh connection (a baseline's QP) per flow, set up
	// before it starts and closed once it is done. Empty: pair for
	// RDMACell, flow for the baselines (the paper's setting: a QP per
	// flow). A collective always runs on pair connections.
	Conn string
	// TokenPrio puts the receiver end's QPs (tokens, grants, finals: a
	// connection carries one direction) in the strict-priority class the
	// RC ACKs use; each end sets its own QP's traffic class, so this is a
	// deployment choice, not a protocol change. Off, tokens queue behind
	// data at every hop.
	TokenPrio bool
}

// Defaults fills zero fields with the paper's setting: K=8 fat-tree,
// 100 Gbps, 1 µs per hop, 2 MB per port, ECN 100/400 KB with Pmax 0.2,
// 1000 B payload plus 48 B of headers, 4 QPs per pair for RDMACell and
// cells of 1.5 × BDP.
func (c *Config) Defaults() {
	if c.Topology.Kind == "" {
		c.Topology = Topology{Kind: "fattree", K: 8}
	}
	def := func(p *int64, v int64) {
		if *p == 0 {
			*p = v
		}
	}
	if c.Gbps == 0 {
		c.Gbps = 100
	}
	def(&c.LinkDelay, 1000)
	def(&c.BufferPerPort, 2<<20)
	def(&c.Kmin, 100_000)
	def(&c.Kmax, 400_000)
	if c.Pmax == 0 {
		c.Pmax = 0.2
	}
	if c.MTU == 0 {
		c.MTU = 1000
	}
	if c.Header == 0 {
		c.Header = 48
	}
	if c.AckSize == 0 {
		c.AckSize = 60
	}
	if c.PFC {
		// Lossless: a pause stretches an RTT far past the lossy RTO,
		// and a spurious timeout costs a Go-Back-N of the whole window
		// (the ConWeave setting: 4 ms with PFC).
		def(&c.RTO, 4_000_000)
	}
	def(&c.RTO, 500_000)
	if c.Scheme == "" {
		c.Scheme = "ecmp"
	}
	if c.Load == 0 {
		c.Load = 0.5
	}
	def(&c.Duration, 10_000_000)
	def(&c.Drain, 50_000_000)
	if c.Paths == 0 {
		c.Paths = 4
	}
	if c.Conn == "" {
		c.Conn = "flow"
		if c.rdmacell() || c.Collective != nil {
			c.Conn = "pair"
		}
	}
	switch {
	case c.CellBDP == 0:
		c.CellBDP = 1.5
	case c.CellBDP < 0:
		c.CellBDP = 0 // the engine sizes cells itself
	}
	def(&c.BDP, 156_000)
	def(&c.QPReset, 100_000)
	def(&c.RecvLead, 1_000_000)
	def(&c.InitialRTT, 100_000)
	if !c.PFC {
		def(&c.MinSoftTimeout, 1_000_000)
	}
	// With PFC, New sets it from the fabric it builds (losslessSoftFloor).
}

// cellBytes is the RDMACell flowcell size, CellBDP × BDP rounded up to
// whole packets, or 0 when the engine sizes cells itself.
func (c *Config) cellBytes() int64 {
	if c.CellBDP <= 0 {
		return 0
	}
	mtu := int64(c.MTU)
	return max(mtu, (int64(c.CellBDP*float64(c.BDP))+mtu-1)/mtu*mtu)
}

// adaptiveMaxCell is the largest cell the engine sizes itself, the
// default of cell.Config.MaxCellSize, which the simulator leaves as is.
const adaptiveMaxCell = 4 << 20

// losslessSoftFloor is the floor of T_soft in a lossless fabric: the
// longest a cell can take with nothing lost, over a path of hops links.
// With PFC no packet is dropped, so a soft timeout cannot recover
// anything a slow path would not deliver; it can only move a cell that
// was on its way, reset a QP and start a fresh one at line rate. Measured
// at K=4, 80 % AliStorage, 10 ms, with the 1 ms floor (bench/sim/README.md,
// "Lossless"): 98 % of the soft timeouts found the cell's packets not all
// sent yet by its QP, half of them paced by DCQCN at 2.2 Gb/s or less (a
// tenth at its 0.1 Gb/s floor), with the NIC shared by 45 connections
// (median); 84 % came before the path had any RTT sample, and 13 % while
// the host's port was paused. The sender's pacing made the cells late,
// not lost packets nor a var that collapsed between pauses. So the bound
// is what a cell may spend in each place: its packets paced at DCQCN's
// minimum rate, then at every hop a full port buffer ahead of it (what
// PFC lets a port hold), and the propagation there and back (tokens
// cross in the control class, which PFC never pauses, with TokenPrio).
// Adaptive cells are bounded by the engine's largest.
// A QP whose host NIC is shared by more connections than line rate over
// the minimum rate can be slower still; the engine's back-off covers it.
func (c *Config) losslessSoftFloor(hops int) int64 {
	n := c.cellBytes()
	if n == 0 {
		n = adaptiveMaxCell
	}
	mtu := int64(c.MTU)
	wire := (n + mtu - 1) / mtu * (mtu + int64(c.Header))
	ns := float64(wire)*8/dcMinRate + float64(hops)*(float64(c.BufferPerPort)*8/c.Gbps+2*float64(c.LinkDelay))
	return int64(math.Ceil(ns))
}

func (c *Config) validate() error {
	if !slices.Contains(Schemes, c.Scheme) {
		return fmt.Errorf("scheme %q, want one of %v", c.Scheme, Schemes)
	}
	if c.Flows == nil && c.Workload == nil && c.Collective == nil {
		return fmt.Errorf("no workload and no flows")
	}
	if c.Load <= 0 || c.Load > 1 {
		return fmt.Errorf("load %v, want (0, 1]", c.Load)
	}
	if c.MTU < 1 || c.Header < 0 || c.MTU+c.Header > math.MaxUint16 || c.AckSize < 1 || c.AckSize > math.MaxUint16 {
		return fmt.Errorf("MTU %d + header %d, ACK %d: want packets of 1..%d bytes", c.MTU, c.Header, c.AckSize, math.MaxUint16)
	}
	if !slices.Contains(ConnModels, c.Conn) {
		return fmt.Errorf("connection model %q, want one of %v", c.Conn, ConnModels)
	}
	if c.Conn == "flow" && c.Collective != nil {
		return fmt.Errorf("a collective runs on pair connections, not one per message")
	}
	if c.Paths < 1 || c.Paths > 64 {
		return fmt.Errorf("paths %d, want 1..64", c.Paths)
	}
	return nil
}

func (c *Config) rdmacell() bool { return len(c.Scheme) >= 8 && c.Scheme[:8] == "rdmacell" }
