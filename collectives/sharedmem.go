package collectives

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/rdmacell/rdmacell/comm"
	"github.com/rdmacell/rdmacell/flight"
	"github.com/rdmacell/rdmacell/internal/futex"
	"github.com/rdmacell/rdmacell/internal/hostseg"
	"golang.org/x/sys/unix"
)

// Shared memory among the ranks of one host.
//
// On one host there is no fabric whose paths RDMACell could balance, and
// every message through the communicator pays for a grant, tokens and a
// final before its receiver may look at it: tens of microseconds even
// when nothing else runs. A group whose ranks all reach each other over
// shm therefore maps one segment (package hostseg) and moves its data
// through it: each rank has control lines and two slots, and an
// operation is a sequence of phases separated by barriers on the control
// lines. The design rule that makes it safe without locks:
//
//	in phase k a rank writes only its own slot k mod 2 (and what it
//	publishes with the barrier that ends the phase), and reads only
//	slots (k-1) mod 2 (and what the others published with the barrier
//	before);
//
// since every rank finishes phase k before any starts phase k+1, nothing
// is ever read while it is written, and an operation's last phase (reads
// only, no barrier after it) cannot collide with the next operation's
// first. The fingerprint of every operation, shared or not, is written in
// its first phase and compared after the first barrier, so the ranks
// agree before any output is written, in one barrier instead of log2(n)
// message rounds.
//
// A waiting rank spins for shSpin, then sleeps on a futex on the step
// word of the rank it waits for, after counting itself in that rank's
// waiters; an arriving rank makes the wake system call only when its
// count is not zero. Where the host has fewer processors than the group
// has ranks, a spinning rank would hold the processor its peer needs, so
// it yields the processor at every look instead (with four ranks on two
// processors an 8-byte AllReduce then took 30 µs, against 100 µs when
// sleeping at once); so does any wait once it has spun shSpinAlone, since
// a peer that late is likely waiting for a processor that other processes
// took (a busy process beside two ranks on two cores made an 8-byte
// AllReduce take 1 µs or 190 µs by where the kernel put it, and 13 µs
// every time with the yield). Between sleeps it checks its context, the
// communicator (comm's Err: an abort, a dead rank) and the lock of the
// rank it waits for, which the kernel drops when that process exits: a
// dead peer is an error naming it within shSleep.

// hostLocal is what a P2P offers when its ranks may share memory; comm's
// ordered channel does.
type hostLocal interface {
	Transport(peer int) string
	Err() error
}

// logging is a P2P with a logger, for what a group wants its user to
// know: comm's ordered channel has one.
type logging interface{ Logger() *slog.Logger }

// warnNoShare says why a rank that could have shared memory with the
// others did not: its group's collectives will be far slower.
func (g *Group) warnNoShare(why string, err error) {
	if l, ok := g.p.(logging); ok {
		l.Logger().Warn("collectives: the ranks share a host but this group will not share memory; its collectives go over messages", "why", why, "err", err)
	}
}

const (
	// tagShare marks the messages that set the segment up.
	tagShare = tagVerify | 1<<62
	shSpin   = 200 * time.Microsecond
	// shSpinAlone is how long a wait spins without yielding its
	// processor.
	shSpinAlone = 5 * time.Microsecond
	shSleep     = 2 * time.Millisecond
	// shDirect: every rank combines the whole of an AllReduce up to
	// this size (of any size, with two ranks); above it, with more
	// ranks, each combines a share.
	shDirect = 32 << 10
	// shMaxData bounds the slots of one segment.
	shMaxData = 32 << 20
	// A rank's control lines: one per barrier parity, then one with the
	// full fingerprint records (read only when the hashes differ). A
	// barrier's line holds what the barrier publishes: the rank's step,
	// the number of ranks asleep waiting for it, the hash of its
	// operation's fingerprint and up to shInline bytes of data. A barrier
	// of a small operation thus costs one cache miss per peer, and a rank
	// that went on to the next barrier writes the other line, not the one
	// its peers are still reading.
	ctlLine    = 192
	offWaiters = 8
	offHash    = 16
	offInline  = 24
	shInline   = 16
	offRecords = 128
)

