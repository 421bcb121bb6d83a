// Package comm is the communicator of RDMACell: the ranks of a job, the
// connections between them, registered memory, point-to-point messages,
// liveness, Abort and sub-communicators.
//
// # Starting
//
// Init joins the job through the bootstrap (a store: etcd, or one in this
// process), waits for every rank and opens the transports. It connects to
// no peer: a peer is connected when an operation first involves it, or
// when the peer connects to this rank (connect.go), over shared memory
// (verbs/shm) to ranks of the same host, over TCP (verbs/tcp,
// authenticated with the job's secret) to the others, through an RDMA NIC
// (verbs/ibv), or as Options.Transport says. A rank of a ring holds two
// connections, and the store carries setup keys only for the pairs that
// talk. Connecting needs the store: once connected, a pair keeps talking
// if etcd goes away, but a peer first needed after that cannot be
// reached. With zero Options
// it reads the launcher's environment (RDMACELL_RANK, RDMACELL_WORLD_SIZE,
// RDMACELL_JOB, RDMACELL_ETCD_ENDPOINTS and the knobs listed at
// OptionsFromEnv); anything missing or malformed is an error that names
// the variable and its value.
//
// # Messages
//
// Send and Recv (and Isend and Irecv, which return a *Handle; Sendrecv
// does one of each at once, so that a ring shift cannot deadlock) move
// messages of any size, from 0 bytes up, between caller buffers, matched
// as in MPI: a message goes to the oldest receive posted for its sender
// and tag, and messages with one sender and tag arrive in the order they
// were sent. A receive may name AnySource for its sender and AnyTag for
// its tag (MPI_ANY_SOURCE, MPI_ANY_TAG): a message goes to the oldest
// receive posted that it fits, specific or not, so one sender's messages
// keep their order however the two are mixed, and a receive from any rank
// takes exactly one message, claimed under a lock shared by every peer
// (wildcard.go). Its Status (RecvStatus, Handle.Status) says who sent
// what, and how long it was. Probe and Iprobe find such a message without
// receiving it; the next receive that fits it takes it, which is the
// probing goroutine's only if it is the only one receiving. A receive
// from any rank cannot tell which rank would have sent its message: it
// fails when a rank of the communicator dies while it waits, and once no
// other rank is left (one that closed cleanly is just no longer waited
// for). Buffers from Alloc are registered memory off the Go heap
// and move without a copy; other buffers move through a bounded set of
// registered staging buffers, in chunks, so a message of gigabytes needs
// no more memory than a small one.
//
// P2P returns the ordered channel the collectives are built on: there the
// n-th receive a rank posts for a peer takes the n-th message that peer
// sent, and a tag that differs is a *MismatchError for the receive and for
// the send. Its messages, those of Send and Recv, and those of every
// communicator made by Split travel on separate channels of the same
// connections and never take each other's place.
//
// # Protocol
//
// Each pair of ranks has up to two cell connections (package
// cell/driver), each over Options.Paths queue pairs: the control one from
// the pair's first message, the bulk one from its first message too large
// for the control stream, whose setup crosses the control connection. A
// cell connection moves ranges of
// registered memory strictly in order: the k-th send fills the k-th
// receive the peer posted. Tag matching needs the receiver to choose where
// a message goes, so the pair uses one connection for each of two streams
// whose order is fixed by different ends:
//
//   - The control stream, in the sender's order. Each end keeps ctlSlots
//     receives of slotSize bytes posted for its peer; the k-th slot it
//     sends fills the peer's buffer k mod ctlSlots. A slot packs as many
//     waiting messages as fit, behind a header with the slot's sequence
//     number, its length, a CRC-32C, and eager credits handed back.
//   - The bulk stream, in the receiver's order: a receiver posts a range
//     for a chunk of a message and then asks for it, and the sender
//     answers the requests in the order they arrive, each with one send.
//
// Messages on the control stream, each a 56-byte header and a payload:
//
//	HELLO  the first message: protocol version, rank, world size, job id
//	EAGER  a whole message of at most eagerMax bytes, inline
//	RTS    a larger message (channel, tag, length, id, registered or not)
//	CTS    "bytes [off, off+len) of message id, please": the receiver has
//	       posted the bulk receive they fill
//	NACK   the receiver refuses message id: too long for the buffer
//	       (*TruncateError), another tag expected on the ordered channel
//	       (*MismatchError), or the receive was given up
//	BYE    the sender is closing
//	ABORT  the sender aborted the job, with the cause
//	SETUP  the sender's half of the bulk connection's setup
//
// An EAGER send completes once its bytes are copied into a control slot,
// as MPI's eager sends do: its buffer is the caller's again, and an
// operation that waits for the peer's answer waits for one trip, not for
// the slot's acknowledgement as well. Should the connection fail before
// the slot lands, the receive fails at the peer, and so does every later
// operation with it here; a rank's goodbye lands behind every slot it
// sent, so a clean Close still delivers them all. A receiver holds at most eagerCredits unmatched eager messages per peer
// (copied out of their slots, so that slots are reposted at once); a
// sender without credit sends an RTS instead. For an RTS the receiver,
// once a receive matched it, asks for the message: in one range when both
// buffers are registered (zero copy), else in chunks of stageChunk bytes
// directly into its registered buffer or into a staging buffer, a few
// chunks in flight at a time; the sender answers from its registered
// buffer or through a staging buffer. A message given up while it moves
// is answered with empty ranges, which keeps the stream in step and tells
// the receiver.
//
// Staging buffers are a fixed set per direction (see staging.go); sends
// never wait for buffers receives hold, so two ranks exchanging large
// messages cannot starve each other.
//
// # Progress
//
// A completed range is acted on, in stream order, by the progress
// goroutine of the cell connection that found it (the driver's
// OnComplete), and posting a message does the same at once in the
// caller's goroutine, so a message wakes only the goroutine that waits
// for it. Within that round the driver holds its writes (verbs.Corker),
// so the token of an arrival, the grant of the slot reposted for it and
// what the peer's protocol answers leave in one write. One goroutine per
// peer, the pump, does what must not run under the peer's lock (spreading
// a failure or an abort) and otherwise blocks: an idle communicator uses
// no CPU, as the driver's progress goroutines park in their completion
// queues.
//
// # Failures
//
// The bootstrap's lease is the liveness signal: when a rank dies, every
// pending and later operation with it fails with a *PeerError naming its
// rank, host and pid and wrapping the bootstrap's *RankDeadError, about one
// lease TTL after the death; so does every operation on the ordered
// channel of the communicators it belonged to, since their collectives
// cannot complete. A connection that fails first is taken down at once,
// so nothing lands in caller memory any more, and its cause is looked for
// for up to a lease TTL. Once connected the data path needs no etcd.
//
// Abort tells every rank it can reach, over the control streams and
// through the bootstrap, and every waiter of the job fails with an
// *AbortError naming the aborting rank. A goodbye or an abort that landed
// in a control slot is read even when the connection fails before its
// completion arrives (salvage): the slot's sequence number and checksum
// say it landed whole.
//
// The survivors of a death may go on without the dead rank: Shrink gives
// each of them the same communicator of the live ranks, agreed through
// the bootstrap (shrink.go).
//
// # Watching
//
// Every operation of the collectives is recorded in the process's flight
// recorder (Recorder, package flight). A watchdog (watchdog.go) ends a
// collective or a message that has waited longer than Options.Timeout
// with a *TimeoutError, and asks every rank of the job, once a wait has
// lasted Options.StallReport, what it is doing (stall.go): the finding
// names the rank that has not entered the operation, or who waits for whom
// on which path. With Options.TraceDir each rank writes its recorder there
// when an operation fails, the watchdog fires, any rank asks
// (RequestTrace) and it closes; with Options.MetricsAddr it serves Stats as
// Prometheus metrics (metrics.go).
//
// Close says goodbye to every peer and waits, at most CloseTimeout, for
// theirs, then releases every connection, region and shared-memory
// segment and leaves the job.
package comm
