// Package tcp is the verbs provider for processes on different hosts: RC
// queue pairs over TCP, one connection per QP.
//
// # Connections
//
// A Device listens on one address (Options.ListenAddr) and hands out
// endpoints naming it. Each QP gets its own TCP connection, so each QP has
// its own source port and, on an ECMP fabric, its own path;
// QPConfig.LocalAddr binds that connection to a chosen local address and
// port when the QP is the side that dials (the accepting side's end is the
// device's listening address; the dialer's port still makes each
// connection's 5-tuple its own). Options.AdvertiseAddr puts another
// address in the endpoints, for peers that reach the device through a
// forwarder.
//
// The connection is made when the QP moves to RTR. Of the two QPs, the
// one whose endpoint (Addr, QPN) sorts first dials; the other's device
// accepts the connection and gives it to the QP it names, if that QP is in
// RTR or RTS and was given exactly the dialer's endpoint (address, QPN and
// PSN; Init draws a fresh PSN, so a connection belongs to one incarnation
// of the pair). Endpoints must therefore reach the peer verbatim, as the
// bootstrap passes them. A dialer that arrives while its peer is still in
// Init is held until the peer reaches RTR, for up to half the handshake
// timeout; otherwise it is told to come back and retries with backoff. A QP without a connection after
// Options.ConnectTimeout moves to StateErr; requests posted meanwhile wait
// for the connection, and fail with StatusRetryExceeded after the QP's
// Timeout × (RetryCount+1).
//
// # Authentication
//
// Both ends prove that they know the job's secret (Options.Secret) by a
// mutual challenge-response before anything else is read: each sends a
// random nonce and answers the other's with HMAC-SHA256 over both nonces,
// the direction, both QPNs and PSNs and the dialer's address. A peer with
// the wrong secret cannot complete it, so it cannot write a byte; the
// failure is logged naming its address, the dialing QP moves to StateErr,
// and requests of the accepting QP fail for want of a connection. The
// stream is not encrypted: like RoCE, the provider trusts the path once
// both ends are known to belong to the job.
//
// # Frames
//
// Every frame has a fixed 32-byte header; WRITE,
// WRITE_WITH_IMM and SEND carry their payload after it, ACK (cumulative),
// NAK (a PSN and a status) and RNR notices carry none. The decoder checks
// every field; a malformed or out-of-order frame closes the connection and
// moves the QP to StateErr (QP.Err wraps ErrProtocol).
//
// # Requester
//
// PostSend copies each request into a preallocated slot. When the QP is
// not streaming (at most two requests on the wire unacknowledged) the
// caller's goroutine then writes the new frames itself with one
// non-blocking writev, straight from registered memory: a request answered
// by a request crosses no goroutine on its way to the wire. What the
// socket does not take at once, large requests and streams go to the
// QP's sender goroutine, which writes header and payload with one writev
// per batch; posting never waits for the network, and allocates nothing.
// Requests posted between Cork and Uncork (verbs.Corker) are one batch,
// written at Uncork by its caller whenever the socket takes them at once,
// streaming or not.
// One goroutine at a time holds the socket's sending side, so frames
// leave in PSN order whoever writes them. A signaled request completes
// when the acknowledgement covering it arrives, so its data is in the
// peer's memory. Requests are acknowledged cumulatively, and an
// acknowledgement behind a request costs no system call of its own (the
// peer reads it with the request), so the responder writes one alone only
// when it must: for a signaled WRITE before its receiver next reads, once
// for all the requests of one read; for a signaled WRITE_WITH_IMM or SEND,
// which completes a receive whose consumer may answer (as the cell engine
// answers every cell with a token), it waits for that answer, until the
// consumer is about to block in the receive CQ's Wait having answered
// nothing, or at most about a millisecond; the responder scores per
// connection whether answers come, and where they do not it does not
// wait, so a lone request's completion waits for no one. The last of a
// batch of unsignaled requests, and a verbs.Relaxed request, are
// acknowledged with the peer's next frame or after half of
// verbs.RelaxedDelay (a quarter of the ack budget if that is less): long
// enough that the next exchange with the peer takes the acknowledgement
// along, even where ranks outnumber cores. A request answered by a request thus costs
// one system call each way, as over a plain socket. If the peer shows no sign of life (no frame,
// no progress writing) for Timeout × (RetryCount+1) while requests are
// outstanding, or the connection breaks (EOF, reset, TCP_USER_TIMEOUT,
// keepalive), the oldest outstanding request completes with
// StatusRetryExceeded, the rest are flushed and the QP moves to StateErr.
// A responder that is not ready (RNR) is alive: while it says so, the
// timer does not run, as on an RNIC. A QP that owes its peer nothing when
// the connection ends stays in its state, as an RNIC notices a vanished
// peer only when it sends: its next request fails with
// StatusRetryExceeded (QP.Err tells why meanwhile).
//
// # Responder
//
// The QP's receiver goroutine checks every WRITE against the regions of
// the QP's PD (rkey, bounds, remote write access) before it reads a byte
// of payload, then reads the payload straight into the region. A small
// read-ahead buffer takes a header with what follows it in one readv, so
// the first bytes of a payload (at most 4 KiB) and small payloads are
// copied from it once checked; a stream of small frames costs about one
// system call per batch rather than two per frame. A
// refused request is answered with a NAK (StatusRemoteAccess at the
// requester, whose QP moves to StateErr), the connection ends and the
// memory is untouched; the responder's QP moves to StateErr only if a
// receive of its own failed. WRITE_WITH_IMM
// and SEND consume a posted receive (a SEND larger than it fails with
// StatusLocalLength here and StatusRemoteInvalidRequest at the
// requester). With no receive posted the responder emulates RNR: it waits
// up to MinRNRTimer × the requester's RNRRetry (forever for 7) for one,
// sending RNR notices so the requester knows it is alive, and then answers
// StatusRNRRetryExceeded. The receiver writes an urgent acknowledgement
// itself only when the socket takes it at once; otherwise the sender
// goroutine does, so the receiver never blocks on a full socket while the
// peer waits for it to read.
//
// # State changes
//
// Modify to StateErr closes the connection, waits for the QP's goroutines
// and flushes every outstanding send and receive request; Modify to
// StateReset discards them, after which the QP can be taken through Init
// and RTR to a new peer (or a new incarnation of the same one).
//
// Before it closes a connection for one of these (or Close), the QP
// writes a BYE frame if the socket takes it at once. The peer's QP then
// knows the end is orderly: its outstanding requests still fail (nobody
// will answer them; QP.Err wraps ErrPeerLeft and ErrConnLost), but it logs
// that only at debug level, since it is how every job ends and how the
// cell engine recycles a path. The connection then lingers, in the
// background and for at most 250 ms, until the peer closes it: closing a
// socket with unread data resets it, which could destroy the BYE unread.
// A write that fails (reset, broken pipe) is often the peer's orderly
// close seen from the sending side, with the BYE still unread in the
// socket: the receiver gets a moment to read it before the write's error
// stands. A QP reset while a frame is half written cannot say goodbye; a
// connection that ends without one (end of file, reset) is therefore
// followed by a probe of the peer's listener, which Device.Close closes
// last: a peer still listening reset its QP (and logs its own failures),
// a peer gone crashed, and that is warned about.
//
// # Logs
//
// Warnings (a failed QP, a refused connection, a malformed frame) are
// rate-limited per source, the peer's device address or a stranger's
// host: the first is logged, the others of the next 10 s are counted and
// their count logged at the end of the interval (or at Close). A flood of
// strangers, or the many QPs to one dead peer, make a few lines, not one
// each.
//
// As with an RNIC, a region must not be deregistered and freed while a
// peer may still write into it: quiesce or reset the QPs first.
package tcp
