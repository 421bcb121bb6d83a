// Package exact sums floating-point numbers without rounding: an Acc holds
// the exact sum of any number of float64 (or float32) values, and rounds
// it once, correctly, when asked. The result therefore depends only on
// the multiset of values added, not on their order or on how they were
// split between accumulators that were later merged.
//
// # Representation
//
// An Acc is a fixed-point number wide enough for the whole float64 range:
// 68 digits of 32 bits, digit k weighing 2^(32k-1074), so that the least
// significant digit holds the smallest subnormal and the top ones hold
// sums far beyond the largest finite float64. Each digit is stored in an
// int64, which leaves 31 bits of headroom: adding a value adds at most
// 2^32 to three digits, with no carry, and carries are propagated only
// when the headroom could run out (after about 2^30 additions) and before
// rounding. Infinities and NaNs are counted beside the digits, and so are
// negative zeros, so that a sum of only -0 is -0 as in IEEE arithmetic.
//
// Every field is an int64 and merging two accumulators adds them field by
// field, so a slice of accumulators is a slice of int64 (Words) that an
// integer Sum reduction merges exactly, in any order, on any number of
// ranks. That is how package collectives exchanges them (AllReduceAcc).
//
// # Cost
//
// Add is a few integer operations on three digits (about 5 ns; see
// BenchmarkAdd); rounding propagates carries over all digits and scans
// for the top one (about 100 ns). An Acc is 576 bytes, 72 times a float64: what an
// exchange of accumulators moves.
package exact

import (
	"math"
	"math/bits"
	"unsafe"
)

const (
	// Digits is the number of 32-bit digits of an Acc.
	Digits = 68
	// minExp is the weight of digit 0's lowest bit: the smallest
	// float64 subnormal is 2^-1074.
	minExp = -1074
	// Words is the number of int64 words of an Acc: the digits, the
	// counts of NaNs, +Inf, -Inf and -0, the count of other values, and
	// the load.
	Words = Digits + 6
	// maxLoad bounds load before carries must be propagated: each unit
	// of load may have added up to 2^32 to a digit, and |digit| must
	// stay below 2^63.
	maxLoad = 1 << 30
	mask32  = 1<<32 - 1
)

// Acc is an exact accumulator. The zero value is an empty sum (+0).
// An Acc is plain data: copying it copies the sum.
type Acc struct {
	d [Digits]int64
	// Counts of special and signed-zero inputs, and of the rest.
	nan, pinf, ninf, negz, others int64
	// load is an upper bound on max|d[k]| / 2^32: 1 after carries were
	// propagated, one more per Add, the sum of both on Merge.
	load int64
}

// The layout must be Words int64s with no padding for Words to be a view.
var _ [unsafe.Sizeof(Acc{}) - Words*8]struct{}

// Reset empties a.
func (a *Acc) Reset() { *a = Acc{} }

// Add adds x to a, exactly.
func (a *Acc) Add(x float64) {
	b := math.Float64bits(x)
	neg := b>>63 != 0
	e := int(b>>52) & 0x7ff
	m := b & (1<<52 - 1)
	switch {
	case e == 0x7ff:
		switch {
		case m != 0:
			a.nan++
		case neg:
			a.ninf++
		default:
			a.pinf++
		}
		return
	case e == 0:
		if m == 0 {
			if neg {
				a.negz++
			} else {
				a.others++
			}
			return
		}
		e = 1 // subnormal: m × 2^-1074
	default:
		m |= 1 << 52
	}
	a.others++
	if a.load >= maxLoad {
		a.normalize()
	}
	a.load++
	p := e - 1 // bit position of m's lowest bit above 2^-1074
	k, s := p>>5, uint(p&31)
	lo := m << s
	hi := m >> (64 - s) // 0 for s = 0: Go's shifts by 64 give 0
	d0, d1, d2 := int64(lo&mask32), int64(lo>>32), int64(hi)
	if neg {
		a.d[k] -= d0
		a.d[k+1] -= d1
		a.d[k+2] -= d2
	} else {
		a.d[k] += d0
		a.d[k+1] += d1
		a.d[k+2] += d2
	}
}

// AddFloat32 adds x to a, exactly (float64 holds every float32).
func (a *Acc) AddFloat32(x float32) { a.Add(float64(x)) }

// Merge adds b's sum to a's.
func (a *Acc) Merge(b *Acc) {
	if a.load+b.load > maxLoad {
		a.normalize()
		if b.load > 1 {
			c := *b
			c.normalize()
			b = &c
		}
	}
	for k := range a.d {
		a.d[k] += b.d[k]
	}
	a.nan += b.nan
	a.pinf += b.pinf
	a.ninf += b.ninf
	a.negz += b.negz
	a.others += b.others
	a.load += b.load
}

// Normalize propagates carries, so that every digit but the top one is in
// [0, 2^32) and the top one holds the sign. It does not change the sum;
// it bounds the digits before an exchange (see Words).
func (a *Acc) Normalize() { a.normalize() }

