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
		delay := p.Delay
		if p.Samples == 0 {
			delay = shortest
			if delay < 0 {
				delay = p.SRTT
			}
		}
		t := float64(delay) + float64(p.Bytes+n)*1e9/float64(bw)
		if best < 0 || t < bestT {
			best, bestT = i, t
		}
	}
	if best < 0 || paths[best].Credits == 0 {
		return -1
	}
	return best
}

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
