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
	Paths          int
	CellBDP        float64
	BDP            int64
	QPReset        int64
	RecvLead       int64
	InitialRTT     int64
	MinSoftTimeout int64
	// SoftBackoff is the engine's MaxSoftBackoff (0: its default; 1: no
	// back-off, the engine before it had one).
	SoftBackoff int
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
	def(&c.MinSoftTimeout, 1_000_000)
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
	if c.Paths < 1 || c.Paths > 64 {
		return fmt.Errorf("paths %d, want 1..64", c.Paths)
	}
	return nil
}

func (c *Config) rdmacell() bool { return len(c.Scheme) >= 8 && c.Scheme[:8] == "rdmacell" }
