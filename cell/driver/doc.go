// Package driver binds the cell engine to real verbs: a Conn is one
// RDMACell connection to one peer over Config.Paths RC queue pairs
// (paths) of one provider, with the engine's rings in registered memory,
// a real clock, and a goroutine that makes progress.
//
// # Setup
//
// Dial creates the QPs, moves them to INIT and posts the engine's first
// receive chains there, then swaps setup information with the peer
// through an Exchanger (the communicator implements it over the
// bootstrap): the endpoints of every path and of the control lanes, the
// address and rkey of the rings, and the wire parameters both engines
// must share. Everything the peer sent is checked before use; a mismatch
// is a *SetupError naming the peer and the field. Then every QP is
// connected and, where the Exchanger is a Confirmer, both ends wait for
// each other's word that they are, before a probe on every QP checks the
// connection: a probe that reached a peer still waiting for this end's
// setup would fail once its retries ran out.
//
// # Moving memory
//
// Send and Recv (or SendAt and RecvAt, for memory named by address and
// key) post a range and return an *Op at once; the k-th send of a
// connection fills the peer's k-th receive. An Op completes exactly once,
// when the engine hands its range back: for a receive, once its last cell
// has arrived with the range's tail, or after a recovery once the
// sender's final has come and every path that could still write into it
// has been reset (the engine's quarantine of late copies); only then is
// the memory the caller's again. A failed range carries the engine's
// error, a *cell.RangeError wrapping for instance a *cell.NoPathError
// that names the peer and why each path was given up.
//
// # Progress
//
// One goroutine per connection polls the CQ (cells arriving, failed
// requests, control messages) and the rings the peer writes (tokens,
// grants, finals, tails, holds and hold acks), feeds the engine, ticks it by its deadline and acts on
// its outputs in the order Ready documents, through package cell/bind as
// every binding of the engine does (bind.Act, bind.TokenRing, bind.Path).
// A logger that takes LevelTrace gets every batch, in bind.Trace's
// format. Callers posting a range act
// on the resulting outputs themselves, so a range starts without waiting
// for that goroutine. While ranges are in flight it polls (only where
// polling does work: not over a verbs.PassiveCQ, such as tcp's), then
// waits in the CQ with a growing timeout, since ring records signal
// nothing, unless the provider says when they land (a verbs.WriteWatcher
// region, such as tcp's: a landing ends the wait); with nothing in flight
// it parks in the CQ and costs no CPU until a completion arrives or a
// range is posted. Posting kicks it only out of a park (or a spin), where
// it would not time the range's cells.
//
// Ops that complete are reported to Config.OnComplete from that
// goroutine, after the round that completed them, so that the caller
// reacts where the completion was found instead of in a goroutine woken
// for it. On providers that pay per write (a verbs.Corker QP: tcp) the
// paths are corked for the round: its tokens and records, and what
// OnComplete posts in reply, leave in one write per path. A caller's post
// corks them too, so its range's cells and records leave together, from
// the caller's goroutine, as the post returns. Before a round that
// completed Ops lets its records go it yields the processor once, so that
// a caller it woke and that answers this peer at once writes them along
// with its own cells as its post returns: a ping-pong costs one write per
// message each way. A score stops the yield where answers go to other
// peers.
//
// # Rings
//
// Tokens, grants, finals, holds and hold acks are written with one-sided
// WRITEs from a local staging area into the peer's rings, in the record
// formats of package cell; a range's tail is a WRITE spliced into its last
// cell's chain, before the WRITE_WITH_IMM. Token writes are unsignaled
// (one in signalEvery is signaled, so that an RNIC can retire the others);
// the other records are signaled (grants verbs.Relaxed: only the watch
// below waits for their completion), and a path on which one does not
// complete within three times its soft timeout is given up, so that the
// engine writes it again elsewhere; each such give-up doubles the time
// records get on that path from then on (a path slow rather than dark
// would otherwise be given up for its first record after every reset).
// Finals, holds and hold acks are followed by a bell on a control lane,
// which wakes a peer that rests. Each ring is read only
// when a record can be there: tokens of the cells posted, grants while a
// send waits, finals while a receive does, the tail ring after an
// arrival, the hold ring after a control message or a landing, the
// hold-ack ring while a hold is out. The token ring has a section per
// path (see layout): two copies of one cell, on two paths, must not share
// a slot.
//
// # Resets and failures
//
// When the engine asks for a path to be reset, a worker goroutine
// performs the reset with the peer over the control channel (see reset.go):
// ERR, RESET, INIT with the engine's Refill posted, endpoints swapped,
// RTR, RTS, and PathReset once both ends are in RTS. A peer that asks
// first makes the engine give the path up too (PathFailed). A reset that
// fails after both QPs left their old incarnation (connecting failed)
// starts over with a new one, after a back-off; one that does not get
// that far within Config.ResetTimeout (the peer does not answer) closes
// the path for good (PathDead). The control channel's two lanes are
// repaired the same way, each over the other (see control.go and
// lanes.go). When the engine fails (no path left), the driver closes
// every QP and only then fails the ranges still open. Abort does the same
// at once with the caller's error; Close says goodbye to the peer, which
// then fails fast, and releases everything.
package driver