// errGone is what a rank that waited on a departed peer reports.
var errGone = errors.New("it holds no lock on the group's shared memory: its process exited or closed the group")

// shared is one rank's view of the segment.
type shared struct {
	seg     *hostseg.Segment
	n, me   int
	chunk   int          // bytes of a slot's data region, and of its result region
	steps   [][2]*uint64 // per rank and barrier parity
	waiters [][2]*uint32
	step    uint64 // barriers completed; the current phase's slot is step&1
	yield   bool   // fewer processors than ranks: give the processor away while waiting
	errf    func() error
	// rec and h record, in the operation's flight record, the rank a
	// wait found late.
	rec *flight.Recorder
	h   flight.Handle
}

// shChunk is the size of a slot's regions for n ranks: the group's chunk,
// at least 16 bytes per rank (the per-destination share of AllToAll and
// ReduceScatter is at least an element; AllToAllV publishes two counts per
// rank), in whole cache lines, within shMaxData; 0 if no size fits, as for
// thousands of ranks.
func shChunk(n, chunk int) int {
	c := max(chunk, 16*n, 64)
	c = min(c, shMaxData/(2*regions(n)*n)) &^ 63
	if c < 16*n {
		return 0
	}
	return c
}

// regions is how many regions a slot has: data, and with more than two
// ranks the shares AllReduce's pipeline combined (two ranks each combine
// the whole vector).
func regions(n int) int {
	if n > 2 {
		return 2
	}
	return 1
}

// shLayout returns where the slots start, after the control lines, and
// the segment's size.
func shLayout(n, chunk int) (data, size int) {
	data = (n*ctlLine + 4095) &^ 4095
	return data, data + 2*n*regions(n)*chunk
}

func newShared(seg *hostseg.Segment, n, me, chunk int, errf func() error) *shared {
	b := seg.Bytes()
	s := &shared{
		seg: seg, n: n, me: me, chunk: chunk, errf: errf,
		steps: make([][2]*uint64, n), waiters: make([][2]*uint32, n),
	}
	for r := range n {
		for p := range 2 {
			s.steps[r][p] = (*uint64)(unsafe.Pointer(&b[r*ctlLine+p*64]))
			s.waiters[r][p] = (*uint32)(unsafe.Pointer(&b[r*ctlLine+p*64+offWaiters]))
		}
	}
	s.yield = n > runtime.NumCPU()
	return s
}

// slot returns rank r's slot t: its data region and its result region
// (nil for two ranks).
func (s *shared) slot(r, t int) (data, res []byte) {
	b, c := s.seg.Bytes(), s.chunk
	d, _ := shLayout(s.n, c)
	off := d + (2*r+t)*regions(s.n)*c
	if regions(s.n) == 2 {
		res = b[off+c : off+2*c : off+2*c]
	}
	return b[off : off+c : off+c], res
}

// cur is this rank's slot of the current phase, prev(r) rank r's slot of
// the phase before.
func (s *shared) cur() (data, res []byte) { return s.slot(s.me, int(s.step&1)) }

func (s *shared) prev(r int) (data, res []byte) { return s.slot(r, int(s.step&1^1)) }

// hash, inline and fp are what rank r publishes with barrier b: its
// operation's fingerprint hash, inline data and fingerprint record. A rank
// writes them for s.step+1 (the barrier ahead) and reads them for s.step
// (the barrier just passed).
func (s *shared) hash(r int, b uint64) *uint64 {
	return (*uint64)(unsafe.Pointer(&s.seg.Bytes()[r*ctlLine+int(b&1)*64+offHash]))
}

func (s *shared) inline(r int, b uint64) []byte {
	off := r*ctlLine + int(b&1)*64 + offInline
	return s.seg.Bytes()[off : off+shInline : off+shInline]
}

func (s *shared) fp(r int, b uint64) []byte {
	off := r*ctlLine + offRecords + int(b&1)*fpSize
	return s.seg.Bytes()[off : off+fpSize]
}

