// Package collectives is what a program of the job calls: a Group of
// ranks, the collective operations over it (AllReduce, AllGather,
// AllGatherV, ReduceScatter, ReduceScatterV, AllToAll, AllToAllV,
// Broadcast, Reduce, Gather, GatherV, Scatter, ScatterV and Barrier), and
// its messages (Send, Recv, Sendrecv, Isend, Irecv, Probe). The
// collectives run over a communicator's point-to-point layer, comm.P2P,
// or, when every rank is on one host, through memory the ranks share.
//
// # Use
//
// Open joins the job and returns a group that owns its communicator:
//
//	g, err := collectives.Open(ctx, collectives.Options{}) // from the launcher's environment
//	...
//	defer g.Close()
//	err = collectives.AllReduce(ctx, g, grads, grads, collectives.Avg)
//
// Split and Shrink return groups of the same kind. New makes a group over
// a P2P the caller keeps (Comm.P2P, or another implementation); closing
// it leaves the P2P open.
//
// The collectives are generic over the element types float32, float64,
// int32, int64, uint8, Float16 and BFloat16, and the reducing ones take an
// Op: Sum, Prod, Min, Max or Avg. Each has a non-blocking form (IAllReduce
// and so on) that returns a Request to Wait for or Test, so that a
// training loop can overlap communication with computation, as Isend and
// Irecv return theirs; WaitAll and WaitAny wait for several of either
// kind. The context an operation is issued with bounds it, the one given
// to Wait only the waiting. Operations run one at a time in the order
// they were issued; the ranks must issue the same operations in the same
// order.
//
// # Algorithms
//
// Each collective chooses among its algorithms by message size and world
// size (see Algorithm): recursive doubling for small AllReduce and
// AllGather, halving-doubling (Rabenseifner) for medium AllReduce and
// ReduceScatter, the ring for large ones, binomial trees for small
// Broadcast and Reduce and pipelined chains for large ones, binomial trees
// for small Gather and Scatter and direct exchanges with the root
// (Linear) for large ones, pairwise exchange for all-to-all and
// dissemination for Barrier. ReduceScatterV runs ReduceScatter's
// algorithms over blocks of any length. Options.Algorithm
// (or RDMACELL_ALGO, through OptionsFromEnv) forces one. Ring and Chain cut
// their transfers into chunks (Options.ChunkBytes) so that receiving,
// combining and forwarding overlap.
//
// # One host
//
// Ranks that reach each other over shared memory (comm's shm transport)
// need no messages at all. Before its first operation a group asks every
// rank whether it can share memory with all the others; if they all can,
// rank 0 creates an anonymous memory file (package internal/hostseg:
// nothing on a file system, nothing left behind by a crash) and the others
// map it. From then on the Shared algorithm carries every collective: a
// pipeline of phases separated by barriers on the segment, in
// which each rank copies its contribution into its slot and takes the
// others' from theirs. A waiting rank spins briefly, then sleeps on a
// futex; with more ranks than processors it yields its processor at each
// look instead of spinning. An 8-byte AllReduce of two ranks is one
// barrier, a fraction of a microsecond; large ones move at memory speed
// (see bench/RESULTS.md). The fingerprint check rides on the first
// barrier. A forced algorithm other than Shared still moves its data by
// messages. A rank that exits, or closes its group, releases a lock the
// kernel holds for it on the segment, and ranks waiting for it fail within
// milliseconds naming it; an abort or a rank's death reported by the
// communicator ends their waits too. A segment takes 2·n·Options.ChunkBytes
// bytes (with more than two ranks, twice that; 2 MiB chunks by default,
// smaller for large groups, 32 MiB at most); a rank that cannot create or
// open one (another user's process, /proc hidden) votes no, the group
// keeps to messages, and that rank logs a warning saying why (through the
// communicator's logger).
//
// # Agreement
//
// Messages between two ranks are matched in posting order, so ranks that
// disagree about an operation would otherwise read each other's messages
// as their own. Every operation therefore starts with a fingerprint
// exchange: the ranks all-gather 32-byte records of (sequence number,
// collective, element type, count, op, root, algorithm, chunk size, and a
// hash of the counts of AllGatherV, GatherV, ScatterV and ReduceScatterV) in
// ceil(log2 n) rounds of a pattern that does not depend on the operation
// (on one host, through the segment in the operation's first barrier).
// Every rank then sees every record, and if they differ every rank
// returns a *MismatchError naming the odd ranks and, in words, what each
// called; no data has moved and the group stays usable. In a world whose
// size is a power of two, an operation of at most 32 KiB whose algorithm
// talks to the exchange's partners in its order (recursive doubling, a
// binomial tree, any collective of two ranks but AllToAllV) puts its data
// in the exchange's messages after the records and delivers it only once
// they agree: one exchange instead of two, half of a small collective's
// time over tcp. A Barrier is the exchange alone. Data messages
// carry a tag derived from the fingerprint as well, which catches
// disagreements when the exchange is turned off (Options.SkipVerify).
//
// # Failures
//
// Arguments are checked before anything is sent: an *ArgError names the
// argument. A rank whose arguments are rejected issues nothing, so the
// other ranks wait for it until their contexts end. Every wait takes the
// operation's context. An operation that fails part way (a transport
// error, an expired context) may leave messages in the ranks' streams,
// and receives it posted may still land in its buffers, so the group
// refuses later operations with ErrGroupFailed: close it and make a new
// communicator.
//
// # Memory
//
// Scratch buffers come from the communicator's registered memory (Alloc),
// are kept by the group from one operation to the next and returned by
// Close. Operations are recycled too: in steady state neither blocking nor
// non-blocking calls allocate.
//
// # Reductions
//
// The float32 and float64 kernels use AVX2 where the CPU has it (checked
// at start-up), with a plain Go version used elsewhere and under the
// purego build tag. The 16-bit floats are widened to float32, combined,
// and rounded back to nearest even at each step. Every op is commutative
// bit for bit, so all ranks of an AllReduce end with identical bits.
//
// # Reproducible and exact reductions
//
// Floating-point addition is not associative, and each algorithm adds in
// its own order, so by default a reduction's last bits depend on the
// algorithm, hence on the transport, the message size and the chunk
// size. Options.Reproducible (or RDMACELL_REPRODUCIBLE=1) removes that:
// every element is combined at one rank, in rank order, (((x0 op x1) op
// x2) …), so the result depends only on the world size, the rank order
// and the inputs (reproducible.go says exactly what is guaranteed and
// how). The 16-bit floats are then accumulated in float32 over all the
// ranks and rounded once. The cost is small: the reduce-scatter becomes a
// direct one, with the same bytes on the wire as the ring's (see
// bench/RESULTS.md).
//
// Options.Exact goes further for float32 and float64 Sum and Avg: the
// result is the correctly rounded sum of the ranks' values, whatever
// their order (Avg divides it once more). Other reductions run as in
// reproducible mode; the 16-bit floats too (in float32). Nothing more
// moves on the wire; the owner of each element sums its n values with
// error-free transformations, and the rare element they cannot settle
// (values about 2^80 apart for float32) with an exact accumulator
// (package exact). To make a sum independent of how its terms are split
// between ranks, as data-parallel training on 1 or 8 ranks with the same
// global batch needs, each rank sums its terms into exact.Acc values and
// AllReduceAcc merges them exactly (576 bytes per element on the wire);
// examples/train does that with --exact.
package collectives
