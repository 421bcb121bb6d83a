package verbstest

import "github.com/rdmacell/rdmacell/verbs"

// The suite drives a peer process with one JSON request per line on the
// peer's standard input; the peer answers each with one JSON reply per line
// on its standard output, in order.

// Peer operations.
const (
	// opInit opens a device, registers Size bytes for remote writes and
	// creates a QP in INIT; the reply carries its endpoint and region.
	opInit = "init"
	// opConnect moves the QP to RTR towards Endpoint, then to RTS.
	opConnect = "connect"
	// opRecv posts N receives.
	opRecv = "recv"
	// opWait waits for N receive completions and returns them.
	opWait = "wait"
	// opSum returns the SHA-256 of Len bytes of the region at Off.
	opSum = "sum"
	// opWrite fills Len bytes of the region with the pattern of Seed and
	// WRITEs them to Addr under RKey, then waits for the completion.
	opWrite = "write"
)

// request is one command to the peer.
type request struct {
	Op       string          `json:"op"`
	Endpoint *verbs.Endpoint `json:"endpoint,omitempty"`
	Size     int             `json:"size,omitempty"`
	N        int             `json:"n,omitempty"`
	Off      int             `json:"off,omitempty"`
	Len      int             `json:"len,omitempty"`
	Addr     uint64          `json:"addr,omitempty"`
	RKey     uint32          `json:"rkey,omitempty"`
	Seed     uint64          `json:"seed,omitempty"`
}

// reply is the peer's answer to one request; Err is set when it failed.
type reply struct {
	Err      string          `json:"err,omitempty"`
	Pid      int             `json:"pid,omitempty"`
	Endpoint *verbs.Endpoint `json:"endpoint,omitempty"`
	Addr     uint64          `json:"addr,omitempty"`
	RKey     uint32          `json:"rkey,omitempty"`
	Len      int             `json:"len,omitempty"`
	Sum      string          `json:"sum,omitempty"`
	WCs      []verbs.WC      `json:"wcs,omitempty"`
}