// arrive ends this rank's part of the current phase.
func (s *shared) arrive() {
	s.step++
	p := s.step & 1
	atomic.StoreUint64(s.steps[s.me][p], s.step)
	if atomic.LoadUint32(s.waiters[s.me][p]) != 0 {
		futex.Wake(s.word(s.me))
	}
}

// word is the low half of rank r's step for the current barrier, the
// futex its waiters sleep on.
func (s *shared) word(r int) *uint32 { return (*uint32)(unsafe.Pointer(s.steps[r][s.step&1])) }

// laggard returns the first rank from r on that has not arrived, or -1.
func (s *shared) laggard(r int) int {
	for ; r < s.n; r++ {
		if atomic.LoadUint64(s.steps[r][s.step&1]) < s.step {
			return r
		}
	}
	return -1
}

// await waits until every rank has arrived. On failure it returns the
// rank it was waiting for.
func (s *shared) await(ctx context.Context) (int, error) {
	r := s.laggard(0)
	if r < 0 {
		return -1, nil
	}
	var start time.Time
	late := -1
	yield := s.yield
	for i := 1; ; i++ {
		if r = s.laggard(r); r < 0 {
			return -1, nil
		}
		if yield {
			// Raw: the runtime is not told, so it neither wakes another
			// thread to take this one's processor while the kernel runs
			// a peer, nor makes this one queue for it on return. Four
			// ranks on two cores ran 1 KiB to 128 KiB AllReduces 1.5×
			// faster so (bench/RESULTS.md).
			unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
		} else if i&255 != 0 {
			continue // the clock costs more than a look
		}
		if start.IsZero() {
			start = time.Now()
		}
		if err := ctx.Err(); err != nil {
			return r, err
		}
		if d := time.Since(start); d < shSpin {
			// A peer that has not arrived after shSpinAlone is likely
			// waiting for a processor this rank's spinning holds (other
			// processes took the rest): yield it from then on.
			yield = yield || d >= shSpinAlone
			continue
		}
		if err := s.blocked(r); err != nil {
			return r, err
		}
		if s.rec != nil && r != late {
			// Past the spin: worth telling a stall report about.
			s.rec.Wait(s.h, -1, r, flight.Memory)
			late = r
		}
		// Counted in r's waiters before looking at its step again: r
		// either stored its step before that look, or sees the count
		// after it and wakes the word, whose value then differs from
		// the one the wait expects.
		p := s.step & 1
		atomic.AddUint32(s.waiters[r][p], 1)
		w := atomic.LoadUint32(s.word(r))
		if atomic.LoadUint64(s.steps[r][p]) < s.step {
			futex.Wait(s.word(r), w, shSleep)
		}
		atomic.AddUint32(s.waiters[r][p], ^uint32(0))
	}
}

// blocked says why rank r, which had not arrived when last looked at,
// never will: the communicator failed, or r's process holds no lock on
// the segment any more. nil if it may still arrive, or did: a rank may
// arrive, go on and close its group between that look and this one, and
// it stores its step before it drops its lock.
func (s *shared) blocked(r int) error {
	err := s.errf()
	if err == nil {
		held, herr := s.seg.Held(r)
		switch {
		case herr != nil:
			err = herr
		case !held:
			err = errGone
		}
	}
	if err != nil && atomic.LoadUint64(s.steps[r][s.step&1]) >= s.step {
		return nil
	}
	return err
}

func (s *shared) close() error { return s.seg.Close() }

