package sim

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
	q.h = append(q.h, event{at: at, seq: q.seq, kind: kind, a: a, b: b})
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
