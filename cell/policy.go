package cell

import (
	"fmt"
	"time"
)

// Policy places each new (or re-posted) cell on a path. The engine calls
// Pick with a snapshot of every path, indexed by path; Pick returns the
// index of a path that is PathUp with Credits > 0, or -1 to hold the cell
// until the next input (a token gives credit back, a reset re-admits a
// path). Pick must not keep paths beyond the call.
type Policy interface {
	Pick(paths []PathInfo, n int64) int
	// Name is how configuration spells the policy.
	Name() string
}

// ParsePolicy returns a new policy by name: "adaptive" (or ""), "ecmp" or
// "spray".
func ParsePolicy(name string) (Policy, error) {
	switch name {
	case "", "adaptive":
		return &Adaptive{}, nil
	case "ecmp":
		return &ECMP{}, nil
	case "spray":
		return &Spray{}, nil
	}
	return nil, fmt.Errorf("%w: policy %q, want adaptive, ecmp or spray", ErrInvalid, name)
}

// Adaptive sends each cell to the path that would complete it first:
// its delay (PathInfo.Delay) plus the time to drain what is outstanding on
// it and the cell at its measured bandwidth. A slow or congested path
// shows a higher delay and a lower delivery rate, and so gets fewer cells.
// The smoothed RTT would count the queue twice, since its samples include
// the time cells waited behind others on the path; and a path left idle
// would keep the queueing it once saw, get no cell, hence no sample that
// could clear it, and starve. When the best path has no credit the cell
// waits for it rather than go to a path expected to be slower.
//
// A path with no sample yet (new, or reset: it may be another route
// now) is assumed as fast as the best measured one, so that it gets
// tried, but while another path is measured it is probed with one cell
// at a time until its first token is back: a slow route trusted with a
// full window of cells on a guess would hold them all late. The engine
// hands a path whose measurements have gone stale, while others carried
// the cells, to the policy as unmeasured again, so that a path measured
// slow once is probed again in time rather than never.
//
// A small cell, a message of at most 8 KiB whose time is the path's delay
// rather than its bytes, goes to the first path about as quick as the
// quickest and not loaded with bulk cells, so that a connection's small
// messages, their tokens and its records travel on one QP.
type Adaptive struct{}

// Name returns "adaptive".
func (*Adaptive) Name() string { return "adaptive" }

// Pick implements Policy.
func (*Adaptive) Pick(paths []PathInfo, n int64) int {
	// An unmeasured path is assumed as fast as the best measured one, so
	// that it gets tried; with nothing measured, 1 GB/s ranks by backlog
	// and the initial RTT stands for the delay.
	var fastest int64
	shortest := time.Duration(-1)
	for i := range paths {
		p := &paths[i]
		if p.State != PathUp {
			continue
		}
		fastest = max(fastest, p.Bandwidth)
		if p.Samples > 0 && (shortest < 0 || p.Delay < shortest) {
			shortest = p.Delay
		}
	}
	if fastest == 0 {
		fastest = 1e9
	}
	if n <= smallCell {
		if q := firstQuick(paths, shortest); q >= 0 {
			return q
		}
	}
	best, bestT := -1, 0.0
	for i := range paths {
		p := &paths[i]
		if p.State != PathUp || p.Samples == 0 && p.Cells > 0 && shortest >= 0 {
			continue
		}
		bw := p.Bandwidth
		if bw == 0 {
			bw = fastest
		}
		t := float64(delayOf(p, shortest)) + float64(p.Bytes+n)*1e9/float64(bw)
		if best < 0 || t < bestT {
			best, bestT = i, t
		}
	}
	if best < 0 || paths[best].Credits == 0 {
		return -1
	}
	return best
}

// firstQuick places a small cell, one whose time is the path's delay
// rather than its own bytes (whose rate a path carrying only small cells
// does not even show): among the paths with credit and at most
// recordSlack outstanding, the first whose delay is within its noise of
// the least. The paths' delays differ by little more than that noise,
// and the first path then carries a connection's small messages, their
// tokens and its records (see Engine.ctrlPath) alike, so each end reads
// one socket for them rather than one per path. It returns -1 when no
// path qualifies.
func firstQuick(paths []PathInfo, shortest time.Duration) int {
	// A path not measured (or no longer: see forgetStale) is taken at
	// its smoothed RTT, the initial one or the last it had, not as fast
	// as the best: a probe here is someone's message, and would pay for
	// a slow path in full. Once the first path grows slower than that,
	// the others are tried; the bulk cells probe the rest.
	delay := func(p *PathInfo) time.Duration {
		if p.Samples == 0 {
			return p.SRTT
		}
		return p.Delay
	}
	least, dev := time.Duration(-1), time.Duration(0)
	for i := range paths {
		p := &paths[i]
		if !quickCandidate(p, shortest) {
			continue
		}
		if d := delay(p); least < 0 || d < least {
			least, dev = d, p.RTTVar
		}
	}
	if least < 0 {
		return -1
	}
	for i := range paths {
		if p := &paths[i]; quickCandidate(p, shortest) && delay(p) <= least+least/4+2*dev {
			return i
		}
	}
	return -1
}

func quickCandidate(p *PathInfo, shortest time.Duration) bool {
	return p.State == PathUp && p.Credits > 0 && p.Bytes <= recordSlack && !(p.Samples == 0 && p.Cells > 0 && shortest >= 0)
}

// delayOf is p's measured delay, or for a path not measured yet the
// least measured one (or its initial RTT when none is).
func delayOf(p *PathInfo, shortest time.Duration) time.Duration {
	switch {
	case p.Samples > 0:
		return p.Delay
	case shortest >= 0:
		return shortest
	}
	return p.SRTT
}

// A cell of at most smallCell bytes, half the least adaptive cell, is a
// small message or the end of a larger one, never its middle; it goes
// first to a path with at most recordSlack outstanding (see firstQuick),
// and so does a record (see Engine.ctrlPath): what a control slot holds.
const (
	smallCell   = 8 << 10
	recordSlack = 16 << 10
)

// ECMP models a plain RC connection on a fabric that hashes flows: every
// cell goes to one path, chosen by a static hash of Key. If that path is
// given up the next one in order takes over, as a reconnect would.
type ECMP struct {
	Key uint64
}

// Name returns "ecmp".
func (*ECMP) Name() string { return "ecmp" }

// Pick implements Policy.
func (e *ECMP) Pick(paths []PathInfo, _ int64) int {
	h := int(mix64(e.Key) % uint64(len(paths)))
	for k := range paths {
		i := (h + k) % len(paths)
		if paths[i].State != PathUp {
			continue
		}
		if paths[i].Credits == 0 {
			return -1
		}
		return i
	}
	return -1
}

// mix64 is the splitmix64 finaliser: a fixed, well-spread hash.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// Spray sends cells round-robin over the up paths, without feedback: when
// the path whose turn it is has no credit, the cell waits for it.
type Spray struct {
	next int
}

// Name returns "spray".
func (*Spray) Name() string { return "spray" }

// Pick implements Policy.
func (s *Spray) Pick(paths []PathInfo, _ int64) int {
	for k := range paths {
		i := (s.next + k) % len(paths)
		if paths[i].State != PathUp {
			continue
		}
		if paths[i].Credits == 0 {
			return -1
		}
		s.next = (i + 1) % len(paths)
		return i
	}
	return -1
}