// share decides, with every rank, whether the group's ranks share memory,
// and if so maps the segment: rank 0 creates it and sends its name, every
// other rank opens it and says whether it could, and rank 0 announces the
// outcome. It runs once, before the group's first operation; a rank that
// cannot share (another transport, no access to rank 0's segment, another
// chunk size) votes no and the group keeps to messages.
//
// Whether every rank is on this host over shm is a fact every rank reads
// alike from the job's registrations (a job whose ranks disagreed on the
// transport could not have connected), so a group that spans hosts skips
// the vote, which is 3·(n−1) messages through rank 0.
func (g *Group) share(ctx context.Context) error {
	hl, ok := g.p.(hostLocal)
	if !ok {
		return nil
	}
	for r := range g.size {
		if r != g.rank && hl.Transport(r) != "shm" {
			return nil
		}
	}
	can := true
	chunk := shChunk(g.size, g.chunk)
	can = can && chunk > 0
	var seg *hostseg.Segment
	defer func() {
		if seg != nil && g.shm == nil {
			seg.Close()
		}
	}()
	var offer [64]byte // 1 if offered, the slot size, the name
	vote := []byte{0}
	if g.rank == 0 {
		if can {
			var err error
			if seg, err = g.openShared(true, "", chunk); err == nil {
				offer[0] = 1
				binary.LittleEndian.PutUint32(offer[1:], uint32(chunk))
				copy(offer[5:], seg.Name())
			} else {
				g.warnNoShare("cannot create the segment", err)
			}
			can = err == nil
		}
		for r := 1; r < g.size; r++ {
			if err := g.shareMsg(ctx, true, r, 0, offer[:]); err != nil {
				return err
			}
		}
		for r := 1; r < g.size; r++ {
			if err := g.shareMsg(ctx, false, r, 1, vote); err != nil {
				return err
			}
			can = can && vote[0] == 1
		}
		vote[0] = 0
		if can {
			vote[0] = 1
		}
		for r := 1; r < g.size; r++ {
			if err := g.shareMsg(ctx, true, r, 2, vote); err != nil {
				return err
			}
		}
	} else {
		if err := g.shareMsg(ctx, false, 0, 0, offer[:]); err != nil {
			return err
		}
		// Ranks whose chunk sizes differ would lay the slots out
		// differently: they vote no.
		switch theirs := int(binary.LittleEndian.Uint32(offer[1:])); {
		case !can || offer[0] == 0:
			can = false
		case theirs != chunk:
			can = false
			g.warnNoShare(fmt.Sprintf("Options.ChunkBytes gives %d-byte slots here, %d at rank 0", chunk, theirs), nil)
		default:
			name, _, _ := bytes.Cut(offer[5:], []byte{0})
			var err error
			seg, err = g.openShared(false, string(name), chunk)
			if err != nil {
				g.warnNoShare("cannot open rank 0's segment", err)
			}
			can = err == nil
		}
		if can {
			vote[0] = 1
		}
		if err := g.shareMsg(ctx, true, 0, 1, vote); err != nil {
			return err
		}
		if err := g.shareMsg(ctx, false, 0, 2, vote); err != nil {
			return err
		}
		can = vote[0] == 1
	}
	if can {
		g.shm = newShared(seg, g.size, g.rank, chunk, hl.Err)
	}
	return nil
}

// openShared creates (rank 0) or opens the segment and takes this rank's
// lock in it.
func (g *Group) openShared(create bool, name string, chunk int) (*hostseg.Segment, error) {
	_, size := shLayout(g.size, chunk)
	var seg *hostseg.Segment
	var err error
	if create {
		seg, err = hostseg.Create(size)
	} else {
		seg, err = hostseg.Open(name, size)
	}
	if err != nil {
		return nil, err
	}
	if err := seg.Lock(g.rank); err != nil {
		seg.Close()
		return nil, err
	}
	return seg, nil
}

func (g *Group) shareMsg(ctx context.Context, send bool, peer, round int, b []byte) error {
	var req comm.Request
	var err error
	dir := "receive"
	if send {
		dir = "send"
		req, err = g.p.Isend(peer, tagShare|uint64(round), b)
	} else {
		req, err = g.p.Irecv(peer, tagShare|uint64(round), b)
	}
	if err == nil {
		if g.rec != nil {
			d := flight.Recv
			if send {
				d = flight.Send
			}
			g.rec.Wait(g.x.h, -1, peer, d)
		}
		_, err = req.Wait(ctx)
	}
	if err != nil {
		return fmt.Errorf("shared-memory setup, round %d, %s with rank %d: %w", round, dir, peer, err)
	}
	return nil
}
