package sim

import "math"

// rng is xorshift64*: fast, tiny, and the same sequence for the same seed
// on every platform, which is all a deterministic simulation asks.
type rng struct{ s uint64 }

func newRNG(seed uint64) rng {
	r := rng{s: seed*0x9E3779B97F4A7C15 + 0x2545F4914F6CDD1D}
	if r.s == 0 {
		r.s = 1
	}
	return r
}

func (r *rng) u64() uint64 {
	r.s ^= r.s >> 12
	r.s ^= r.s << 25
	r.s ^= r.s >> 27
	return r.s * 0x2545F4914F6CDD1D
}

// float returns a uniform value in [0, 1).
func (r *rng) float() float64 { return float64(r.u64()>>11) / (1 << 53) }

// intn returns a uniform value in [0, n).
func (r *rng) intn(n int) int { return int(r.u64() % uint64(n)) }

// exp returns an exponential variate of the given mean.
func (r *rng) exp(mean float64) float64 { return -mean * math.Log(1-r.float()) }

// hash32 is a murmur3-style finaliser over the 5-tuple and a switch's
// seed: each switch hashes differently, so that hashing decisions at
// successive tiers do not polarise.
func hash32(seed uint32, src, dst int32, sport, dport uint16) uint32 {
	h := seed
	for _, k := range [3]uint32{uint32(src), uint32(dst), uint32(sport) | uint32(dport)<<16} {
		k *= 0xcc9e2d51
		k = k<<15 | k>>17
		k *= 0x1b873593
		h ^= k
		h = h<<13 | h>>19
		h = h*5 + 0xe6546b64
	}
	h ^= 12
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	return h
}
