package sim

import "math/bits"

// evKind says what an event does when it fires.
type evKind uint8

const (
	evTxDone    evKind = iota // a port finished serializing a packet (a = port)
	evArrive                  // a packet reaches a node (a = packet, b = ingress port)
	evNicWake                 // a host's pacing gap is over (a = host)
	evRTO                     // a QP's retransmission timer may have expired (a = qp)
	evFlowStart               // a flow arrives (a = flow)
	evRecvPost                // a receiver posts the range of a flow (a = flow)
	evTick                    // an engine's deadline (a = conn end)
	evPathDown                // the peer end of a path learns of its reset (a = conn, b = path)
	evPathUp                  // a path's reset is done at both ends (a = conn, b = path)
	evProbe                   // a ToR sends HULA probes (a = switch)
	evFlush                   // a ConWeave reorder queue times out (a = qp, b = epoch)
)

// event is a flat value: no closures, no pointers, so the heap is one
// slice the collector never scans.
type event struct {
	at   int64
	seq  uint64
	kind evKind
	a, b int32
}

func (e *event) before(o *event) bool {
	if e.at != o.at {
		return e.at < o.at
	}
	return e.seq < o.seq
}

// eventHeap is a 4-ary min-heap on (at, seq): shallower than a binary
// heap, and its four children share a cache line or two.
type eventHeap struct {
	h   []event
	seq uint64
}

func (q *eventHeap) push(at int64, kind evKind, a, b int32) {
	q.seq++
	q.pushEvent(event{at: at, seq: q.seq, kind: kind, a: a, b: b})
}

// pushEvent queues e with the seq it carries.
func (q *eventHeap) pushEvent(e event) {
	q.h = append(q.h, e)
	i := len(q.h) - 1
	x := q.h[i]
	for i > 0 {
		p := (i - 1) / 4
		if !x.before(&q.h[p]) {
			break
		}
		q.h[i] = q.h[p]
		i = p
	}
	q.h[i] = x
}

func (q *eventHeap) len() int { return len(q.h) }

func (q *eventHeap) pop() event {
	top := q.h[0]
	n := len(q.h) - 1
	x := q.h[n]
	q.h = q.h[:n]
	if n == 0 {
		return top
	}
	i := 0
	for {
		c := 4*i + 1
		if c >= n {
			break
		}
		m := c
		for j := c + 1; j < c+4 && j < n; j++ {
			if q.h[j].before(&q.h[m]) {
				m = j
			}
		}
		if !q.h[m].before(&x) {
			break
		}
		q.h[i] = q.h[m]
		i = m
	}
	q.h[i] = x
	return top
}

// The simulator's queue is a timing wheel in front of the heap: nearly
// every event (a port done serializing, a packet reaching the next node)
// falls less than a few microseconds ahead, and for those a wheel of
// one-nanosecond slots is O(1), where a heap holding every timer of the
// run costs a dozen cache-missing levels per event. Events further ahead
// (timeouts, engine deadlines, flow arrivals) wait in the heap and move
// into the wheel as time reaches them.
const (
	wheelBits  = 12
	wheelSize  = 1 << wheelBits // nanoseconds the wheel spans
	wheelMask  = wheelSize - 1
	wheelWords = wheelSize / 64
)

// eventQueue pops events in (at, seq) order, exactly as one heap would.
// Each slot of the wheel holds the events of one instant, oldest first:
// they are pushed in seq order, and a heap event moves in before any
// push for the same instant can happen (see pop), except those pushed
// with a reserved seq, which are put in place.
type eventQueue struct {
	seq  uint64
	base int64 // the wheel holds events in [base, base+wheelSize)
	slot [wheelSize][]event
	head [wheelSize]int32
	used [wheelWords]uint64 // slots with events
	n    int                // events in the wheel
	far  eventHeap          // events at or after base+wheelSize
}

func (q *eventQueue) len() int { return q.n + q.far.len() }

// push queues an event with the next sequence number.
func (q *eventQueue) push(at int64, kind evKind, a, b int32) {
	q.seq++
	q.pushSeq(event{at: at, seq: q.seq, kind: kind, a: a, b: b})
}

// reserve sets n sequence numbers aside for events pushed later with
// pushSeq, and returns the first.
func (q *eventQueue) reserve(n int) uint64 {
	first := q.seq + 1
	q.seq += uint64(n)
	return first
}

// pushSeq queues e with the sequence number it carries.
func (q *eventQueue) pushSeq(e event) {
	if e.at < q.base {
		panic("sim: event in the past")
	}
	if e.at >= q.base+wheelSize {
		q.far.pushEvent(e)
		return
	}
	i := e.at & wheelMask
	s := append(q.slot[i], e)
	// A reserved (older) seq goes before younger events of its instant.
	for j := len(s) - 1; j > int(q.head[i]) && s[j-1].seq > e.seq; j-- {
		s[j], s[j-1] = s[j-1], s[j]
	}
	q.slot[i] = s
	q.used[i>>6] |= 1 << (i & 63)
	q.n++
}

// pop removes the earliest event. The queue must not be empty.
func (q *eventQueue) pop() event {
	if q.n == 0 {
		q.base = q.far.h[0].at
		q.pull()
	}
	i := q.next()
	s := q.slot[i]
	e := s[q.head[i]]
	q.head[i]++
	if int(q.head[i]) == len(s) {
		q.slot[i], q.head[i] = s[:0], 0
		q.used[i>>6] &^= 1 << (i & 63)
	}
	q.n--
	if e.at > q.base {
		q.base = e.at
		q.pull()
	}
	return e
}

// peek is the event pop would return next if it is in the wheel, or nil.
// It is a hint (a push may come before it): see Sim.Run.
func (q *eventQueue) peek() *event {
	if q.n == 0 {
		return nil
	}
	i := q.next()
	return &q.slot[i][q.head[i]]
}

// pull moves the heap's events that the wheel now spans into it, before
// any event of the same instant can be pushed there directly.
func (q *eventQueue) pull() {
	for q.far.len() > 0 && q.far.h[0].at < q.base+wheelSize {
		q.pushSeq(q.far.pop())
	}
}

// next is the first slot with events at or after base's, going round.
func (q *eventQueue) next() int64 {
	i := q.base & wheelMask
	w := i >> 6
	if m := q.used[w] >> (i & 63); m != 0 {
		return i + int64(bits.TrailingZeros64(m))
	}
	for k := int64(1); k <= wheelWords; k++ {
		j := (w + k) % wheelWords
		if m := q.used[j]; m != 0 {
			return j<<6 + int64(bits.TrailingZeros64(m))
		}
	}
	panic("sim: event wheel empty")
}
