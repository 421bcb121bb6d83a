package cell

import (
	"strconv"
	"time"

	"github.com/rdmacell/rdmacell/verbs"
)

// PathState is the engine's view of one path (QP) of the connection.
type PathState uint8

const (
	// PathUp: the path carries cells.
	PathUp PathState = iota + 1
	// PathDown: the path was given up and is being reset. Copies posted on
	// it before may still land until both ends have left its old
	// incarnation (PathQuiet, or PathReset).
	PathDown
	// PathDead: the path was closed for good.
	PathDead
	// PathSlow: the path was demoted, not given up: a cell on it went
	// past T_soft and was posted again elsewhere. It takes no new cells
	// until every copy it holds has landed, and then is up again with
	// what it measured meanwhile. It is given up only if it shows no
	// progress at all for NoProgressFactor times as long (see "Slow is not
	// dead" in the package doc).
	PathSlow
)

var pathStateNames = [...]string{"invalid", "up", "down", "dead", "slow"}

func (s PathState) String() string {
	if int(s) < len(pathStateNames) {
		return pathStateNames[s]
	}
	return "PathState(" + strconv.Itoa(int(s)) + ")"
}

// PathInfo is a snapshot of one path, what a Policy decides on.
type PathInfo struct {
	State PathState
	// Credits is how many more cells the path may take now: the receives
	// its receiver has posted less the cells outstanding on it.
	Credits int
	// Cells and Bytes are outstanding on the path: posted, not yet
	// acknowledged by a token or cleared by a reset.
	Cells int
	Bytes int64
	// SRTT and RTTVar are the smoothed RTT and its mean deviation;
	// SoftTimeout is T_soft (a cell given up before on a soft timeout
	// gets a multiple of it, see Config.MaxSoftBackoff). Before the first
	// sample they derive from Config.InitialRTT.
	SRTT, RTTVar, SoftTimeout time.Duration
	// LateMargin is how long after its expected token a head copy may
	// wait before the path is demoted, once a token was compared with
	// its expectation (0 before; T_soft is the clock until then). See
	// "Slow is not dead" in the package doc.
	LateMargin time.Duration
	// Delay is the smoothed RTT less the time each sample waited behind
	// the bytes posted before it on the path: what a cell would take on
	// the path were it empty. Unlike SRTT it does not grow with the
	// path's backlog; like it, it grows with the path's delay. Valid
	// once Samples > 0.
	Delay time.Duration
	// Bandwidth is the measured delivery rate in bytes per second, 0
	// until the path has been measured.
	Bandwidth int64
	// Samples counts RTT samples since the path was last (re)admitted.
	Samples int
	// CellsPosted and BytesPosted count every copy ever posted on the
	// path, re-posts included.
	CellsPosted, BytesPosted uint64
	// Tokens counts the tokens that acknowledged copies posted on it.
	Tokens uint64
	// GiveUps counts the times the path was given up (a NACK or error
	// completion, a failure its peer reported, no progress at all while
	// demoted), each of which started a reset. SoftTimeouts counts the
	// times a cell on it waited past T_soft, each of which demoted it;
	// Promotions the times it was up again after draining.
	GiveUps, SoftTimeouts, Promotions uint64
	// Reprobes counts the times its measurements had gone stale while
	// other paths carried the cells, and it was probed again.
	Reprobes uint64
}

// copyRec is one copy of a cell posted on a path.
type copyRec struct {
	id     uint32
	sentAt int64
	n      int64
	ahead  int64  // bytes outstanding on the path when it was posted
	batch  uint64 // the Ready batch it went out in
	// backoff is the cell's back-off shift when posted: how many of its
	// earlier copies were given up for a soft timeout.
	backoff uint8
}

// path is the engine's state of one QP. Its copy queue holds, in posting
// order, every copy that could still land: RC executes a QP's requests in
// order, so a token for one copy proves that every copy before it landed
// too. It never holds more than RecvDepth copies: credits bound the copies
// of an up path, and a path takes none while down.
type path struct {
	idx     int
	state   PathState
	credits int
	copies  []copyRec // ring
	head, n int
	bytes   int64
	// progress is when the path last showed progress (a token, or its
	// admission); a copy queued behind others is late only relative to it.
	// alive is when a cell of the peer's last arrived on it: the tokens
	// for this end's cells come back behind those, on the same QP.
	progress, alive int64
	est             estimator
	cause           error
	// quiet says a down path's old incarnation is gone at both ends:
	// nothing posted on it can land any more, though it is not back.
	quiet bool

	// incarn numbers the incarnations of the path's local QP, as far as
	// its receives tell them apart: every give-up starts one, whose Reset
	// posts the refill in the reinitialised QP. Receive ids carry it, so
	// that an arrival on an incarnation that is gone is recognised.
	incarn uint8

	// refill holds the chain that fills the path's receive queue, at
	// start and after each reset; repost the receives given back in one
	// batch.
	refill     []verbs.RecvWR
	repost     []verbs.RecvWR
	recvQueued int // receives of the current batch

	cellsPosted, bytesPosted                            uint64
	tokens, giveUps, softTimeouts, promotions, reprobes uint64
}

// init makes p a new path, reusing the storage it has (Engine.Reset).
func (p *path) init(idx, depth int, initialRTT, floor int64, now int64) {
	*p = path{
		idx:    idx,
		copies: resize(p.copies, depth), // written by push before any read
		refill: reuse(p.refill, depth),
		repost: reuse(p.repost, depth),
	}
	p.admit(depth, initialRTT, floor, now)
}

