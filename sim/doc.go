// Package sim is a packet-level discrete-event simulator of RoCEv2
// fabrics: fat-tree and leaf-spine topologies of shared-buffer switches
// with ECN marking at dequeue, optional PFC and per-switch-seeded ECMP,
// host NICs with RC Go-Back-N and DCQCN, and the load balancers RDMACell is measured
// against (ECMP, LetFlow, CONGA, HULA, ConWeave). RDMACell itself is the
// project's cell.Engine, unchanged, driven on simulated QPs and virtual
// time: every work-request chain it posts becomes packets of a QP with its
// own UDP source port, hence its own ECMP path, and its tokens, grants and
// finals travel as small RDMA writes on the reverse direction of the same
// QP. As in the runtime, where two ranks keep one connection, a host
// pair's flows share one long-lived RDMACell connection, over which
// they go in arrival order and whose paths keep what they measured; a
// fresh connection per flow, the baselines' QP per flow, is the
// comparison model (Config.Conn).
//
// Time is an int64 count of nanoseconds; serialization is exact to the
// picosecond through a per-port remainder. Events are values in a timing
// wheel of one-nanosecond slots backed by a 4-ary heap for the far ones,
// ordered by (time, sequence number); packets are 64-byte values in a
// pooled slice, named by index: the hot path allocates nothing. A run is
// deterministic for its Config (seed included).
//
// RDMACell's soft timeout (T_soft, the engine's RTT estimate with a
// floor) is what moves a cell off a path that is slow or broken. In a
// lossy fabric the floor is the engine's 1 ms. With PFC nothing is lost,
// so a timeout cannot recover anything that waiting would not, and with a
// 1 ms floor it fired on cells still at their sender, paced down by DCQCN
// on a busy NIC: the floor is then the longest a cell can take with
// nothing lost, derived from the fabric (Config.MinSoftTimeout).
//
// Workloads are flow-size CDFs with Poisson arrivals per host and uniform
// destinations, measured by FCT slowdown, FCT over the ideal FCT of the
// flow alone on an empty fabric (see Ideal); or collectives (ring
// AllReduce, pairwise AllToAll) scheduled as package collectives runs
// them, measured by completion time over the time without contention
// (see Collective).
package sim
