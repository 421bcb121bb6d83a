// Package cell is RDMACell: the engine that moves ranges of registered
// memory between two peers as flowcells scheduled over several RC queue
// pairs (paths), with token feedback, per-path RTT estimation, a soft
// timeout and fast recovery onto the other paths.
//
// # A pure state machine
//
// An Engine holds the protocol of one connection, both directions, and
// nothing else: no goroutines, no clock, no I/O, no randomness. Like
// etcd's raft it takes inputs and accumulates outputs:
//
//   - inputs: Send and Recv (the application's ranges), Grant, Token,
//     Final, Tail, Hold and HoldAck (records the peer wrote into this
//     end's rings), Completion
//     (work completions polled from the paths' CQs), PathFailed,
//     PathQuiet, PathReset and PathDead (the driver's reports on its
//     QPs), and Tick;
//     each takes the current time in nanoseconds;
//   - outputs, drained with Ready: receive chains to post, paths to reset,
//     cell chains to post (a range's last with its tail), tokens, grants,
//     finals, holds and hold acks to write into the peer's rings, range
//     events, and the deadline of the next Tick.
//
// A driver binds an engine to real QPs, a clock and the three rings (see
// Ready for the order in which it acts on a batch); a network simulator
// binds the same engine to simulated QPs on virtual time, and package
// cell/celltest to a scripted fabric, on which the tests of this package
// and its protocol scenarios (testdata/*.txt) run. What every binding
// must get right alike (the order of a batch, the token ring, the reset
// contract) is package cell/bind, which all three use. Placement is
// behind the Policy interface: Adaptive (the default), ECMP and Spray.
//
// # Flowcells and their chains
//
// A send range is cut into flowcells of 1.5 × the bandwidth-delay product
// measured on the paths (the bandwidth from the delivery rate of tokens,
// the delay from the best RTT less the timed cell's own transmission),
// bounded by [MinCellSize, MaxCellSize], or of a fixed CellSize; a range
// no larger than one cell is one cell. Each cell is posted as one chain:
// a WRITE of all but its last MTU, linked to a signaled WRITE_WITH_IMM of
// the last MTU whose immediate is the cell's Global_Cell_ID; a cell of at
// most one MTU is the WRITE_WITH_IMM alone.
//
// The paper's figure posts the signalling WQE first and the payload after
// it. We post it last: RC places a QP's writes in order, so the
// receiver's immediate completion then proves that every byte of the cell
// has landed, and the token it triggers acknowledges data that is really
// there. Token-first would acknowledge a cell whose payload may still be
// lost with its path, and the sender would hand back memory the receiver
// never got.
//
// Global_Cell_IDs are 32-bit per connection, starting at FirstCellID and
// wrapping; they are compared with serial-number arithmetic, which is
// unambiguous because at most Window (far below 2^31) cells are in flight.
//
// # Tokens and the tracking queue
//
// On each immediate completion the receiver half posts the consumed
// receive again and emits a Token (id, its own timestamp, status, path)
// for the driver to WRITE over the same path into the sender's token
// ring, slot id mod Window. A copy seen before is acknowledged again
// (TokenDup) but counted once; an id no sender window could hold is
// refused (TokenNACK).
//
// The sender half keeps the tracking queue, a sliding window from
// NEXT_ACK to NEXT_SEND with, per cell, its range, offset, length,
// attempts and outstanding copies, and per path the copies posted there in
// order. A token resolves its copy and every copy before it on that path
// (RC order), returns their credits, and gives an RTT sample (receipt −
// post time, on the sender's clock; the receiver's timestamp is only for
// diagnostics). Per path, RTT_avg ← (1−α)·RTT_avg + α·sample and RTT_var ←
// (1−β)·RTT_var + β·|sample − RTT_avg| with α = 1/8 and β = 1/4 (RFC 6298),
// and T_soft = RTT_avg + 4·RTT_var, at least MinSoftTimeout.
//
// # Recovery
//
// A failed completion, a NACK token or a PathFailed report shows a path
// broken, and gives it up: the cells it holds that have not landed go
// back, in order, to a re-post queue served before new cells, and are
// posted again on the paths in service as new work requests over the
// same memory (zero copy); a Reset asks the driver to take the QP
// through ERR, RESET, INIT, RTR and RTS with its peer in the background,
// and PathReset re-admits it with fresh estimates. A path given up is
// being reset, not lost: when every path is down at once (a stall of the
// whole host times them all out), cells wait for the first to come
// back. The connection fails only when every path is closed for good
// (PathDead; the driver bounds each reset, so nothing waits forever):
// every open range fails with a *NoPathError that names the peer and why
// each path was closed, and later inputs fail the same way. The peer's
// driver sees the closed QPs as PathDead there.
//
// # Slow is not dead
//
// A cell late on its path, its oldest outstanding one gone without a
// token for longer than the path's tokens have needed, shows the path
// slow or broken, and which of the two the engine cannot tell yet. The
// head copy's clock starts at its posting or at the path's last token,
// whichever is later (a cell queued behind others on a QP cannot
// complete before them). Until the path has a delay and a rate measured
// it may take T_soft from there; after, its token is expected after the
// path's delay from its posting or once its own bytes have drained
// behind that last token, and it may be late by the usual lateness of
// the path's tokens plus four times its deviation (at least
// MinSoftTimeout). T_soft itself would count the cells queued ahead
// twice: on a deep window their time is most of a cell's RTT, and a
// dead path would be found out only a queue's drain after its last
// token.
//
// A late cell demotes its path (PathSlow): the cells the path holds that
// have not landed are re-posted elsewhere as above, and it takes no new
// cells, but its QP stays as it is. A path that is
// only slow (a deep queue, a NIC shared by many connections, a link held
// by PFC) delivers its copies late; each token resolves them as usual
// and teaches the estimates, and the token that drains the path makes it
// up again, to be used as much as its measured delay and rate deserve. A
// reset would have cost a reconnection and thrown those measurements
// away, and on a fabric whose queues sometimes exceed T_soft it would
// reset healthy paths again and again. A demoted path that shows no
// progress at all for three times the time that made it late (a TCP
// connection stalls for twice T_soft's floor at times), neither a token
// nor a cell of the peer's arriving on it (the tokens come back behind
// those, on the same QP), is given up (ErrNoProgress) and reset like a
// broken one: its copies hold their ranges (see below) until it is. That
// bound is the price of telling slow from dead: a path whose route died
// holds the ranges it carried for up to four times that span, not one.
//
// A soft timeout may mean a path slow rather than broken for every cell
// on it, not for one: were every attempt judged by the same clock, a
// cell that needs longer than T_soft would time out on every path, for
// ever, and never yield the RTT sample that would teach the estimates.
// So, as TCP backs off its RTO, each soft timeout doubles the time the
// cell that timed out may take on its next attempts, wherever it is
// posted, up to MaxSoftBackoff times. The back-off is the cell's, not
// the path's: a fresh cell is still judged by the path's own clock, so
// a path that is dead rather than slow is found out as fast as before,
// and once one cell has landed on a slow path its RTT sample has taught
// the path's estimates. Tokens name their path and copy, so no sample is
// ambiguous, as a retransmitted TCP segment's is (Karn's rule): every
// one is taken.
//
// # Quarantine of late copies
//
// A path demoted, or given up, may still deliver the copies it holds
// after their re-posts have landed. Those copies stay outstanding,
// quarantined, until they land (a slow path's token), or the path's old
// incarnation is gone at both ends (PathQuiet, as soon as both QPs have
// been through ERR, or at the latest PathReset), or it is closed
// (PathDead): until then their cells are not resolved, so the window does
// not slide past them (their ids, ring slots and tracking slots are not
// reused), their ranges do not finish, the sender's memory is not handed
// back (a late copy still reads it),
// and no final tells the receiver its memory is free (a late copy could
// still write it). On its side the receiver holds a range whose final
// arrives while any of its own paths is down, until that path is quiet
// here too, so that its memory never depends on the other end's
// bookkeeping alone. A range handed back on its tail needs neither: no
// cell of it had a second copy (see "One trip"), and every first copy has
// landed.
//
// Tokens need the same care in the other direction. A token proves that
// its copy, and every copy posted before it on the same QP incarnation,
// landed. A cell can land on an incarnation whose completion the driver
// reads only after the QP was reset; a token for it, posted then, would
// travel on the new incarnation and acknowledge whatever copy of the same
// cell that path carries next, and every copy before it, though none of
// them had landed. Receive ids therefore carry the incarnation they were
// posted in (every give-up starts one), and an arrival on an incarnation
// that is gone is not answered: its copy was given up and is sent again.
//
// # Flow control
//
// The sender writes only where, and as much as, the receiver allows. The
// receiver's memory is granted range by range: Recv emits a Grant (address,
// rkey, length, sequence number) for the driver to write into the sender's
// grant ring, and the k-th Send of a connection is written into the k-th
// grant, never before the grant has arrived, and fails (at both ends)
// with ErrTooLong if it does not fit. At most MaxRanges ranges are
// outstanding per direction. The receive queues are covered by credits:
// the receiver keeps RecvDepth receives posted on every path (a full chain
// at start and after each reset, one more for each immediate completion),
// and the sender never has more WRITE_WITH_IMM outstanding on a path than
// that. Tokens return credits only because the receiver reposts the
// receive before the token leaves (Ready puts receives first); a token is
// an acknowledgement, not a permission: it never lets the sender write
// more memory than was granted.
//
// # One trip: tails and holds
//
// A receive range is handed back as soon as every cell of it has landed,
// one trip after its last cell was posted. The receiver does not know by
// itself which cells make up a range, so the chain of a range's last cell
// carries its Tail (sequence number, length, first cell id and count),
// written into the receiver's tail ring before the cell's WRITE_WITH_IMM:
// when the last cell arrives, its tail is there. The range is complete
// once every id up to its last has arrived (the receiver keeps the oldest
// id not seen yet). No final follows.
//
// "All bytes are here" means "nothing more will be written" only if the
// sender never writes a cell twice behind the receiver's back, and after a
// lost token or a slow path it must. So a tail is a promise: before a cell
// of a tailed range goes again, the sender writes a Hold and waits for its
// HoldAck. A receiver that has the range whole already answers done (the
// sender then takes every cell of it as landed and writes nothing again);
// otherwise it holds the range, ignores its tail, and hands it back on the
// sender's Final, as below. A range a cell of which went back to the
// re-post queue before its last was cut gets no tail and ends the same
// way. Only recovery pays the extra round trip.
//
// # Finals
//
// A range without a tail, or one held, is handed back on its Final, which
// the sender writes (into the receiver's final ring) once every cell of
// the range has landed and no copy of any of them can land any more. The
// receiver cannot decide this alone: after a lost token the sender
// re-sends a cell the receiver already has, so "all bytes are here" does
// not mean "nothing more will be written". A range whose hold is still
// unanswered when its last token comes ends with a final too.
//
// Grants, finals, holds and hold acks ride RC like everything else and
// are lost only with their path; whenever a path fails or comes back, the
// engine writes again every grant not yet used up, every final the
// receiver may not have seen and every hold not yet answered (a hold ack
// lost with its path is written again when the sender asks again). The
// records are idempotent, and Put/Read functions fix their layout in the
// rings.
package cell
