// Package celltest is the scripted binding of package cell: a fabric of
// two engines on a virtual clock, for the engine's tests, its property
// test and its protocol scenarios, in the manner of raft's rafttest.
//
// # Layers
//
// Package cell is the engine, a pure state machine. Package cell/bind
// holds what every binding of it must get right alike (the order in which
// a Ready is acted on, the token ring, the reset contract, the trace) and
// is imported by the driver and the simulator as well as by this
// package. This package adds only what is a test fabric's own: links with
// a latency, a bandwidth and faults, a simulated address space that
// polices every write, and scripts. Imports point down: cell imports
// none of them, bind imports cell, and this package both.
//
// # The fabric
//
// A Fabric joins two engines, A (end 0) and B (end 1), by P paths on a
// virtual clock. It plays both drivers: it posts what the engines emit,
// moves it over per-path links with a latency and a bandwidth (in order,
// as RC does), performs the writes on a simulated address space, feeds
// completions, tokens, grants and finals back, and resets paths the way
// the drivers do (bind.Path). Faults are injected per message through a
// Hook, or per path (Kill). It also polices the engines: a write into
// memory that is not granted, or that was already handed back; a copy
// read from send memory already handed back; a WRITE_WITH_IMM finding no
// posted receive. Each is recorded as a violation. Every input and
// output of both ends is noted in the fabric's Trace (bind.Trace), which
// a failing test prints.
//
// # Scripts
//
// Env runs protocol scenarios written as datadriven scripts (see Env
// for the commands), as raft's testdata/*.txt are run by its
// InteractionEnv: each command's output is the trace of what the engines
// did meanwhile, checked against the golden text below it, which
// `go test -rewrite` regenerates. Facts a trace does not show (an error's
// type, the order of two moments, ids never reused) are check commands,
// which fail the test whatever the golden text says.
package celltest
