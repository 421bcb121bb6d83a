// Package verbstest is the conformance suite of the verbs providers, in the
// spirit of testing/fstest: a provider passes when Run passes for it.
//
// A provider wires the suite from its own tests:
//
//	func TestMain(m *testing.M) { verbstest.Main(m, provider) }
//
//	func TestConformance(t *testing.T) { verbstest.Run(t, provider) }
//
// Main lets the suite start the test binary again as a peer process, so
// that the cross-process cases talk to a real second process that can be
// killed; Run runs every case as a subtest.
//
// The suite checks the semantics stated in the verbs package documentation:
// placement of WRITE and SEND data, WRITE_WITH_IMM and receiver-not-ready
// retries, in-order visibility of a chain, remote and local access errors,
// the QP state machine with its flushes and reconnection, independence of
// QPs, peer death across processes, queue limits, completion queue waits
// and concurrent posting. Every wait in it has a deadline, so a provider
// bug fails a test rather than hanging the run.
package verbstest
