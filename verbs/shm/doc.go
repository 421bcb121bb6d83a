// Package shm is the shared-memory provider of package verbs: RC queue
// pairs between processes (or goroutines) of one host, where a WRITE is a
// memory copy straight into the peer's registered region.
//
// # Devices and connections
//
// Open creates a Device that listens on an abstract unix socket (a name
// starting with "@": nothing is created on a file system). Its address is
// the Addr of every endpoint of its QPs. Of two QPs being connected, the
// one with the smaller (address, QP number) dials the other's device when
// it moves to RTR; the other adopts the connection when it moves to RTR
// itself, whichever comes first. Only processes of the same user may
// connect (SO_PEERCRED).
//
// A connected pair shares one pair segment, an anonymous memory file
// created by the dialing side and passed over the socket with SCM_RIGHTS.
// It holds each side's doorbell, the descriptor of the request that needs
// the responder, the acknowledgement, and a staging area for SEND payload
// (see pair.go). The socket carries only the handshake and memory files;
// it is also the liveness signal: when a process dies the kernel closes
// its sockets, and the QPs connected to it fail their outstanding and
// later requests with StatusRetryExceeded.
//
// # Memory
//
// Regions live in memory from verbs.Alloc, which is backed by a memory
// file. Each device publishes its regions (key, address, length, access,
// PD, memory file id) in a region table, another memory file that peers
// map read-only. A requester checks every WRITE against that table before
// it writes a byte: an unknown rkey, a range outside the region, a region
// without remote write access or of another PD fails the request with
// StatusRemoteAccess, and the target is untouched. MR.Close clears the
// entry before it returns. The memory file of a region is sent to a peer
// the first time the peer writes into it, only if a region with remote
// access lies in it, and is mapped once per peer device, whatever the
// number of QPs; mappings of memory files no region lies in any more are
// released the next time the peer maps a new one, and all of them when the
// last QP connected to that device is reset or closed.
//
// # Execution
//
// Each QP has an engine goroutine, started at RTR, that executes the QP's
// requests in order as requester and its peer's requests as responder.
//
//   - WRITE: the requester copies the gathered bytes into its mapping of
//     the peer's region and completes the request: the data is placed.
//   - WRITE_WITH_IMM: the same copy, then the requester publishes a
//     descriptor in the request ring of the pair segment with an atomic
//     store, which orders it after every byte written before it on the
//     QP. The responder consumes a receive and completes it with the
//     immediate and byte count, and acknowledges (cumulatively, once per
//     batch); the requester completes on the acknowledgement.
//   - SEND: the payload goes through the staging area in chunks, each
//     scattered by the responder into the receive's buffers and
//     acknowledged.
//
// The engine is not the only goroutine that may do this work. Each role
// of a QP (requester, responder) is held by one goroutine at a time, taken
// with a compare-and-swap: PostSend executes a small request (up to
// 256 KiB) with nothing queued before it in the caller's goroutine (of a
// SEND, its first chunk), and polling a CQ (it is a *soft.CQ with a
// progress hook) executes the pending requests of the peers of the QPs
// that complete into it, collects their acknowledgements and executes what
// they let through. A goroutine that spins on its CQ therefore completes a
// ping-pong without any hand-off to another goroutine, and everything else
// (large copies, fetching a memory file, timeouts, failures) stays with
// the engine, so PostSend never blocks. A request that waits for an
// acknowledgement needs nobody meanwhile: the acknowledgement rings the
// doorbell. Waking the engine costs a futex wake and a scheduling round,
// hundreds of microseconds on a busy machine.
//
// With no receive posted the responder emulates an RNR NAK: it retries
// every MinRNRTimer (its own), as many times as the requester's RNRRetry
// (carried in the requester's endpoint; 7 is forever), then fails the
// request with StatusRNRRetryExceeded. A requester waits for a peer that
// has not reached RTR, or for an acknowledgement, at most Timeout ×
// (RetryCount+1) without progress (plus the responder's RNR timer),
// then fails with StatusRetryExceeded. The first failed request moves the
// QP to ERR, flushes everything behind it and closes the connection, so
// the peer's own requests fail as they would against a QP in ERR. A
// request given up by its requester (a flush, a timeout) is cancelled in
// the segment, and a responder never executes a cancelled request.
//
// Requests are executed in order without waiting for acknowledgements,
// up to 256 descriptors ahead of the responder, so a chain of WRITE and
// WRITE_WITH_IMM pipelines; they complete in order. The exception keeps
// RC's rules: a request that the responder might refuse is executed
// alone, and nothing behind it is executed until it is acknowledged. A
// WRITE_WITH_IMM is such a request only when the requester cannot be sure
// a receive awaits it (each side publishes how many receives it has
// posted); a SEND chunk always is. A WRITE that follows a WRITE_WITH_IMM
// therefore never lands before a receive is there for the immediate, and
// a request behind a failed one is never executed. As on an RNIC, the
// bytes of a WRITE_WITH_IMM that then fails with an RNR error have been
// placed.
//
// An engine with nothing to do yields for some 10–20 µs and then sleeps on a
// futex word in the pair segment (the shared, not private, futex, so that
// the peer process can wake it), or on a channel before the QP is
// connected: an idle QP costs no CPU. It wakes on the peer's doorbell,
// a local post, or its next deadline (an RNR retry, an acknowledgement
// timeout, at most a second). While goroutines poll its CQs the engine
// instead dozes on a futex word of its own, without asking the peer to
// wake it: the pollers do the work, and the peer pays no system call. A
// poller that stops polling to block in CQ.Wait hands the QP back before
// it blocks (a park hook of the CQ), so a completion that comes while the
// consumer waits is executed at once by the engine, and CQ.Wait returns
// it without any timed polling. Only a poller that stops polling without
// waiting leaves the peer's requests to the engine's next doze end (at
// most 200 µs).
//
// # Hostile peers
//
// Everything read from a peer (socket messages, its region table, the
// pair segment) is validated before use; a malformed message or
// descriptor closes the connection with an error naming the QP and the
// peer. Writes go only into ranges that the peer's table names inside the
// memory file the peer sent, so a confused peer can only corrupt its own
// memory. Control segments are sealed against resizing. Memory files from
// verbs.Alloc are not, so a peer that shrinks its own allocation while a
// WRITE into it runs would crash the writer with SIGBUS; no code of this
// project does that.
package shm
