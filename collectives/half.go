package collectives

import "math"

// Conversions between float32 and the two 16-bit formats. Both directions
// are exact where the value is representable and round to nearest even
// otherwise; NaNs stay NaNs (quieted, the upper payload bits kept).

// f16ToF32Bits widens a binary16 to the bits of the equal float32.
func f16ToF32Bits(h uint16) uint32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	man := uint32(h) & 0x3ff
	switch exp {
	case 0:
		if man == 0 {
			return sign
		}
		// Subnormal: man × 2^-24, exact in float32.
		return sign | math.Float32bits(float32(man)*(1.0/(1<<24)))
	case 0x1f:
		if man == 0 {
			return sign | 0x7f800000
		}
		return sign | 0x7fc00000 | man<<13
	}
	return sign | (exp+112)<<23 | man<<13
}

// f32ToF16 narrows f to binary16, rounding to nearest even.
func f32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xff
	man := b & 0x7fffff
	switch {
	case exp == 0xff:
		if man == 0 {
			return sign | 0x7c00
		}
		return sign | 0x7e00 | uint16(man>>13)
	case exp >= 143: // 2^16 and above: beyond 65504 even after rounding
		return sign | 0x7c00
	case exp >= 113: // normal in binary16
		h := uint32(exp-112)<<10 | man>>13
		rem := man & 0x1fff
		if rem > 0x1000 || rem == 0x1000 && h&1 == 1 {
			h++ // a carry into the exponent is the correct rounding, up to infinity
		}
		return sign | uint16(h)
	case exp >= 102: // subnormal in binary16, or rounds to the smallest normal
		m := man | 0x800000
		shift := uint(126 - exp) // 14..24
		q := m >> shift
		rem := m & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rem > half || rem == half && q&1 == 1 {
			q++
		}
		return sign | uint16(q)
	}
	// Below half the smallest subnormal (2^-25): rounds to zero.
	return sign
}

// f32ToBF16 narrows f to bfloat16, rounding to nearest even.
func f32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

func f16ToF32(h uint16) float32  { return math.Float32frombits(f16ToF32Bits(h)) }
func bf16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }
