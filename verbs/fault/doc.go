// Package fault wraps a verbs provider so that tests can make chosen queue
// pairs slow, stalled, lossy or dead at chosen moments, and so test the
// recovery code above the verbs layer deterministically.
//
// Wrap returns a Device whose PDs create *QP. Every QP starts without a
// fault and passes its requests straight to the provider's QP; Inject
// changes its fault from that moment on:
//
//   - None passes requests through.
//   - Delay hands every send request to the provider Delay after it was
//     posted, in order: a slow but live path.
//   - Stall holds send requests until the fault is changed, then delivers
//     them in order: a path that hangs and comes back.
//   - Drop makes send requests vanish: the first fails with
//     StatusRetryExceeded after the QP's Timeout, which moves the QP to
//     StateErr, and every later one flushes ("drop and break"). Drop stays
//     in force across a reset, as a dead link would.
//   - Kill moves the provider's QP to StateErr at once, flushing what is
//     outstanding. It happens once; the QP then has no fault.
//
// Fault.After lets that many more send requests pass untouched before the
// fault applies; a Kill with After kills the QP right after the last of
// them, half-way through a transfer.
//
// # Late copies
//
// Requests held by Delay or Stall model data already in the network. When
// the user gives up on such a QP and moves it to StateErr or StateReset,
// its held requests are still delivered to the peer before Modify returns,
// and only then does the provider's QP change state. A user who reuses
// memory a given-up QP could write before that Modify has returned can
// therefore find it overwritten by a late copy; one who waits for Modify
// cannot. That is the hazard the cell engine's quarantine closes, and this
// package reproduces it on demand. Close, by contrast, flushes held
// requests without delivering them.
//
// Held requests are copied when posted, as an RNIC copies a work request,
// so callers may reuse their SendWR and scatter-gather list at once.
// Completions the wrapper makes itself (a dropped request's failure, the
// flushes of held requests) appear in the QP's CQ in order with the
// provider's, which is why QPs of a fault Device need CQs created by it.
package fault
