package verbs

import (
	"strconv"
	"time"
)

// Opcode is the operation of a send request or a completion.
type Opcode uint8

const (
	// OpWrite writes the gathered local bytes at RemoteAddr under RKey.
	OpWrite Opcode = iota + 1
	// OpWriteImm is OpWrite followed by a completion carrying Imm at the
	// responder, which consumes one posted receive there.
	OpWriteImm
	// OpSend places the gathered bytes into the buffers of the next
	// posted receive at the responder.
	OpSend
	// OpRecv is the opcode of a completion for a receive request consumed
	// by an OpSend.
	OpRecv
	// OpRecvWriteImm is the opcode of a completion for a receive request
	// consumed by an OpWriteImm.
	OpRecvWriteImm
)

var opcodeNames = [...]string{"INVALID", "WRITE", "WRITE_WITH_IMM", "SEND", "RECV", "RECV_RDMA_WITH_IMM"}

func (o Opcode) String() string {
	if int(o) < len(opcodeNames) {
		return opcodeNames[o]
	}
	return "Opcode(" + strconv.Itoa(int(o)) + ")"
}

// SendFlags modify a send request.
type SendFlags uint8

const (
	// Signaled asks for a completion when the request succeeds.
	Signaled SendFlags = 1 << iota
	// Relaxed says the requester does not wait for the completion of a
	// Signaled request: it may come up to RelaxedDelay late, as long as
	// it comes. An RNIC ignores it; a provider that pays for each
	// acknowledgement on the wire (tcp) sends this one with its next
	// frame, or after a delay, instead of by itself at once.
	Relaxed
)

// RelaxedDelay bounds how much later than otherwise a provider may
// complete a Relaxed request, for want of traffic to carry its
// acknowledgement. A requester that watches for such a completion (the
// cell driver does, to find a path that swallows writes) waits at least
// this long on top of the network's time.
const RelaxedDelay = 10 * time.Millisecond

// SGE is a scatter-gather element: Length bytes at virtual address Addr of
// the region named by LKey.
type SGE struct {
	Addr   uint64
	Length uint32
	LKey   uint32
}

// SendWR is a send work request. Requests are linked through Next and
// posted as one chain.
type SendWR struct {
	ID     uint64
	Next   *SendWR
	Opcode Opcode
	Flags  SendFlags
	SGL    []SGE
	// RemoteAddr and RKey name the target of OpWrite and OpWriteImm.
	RemoteAddr uint64
	RKey       uint32
	// Imm is delivered with the responder's completion of OpWriteImm.
	Imm uint32
}

// RecvWR is a receive work request. Its SGL receives the bytes of an
// OpSend; for OpWriteImm it may be empty.
type RecvWR struct {
	ID   uint64
	Next *RecvWR
	SGL  []SGE
}

// WCFlags describe a completion.
type WCFlags uint8

const (
	// WCWithImm says Imm holds immediate data.
	WCWithImm WCFlags = 1 << iota
)

// WC is a work completion.
type WC struct {
	// ID is the ID of the completed work request.
	ID     uint64
	Status Status
	Opcode Opcode
	Flags  WCFlags
	// ByteLen is the number of bytes transferred; for a receive, the bytes
	// the sender wrote or sent.
	ByteLen uint32
	// Imm is the immediate data of an OpRecvWriteImm completion.
	Imm uint32
	// QPN is the number of the local QP the request was posted on.
	QPN uint32
}

// Len returns the total length of the scatter-gather list.
func (wr *SendWR) Len() uint64 { return sglLen(wr.SGL) }

// Len returns the total length of the scatter-gather list.
func (wr *RecvWR) Len() uint64 { return sglLen(wr.SGL) }

func sglLen(sgl []SGE) uint64 {
	var n uint64
	for i := range sgl {
		n += uint64(sgl[i].Length)
	}
	return n
}