func (a *Acc) normalize() {
	var carry int64
	for k := range Digits - 1 {
		v := a.d[k] + carry
		a.d[k] = v & mask32
		carry = v >> 32 // arithmetic: the floor, for negative v too
	}
	a.d[Digits-1] += carry
	a.load = 1
}

// Float64 returns the sum rounded to the nearest float64, ties to even:
// ±Inf beyond the largest finite float64 (or when infinities of one sign
// were added), NaN when a NaN or infinities of both signs were added.
func (a *Acc) Float64() float64 { return a.round(53, -1022) }

// Float32 returns the sum rounded once to the nearest float32, ties to
// even, with the same special cases as Float64. It is not Float64
// converted to float32, which would round twice.
func (a *Acc) Float32() float32 {
	r := a.round(24, -126)
	if math.Abs(r) >= 0x1p128 {
		// Go leaves an out-of-range conversion to the implementation.
		return float32(math.Copysign(math.Inf(1), r))
	}
	return float32(r)
}

// round returns the sum rounded to p significant bits with minimum normal
// exponent emin, as a float64 (exact: such a value is a float64, or the
// float64 conversion of a float32 overflows as the float32 one would).
func (a *Acc) round(p, emin int) float64 {
	switch {
	case a.nan > 0 || a.pinf > 0 && a.ninf > 0:
		return math.NaN()
	case a.pinf > 0:
		return math.Inf(1)
	case a.ninf > 0:
		return math.Inf(-1)
	}
	c := *a
	c.normalize()
	neg := c.d[Digits-1] < 0
	if neg {
		for k := range c.d {
			c.d[k] = -c.d[k]
		}
		c.normalize()
	}
	t := Digits - 1
	for t >= 0 && c.d[t] == 0 {
		t--
	}
	if t < 0 {
		if a.negz > 0 && a.others == 0 {
			return math.Copysign(0, -1)
		}
		return 0
	}
	if c.d[t]>>32 != 0 {
		return signed(math.Inf(1), neg) // only the top digit can be this large
	}
	top := 32*t + bits.Len64(uint64(c.d[t])) - 1 // bit index of the leading one
	exp := top + minExp                          // its weight is 2^exp
	q := max(exp, emin) - (p - 1) - minExp       // bit index of the last bit kept
	var m uint64
	if q <= 0 {
		m = c.bitRange(0, top+1) // exact: every bit is kept
		q = 0
	} else {
		if q <= top {
			m = c.bitRange(q, top+1)
		}
		if c.bit(q-1) && (m&1 == 1 || c.anyBelow(q-1)) {
			m++ // a carry to 2^p is still exact in float64
		}
	}
	return signed(math.Ldexp(float64(m), q+minExp), neg)
}

func signed(x float64, neg bool) float64 {
	if neg {
		return -x
	}
	return x
}

// bit reports bit i (from 2^-1074) of a normalized non-negative sum.
func (a *Acc) bit(i int) bool {
	if i < 0 || i >= 32*Digits {
		return false
	}
	return a.d[i>>5]>>(i&31)&1 != 0
}

// bitRange returns bits [lo, hi) of a normalized non-negative sum;
// 0 <= lo, hi-lo <= 64.
func (a *Acc) bitRange(lo, hi int) uint64 {
	k, s := lo>>5, uint(lo&31)
	digit := func(j int) uint64 {
		if j < Digits {
			return uint64(a.d[j])
		}
		return 0
	}
	v := (digit(k)|digit(k+1)<<32)>>s | digit(k+2)<<(64-s) // s = 0: the shift by 64 gives 0
	if n := hi - lo; n < 64 {
		v &= 1<<n - 1
	}
	return v
}

// anyBelow reports whether any bit below i is set.
func (a *Acc) anyBelow(i int) bool {
	k := i >> 5
	for j := range k {
		if a.d[j] != 0 {
			return true
		}
	}
	return k < Digits && a.d[k]&(1<<(i&31)-1) != 0
}

// AsWords views accs as their int64 words, Words per accumulator, without
// copying. Adding the words of two accumulators element by element merges
// them, provided both were normalized and fewer than 2^30 are merged:
// an integer Sum reduction of the words of normalized accumulators
// (AllReduceAcc in package collectives) is an exact, order-independent
// merge. The load word records how many were merged.
func AsWords(accs []Acc) []int64 {
	if len(accs) == 0 {
		return nil
	}
	return unsafe.Slice((*int64)(unsafe.Pointer(&accs[0])), len(accs)*Words)
}

// Valid reports whether a's words could have come from Add, Merge and
// word-wise sums of normalized accumulators: counts not negative and a
// load within bounds. An Acc that fails it (words received from a rank
// that did not normalize, say) may round wrongly.
func (a *Acc) Valid() bool {
	return a.nan >= 0 && a.pinf >= 0 && a.ninf >= 0 && a.negz >= 0 && a.others >= 0 &&
		a.load >= 0 && a.load <= maxLoad
}
