// Package verbs is a Go model of the RDMA Verbs API (ibverbs): devices,
// protection domains, memory regions, completion queues and reliable
// connected (RC) queue pairs driven by linked chains of work requests.
//
// Everything above this package (the cell engine, the communicator, the
// collectives) is written against these interfaces only, so that it runs
// unchanged on every provider: shared memory between processes of one host
// (package verbs/shm), TCP between hosts (verbs/tcp), and libibverbs on a
// real RNIC (verbs/ibv, behind a build tag). Package verbs/fault wraps any
// provider to inject delays, stalls and failures for recovery tests, and
// verbs/verbstest is the conformance suite every provider must pass.
//
// # Semantics
//
// The model keeps the RC guarantees that the cell engine relies on:
//
//   - Work requests posted on one QP are executed in order, and their data is
//     placed at the responder in order. A WRITE_WITH_IMM completion at the
//     responder therefore proves that every byte of every request posted
//     before it on that QP is visible in the responder's memory.
//   - A WRITE_WITH_IMM (and a SEND) consumes one posted receive request at the
//     responder. When none is posted the responder answers "receiver not
//     ready"; the requester retries as its RNRRetry says and then fails the
//     request with StatusRNRRetryExceeded.
//   - A signaled send request completes at the requester only after the
//     responder has placed its data. Unsignaled successful requests produce
//     no completion; a failed request always does.
//   - The first failed request moves the QP to StateErr; every request after
//     it, and every receive request, completes with StatusWRFlush.
//   - Remote access is checked against the responder's registered regions
//     (rkey, bounds, access flags) before any byte is written.
//
// Addresses are virtual addresses in the owning process, as in ibverbs: a
// scatter-gather element names local memory by address and lkey, a remote
// write names the peer's memory by address and rkey. Memory handed to
// RegMR must come from Alloc, which places it off the Go heap in a mapping
// that providers can share with other processes.
//
// Posting send and receive requests, polling and waiting on completion
// queues are safe for concurrent use from several goroutines, on every
// provider. Modify and Close on a QP must not race with each other.
package verbs
