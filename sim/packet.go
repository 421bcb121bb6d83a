package sim

import "slices"

// pktKind is what a packet carries.
type pktKind uint8

const (
	pkData     pktKind = iota // a payload packet of a QP
	pkAck                     // cumulative acknowledgement (ack = next expected)
	pkNack                    // Go-Back-N request (ack = first missing)
	pkProbe                   // HULA probe (a = origin ToR, b = utilization)
	pkCWReply                 // ConWeave RTT reply, destination ToR to source ToR
	pkCWClear                 // ConWeave: reordering of an epoch is over
	pkCWNotify                // ConWeave: a path saw ECN (a = path)
	pkPause                   // PFC: a = 1 pause the data class, 0 resume it
)

// Packet flags.
const (
	flECN    uint8 = 1 << iota // congestion experienced, set by a switch
	flCNP                      // on an ACK/NACK: the sender's rate should drop
	flLast                     // the last packet of a message
	flInit                     // ConWeave: RTT request (first packet of an epoch)
	flTail                     // ConWeave: last packet on the old path
	flPhase1                   // ConWeave: sent on the new path of its epoch
	flPrio                     // data in the control class (RDMACell receiver-end writes)
)

// packet is one frame on the wire. Everything a scheme needs rides in it
// as plain fields; packets live in a pool and are named by index. It is
// 64 bytes, one cache line: a packet is read at every hop after it has
// sat in a queue or on a link long enough to leave the cache.
type packet struct {
	at    int64 // ConWeave: when the source ToR forwarded it
	qp    int32 // the QP it belongs to (data, ack, nack, ConWeave control)
	seq   int32 // data: packet sequence number; ack/nack: cumulative
	msg   int32 // data: absolute index of its message in the QP's queue
	src   int32 // source host, or -1 for a switch's control packet
	dst   int32 // destination host, or -1
	epoch int32 // QP incarnation (resets)
	in    int32 // PFC: the ingress port it is charged to at the current switch
	// Scheme fields: HULA probe origin and utilization; ConWeave control
	// path (a) and epoch (b); on data, CONGA's piggybacked feedback path
	// (a, -1 none) and ConWeave's epoch of the flow (b).
	a, b   int32
	dstTor int16 // switch the packet is routed to
	srcTor int16
	path   int16  // source route (CONGA/LetFlow/ConWeave), -1 for ECMP
	rem    int16  // what is left of path to consume at the next choices
	size   uint16 // bytes on the wire
	pay    uint16 // payload bytes
	sport  uint16
	dport  uint16
	kind   pktKind
	flags  uint8
	ce     uint8 // CONGA: path congestion so far
	fbCE   uint8 // CONGA: piggybacked feedback metric
}

// pool recycles packets: a free list of indices into one slice.
type pool struct {
	p    []packet
	free []int32
	live int
}

func (pl *pool) get() int32 {
	pl.live++
	if n := len(pl.free); n > 0 {
		i := pl.free[n-1]
		pl.free = pl.free[:n-1]
		pl.p[i] = packet{path: -1, a: -1}
		return i
	}
	pl.p = append(grow(pl.p), packet{path: -1, a: -1})
	return int32(len(pl.p) - 1)
}

func (pl *pool) put(i int32) {
	pl.live--
	pl.free = append(pl.free, i)
}

// ring is a FIFO that grows as needed; its length is a power of two.
type ring[T any] struct {
	buf        []T
	head, size int
}

func (r *ring[T]) push(x T) {
	if r.size == len(r.buf) {
		n := max(16, 2*len(r.buf))
		nb := make([]T, n)
		for i := 0; i < r.size; i++ {
			nb[i] = r.buf[(r.head+i)&(len(r.buf)-1)]
		}
		r.buf, r.head = nb, 0
	}
	r.buf[(r.head+r.size)&(len(r.buf)-1)] = x
	r.size++
}

func (r *ring[T]) pop() T {
	x := r.buf[r.head]
	r.head = (r.head + 1) & (len(r.buf) - 1)
	r.size--
	return x
}

// front is the entry pop would return.
func (r *ring[T]) front() T { return r.buf[r.head] }

// qent is a packet in an egress queue with what dequeuing it needs, so
// that a port sends a packet that waited long enough to leave the cache
// without reading it back (but to mark it).
type qent struct {
	pk, size int32
	in       int32 // PFC: the ingress port it is charged to
}

// grow doubles a full slice's capacity ahead of an append: append grows
// large slices by a quarter at a time, which for the QP and packet tables
// meant copying them over and over.
func grow[T any](x []T) []T {
	if len(x) < cap(x) {
		return x
	}
	return slices.Grow(x, max(len(x), 64))
}
