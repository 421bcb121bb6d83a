package verbs

import (
	"context"
	"time"
)

// Device is an opened provider instance, the counterpart of an
// ibv_context. A process normally opens one device per provider.
type Device interface {
	// Provider names the provider ("shm", "tcp", "ibv", ...).
	Provider() string
	// AllocPD allocates a protection domain.
	AllocPD() (PD, error)
	// CreateCQ creates a completion queue that holds at least depth
	// completions without loss.
	CreateCQ(depth int) (CQ, error)
	// Close releases the device and everything created from it. QPs still
	// open move to StateErr and flush their outstanding requests first.
	Close() error
}

// PD is a protection domain: memory regions and queue pairs created from
// the same PD may be used together.
type PD interface {
	// RegMR registers mem, which must lie inside one allocation made by
	// Alloc, with the given access rights.
	RegMR(mem []byte, access Access) (MR, error)
	// CreateQP creates an RC queue pair in StateReset.
	CreateQP(cfg QPConfig) (QP, error)
	// Close deallocates the PD. Its regions and QPs must be closed first.
	Close() error
}

// MR is a registered memory region.
type MR interface {
	// Addr is the virtual address of the region's first byte in this
	// process.
	Addr() uint64
	// Len is the region's length in bytes.
	Len() int
	// LKey names the region in local scatter-gather elements.
	LKey() uint32
	// RKey names the region in remote accesses by a peer.
	RKey() uint32
	// Access is the set of rights the region was registered with.
	Access() Access
	// Bytes is the registered memory.
	Bytes() []byte
	// Close deregisters the region. The memory itself stays allocated.
	Close() error
}

// CQ is a completion queue.
type CQ interface {
	// Poll moves up to len(wc) completions into wc and returns how many it
	// moved. It never blocks.
	Poll(wc []WC) int
	// Wait is Poll that blocks until at least one completion is available,
	// the context ends, or the CQ is closed. It spins briefly and then
	// parks, so a CQ nobody writes to costs no CPU.
	Wait(ctx context.Context, wc []WC) (int, error)
	// Close destroys the CQ. QPs using it must be closed first.
	Close() error
}

// PassiveCQ is implemented by CQs that can tell whether polling them does
// work. Passive reports that completions come from other goroutines (a
// network reader, say) and polling only looks: a consumer then gains
// nothing by polling in a loop, and on a busy machine its spinning
// keeps those goroutines, and Go's network poller, from a processor. A
// CQ that does not implement it is taken to reward polling, as an RNIC's
// does.
type PassiveCQ interface {
	CQ
	Passive() bool
}

// WriteWatcher is implemented by the regions of providers that can tell
// their owner when a peer's WRITE (without immediate data, which
// completes nothing at the responder) has landed in the region, as tcp's
// can; an RNIC cannot. A consumer that polls memory its peer writes into
// may then wait instead, with its polling as the fallback.
type WriteWatcher interface {
	MR
	// OnRemoteWrite sets f to be called after each remote WRITE into
	// the region has landed in full (nil: no longer). f runs on the
	// provider's goroutine and must not block.
	OnRemoteWrite(f func())
}

// A Corker is a QP whose provider pays a system call per write to the
// wire (tcp). Between Cork and Uncork the requests posted to it are
// queued, not written; Uncork writes them, in order, together. A consumer
// that posts several requests in one round of its progress (a token, a
// grant, the next cell) corks the QP for the round, so that the round
// costs one write instead of one per request. Requests posted by other
// goroutines meanwhile wait for the Uncork too, so a cork must be short.
type Corker interface {
	Cork()
	Uncork()
}

// QP is a reliable connected queue pair.
type QP interface {
	// Num is the QP number, unique within its device.
	Num() uint32
	// State is the QP's current state.
	State() QPState
	// Endpoint is what the peer needs to connect to this QP; it is
	// available from StateInit on and is exchanged out of band (the
	// bootstrap does it through etcd).
	Endpoint() Endpoint
	// Modify moves the QP to state. Moving to StateRTR needs the peer's
	// endpoint in remote; other transitions take nil. Allowed transitions
	// are those of an RC QP: Reset→Init→RTR→RTS, any state→Err and any
	// state→Reset. Moving to Err flushes outstanding requests; moving to
	// Reset discards them without completions.
	Modify(state QPState, remote *Endpoint) error
	// PostSend posts the chain of send requests starting at wr, linked
	// through Next, as one call. On error it returns the first request that
	// was not posted; those before it were.
	PostSend(wr *SendWR) (bad *SendWR, err error)
	// PostRecv posts a chain of receive requests. Receives may be posted
	// from StateInit on.
	PostRecv(wr *RecvWR) (bad *RecvWR, err error)
	// Close destroys the QP: it moves to StateErr, flushes outstanding
	// requests into its CQs, and releases its connection.
	Close() error
}

// QPConfig holds the attributes a queue pair is created with. Zero values
// take the documented defaults.
type QPConfig struct {
	// SendCQ and RecvCQ receive the completions of send and receive
	// requests. They may be the same CQ. Both are required.
	SendCQ, RecvCQ CQ
	// MaxSendWR and MaxRecvWR bound the requests outstanding on each queue
	// (default 1024). Posting beyond them fails with ErrQueueFull.
	MaxSendWR, MaxRecvWR int
	// MaxSGE bounds the scatter-gather list of one request (default 4).
	MaxSGE int
	// Timeout is how long the requester waits for the responder to
	// acknowledge a request before it counts a retry (default 1s). With
	// RetryCount retries exhausted the request fails with
	// StatusRetryExceeded and the QP moves to StateErr.
	Timeout    time.Duration
	RetryCount int
	// RNRRetry is how many times a request that found no posted receive at
	// the responder is retried (0 to 7; 7 means forever, as in ibverbs).
	RNRRetry int
	// MinRNRTimer is the delay between RNR retries (default 1ms).
	MinRNRTimer time.Duration
	// LocalAddr binds the QP's connection to a local address ("host:port",
	// port 0 for any) on providers with addresses, such as tcp. It is how
	// paths are pinned to interfaces.
	LocalAddr string
	// FlowLabel distinguishes the paths of one peer on providers whose
	// fabric hashes on it (RoCEv2 flow label / UDP source port).
	FlowLabel uint32
}

// Endpoint is the connection information of one QP, a plain value that can
// be serialised (it has JSON tags) and exchanged out of band.
type Endpoint struct {
	// Provider must match the provider of the QP that connects to it.
	Provider string `json:"provider"`
	// Addr is the provider's address for the QP's device: a host:port for
	// tcp, a socket name for shm.
	Addr string `json:"addr,omitempty"`
	// QPN is the QP number and PSN the initial packet sequence number.
	QPN uint32 `json:"qpn"`
	PSN uint32 `json:"psn"`
	// Host identifies the machine, so a peer can tell whether shared
	// memory reaches it.
	Host string `json:"host,omitempty"`
	// GID, LID and MTU address the port on InfiniBand and RoCE.
	GID [16]byte `json:"gid,omitzero"`
	LID uint16   `json:"lid,omitempty"`
	MTU uint32   `json:"mtu,omitempty"`
	// RNRRetry is the QP's RNR retry count; software providers emulate the
	// retries at the responder, which therefore needs it.
	RNRRetry uint8 `json:"rnr_retry,omitempty"`
}
