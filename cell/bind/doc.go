// Package bind is what every binding of a cell.Engine shares: the order
// in which a Ready is acted on, the reading of a path's token ring, and
// the end of a path's incarnation. A binding is what joins an engine to
// queue pairs and a clock; there are three, and each keeps only what is
// really its own:
//
//   - package cell/driver: real QPs of a verbs provider, rings in
//     registered memory, a real clock and reset workers that talk to the
//     peer over a control QP;
//   - package sim: simulated QPs on virtual time, packet by packet
//     through a simulated fabric;
//   - package cell/celltest: a scripted fabric of two engines, for the
//     engine's tests and its protocol scenarios.
//
// Imports point down: cell knows nothing of its bindings, this package
// knows only cell, and the bindings import both. What the three must get
// right alike lives here, once, so that a change of the protocol is made
// and trusted once:
//
//   - Act takes a batch from the engine and hands every output to the
//     binding's Actor in the order Ready documents (receives before the
//     tokens that announce their credit; the terminal failure before the
//     failed ranges are handed back, so that nothing lands in them after).
//   - A TokenRing reads one path's token ring as the peer writes it: the
//     slot of a cell (TokenSlot), a token taken only for a cell posted on
//     that path and matching it, every cell before it on the path settled
//     with it (RC order), the slot zeroed once read.
//   - A Path keeps the reset contract: a Reset for a path whose reset is
//     under way joins it; before the engine hears that a path's old
//     incarnation is gone (Engine.PathQuiet, Engine.PathReset) or that the
//     path is closed (Engine.PathDead), the binding has fed every
//     completion of the old incarnation, and the path's token ring is
//     read a last time and cleared for the next one.
//
// A Trace prints what each end of a connection did, one line per input
// and output, for the scenario scripts and a failing test of package
// cell (celltest keeps one per fabric); FormatReady prints a batch in the
// same words for the driver's log at its trace level.
package bind