// admit makes the path usable with fresh estimates: after a reset the
// path may be another route altogether, and stale bad numbers would keep
// an adaptive policy from ever trying it again.
func (p *path) admit(depth int, initialRTT, floor, now int64) {
	p.state, p.quiet = PathUp, false
	p.credits = depth
	p.head, p.n, p.bytes = 0, 0, 0
	p.progress, p.alive = now, now
	p.est.init(initialRTT, floor)
	p.cause = nil
}

// live reports whether the path's QP is in service: up, or slow.
func (p *path) live() bool { return p.state == PathUp || p.state == PathSlow }

func (p *path) at(i int) *copyRec { return &p.copies[(p.head+i)%len(p.copies)] }

func (p *path) push(c copyRec) {
	*p.at(p.n) = c
	p.n++
	p.bytes += c.n
}

func (p *path) popHead() copyRec {
	c := p.copies[p.head]
	p.head = (p.head + 1) % len(p.copies)
	p.n--
	p.bytes -= c.n
	return c
}

func (p *path) popTail() copyRec {
	p.n--
	c := *p.at(p.n)
	p.bytes -= c.n
	return c
}

// find returns the position of the copy of cell id, or -1.
func (p *path) find(id uint32) int {
	for i := 0; i < p.n; i++ {
		if p.at(i).id == id {
			return i
		}
	}
	return -1
}

// deadline is when the oldest outstanding copy becomes late, or 0: its
// headSpan after it could start to leave, times its cell's back-off, at
// most maxBackoff. On a slow path it is when the path counts as broken:
// NoProgressFactor times that with neither a token nor an arrival, which
// would show the QP moving, though the tokens wait behind the peer's
// cells.
func (p *path) deadline(maxBackoff int) int64 {
	if !p.live() || p.n == 0 {
		return 0
	}
	c := p.at(0)
	span := p.headSpan(c) * backoffFactor(c.backoff, maxBackoff)
	if p.state == PathSlow {
		return max(c.sentAt, p.progress, p.alive) + NoProgressFactor*span
	}
	return max(c.sentAt, p.progress) + span
}

// headSpan is how long after it could start to leave (its post, or the
// path's previous token) head copy c may wait for its token before it is
// late. Once the path has a delay and a rate measured it is from when
// the token is expected (the path's delay after the post, or the copy's
// bytes drained behind the previous token) plus the margin its tokens'
// lateness has needed. T_soft, which is RTT_avg + 4·RTT_var from the
// post, would count the cells queued ahead twice: their time is already
// behind the previous token, and on a deep window it is most of the RTT.
// Until then it is T_soft.
func (p *path) headSpan(c *copyRec) int64 {
	at := p.est.expect(c.sentAt, p.progress, c.n)
	m := p.est.lateMargin()
	if at == 0 || m == 0 {
		return p.est.softTimeout()
	}
	return at + m - max(c.sentAt, p.progress)
}

// NoProgressFactor is how many times the time that made its cell late a
// demoted path may go without a token or an arrival before it is given
// up. On the lab's shaped fabric a healthy path's TCP connection stalls
// for twice T_soft's floor at times (a loss and its retransmission
// timeout): with three, healthy jobs there gave up a quarter of the paths
// they did with two.
const NoProgressFactor = 3

// backoffFactor is 2^shift, at most limit.
func backoffFactor(shift uint8, limit int) int64 {
	if shift >= 62 {
		return int64(limit)
	}
	return min(int64(1)<<shift, int64(limit))
}

// bumpBackoff doubles a back-off shift, up to the first that reaches
// limit.
func bumpBackoff(shift *uint8, limit int) {
	if backoffFactor(*shift, limit) < int64(limit) {
		*shift++
	}
}

// refillChain links the path's whole refill storage, for the current
// incarnation.
func (p *path) refillChain() *verbs.RecvWR {
	for i := range p.refill {
		p.refill[i].ID = recvWRID(p.idx, p.incarn, i)
		p.refill[i].Next = nil
		if i+1 < len(p.refill) {
			p.refill[i].Next = &p.refill[i+1]
		}
	}
	return &p.refill[0]
}

func (p *path) info() PathInfo {
	return PathInfo{
		State:        p.state,
		Credits:      p.credits,
		Cells:        p.n,
		Bytes:        p.bytes,
		SRTT:         time.Duration(p.est.srtt),
		RTTVar:       time.Duration(p.est.rttvar),
		SoftTimeout:  time.Duration(p.est.softTimeout()),
		LateMargin:   time.Duration(p.est.lateMargin()),
		Delay:        time.Duration(p.est.delay),
		Bandwidth:    p.est.bw,
		Samples:      p.est.samples,
		CellsPosted:  p.cellsPosted,
		BytesPosted:  p.bytesPosted,
		Tokens:       p.tokens,
		GiveUps:      p.giveUps,
		SoftTimeouts: p.softTimeouts,
		Promotions:   p.promotions,
		Reprobes:     p.reprobes,
	}
}

// Work request ids: the top byte says what posted the request, so that a
// completion can be told apart from the driver's own requests.
const (
	wrKindCell = 0xCE << 56
	wrKindRecv = 0xCF << 56
	wrKindMask = 0xFF << 56
)

func cellWRID(path int, id uint32, tail bool) uint64 {
	v := uint64(wrKindCell) | uint64(path)<<40 | uint64(id)
	if tail {
		v |= 1 << 32
	}
	return v
}

func recvWRID(path int, incarn uint8, i int) uint64 {
	return uint64(wrKindRecv) | uint64(path)<<40 | uint64(incarn)<<32 | uint64(i)
}

// recvIncarn returns the incarnation a receive id was posted in.
func recvIncarn(id uint64) uint8 { return uint8(id >> 32) }
