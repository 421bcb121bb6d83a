package collectives

import "math"

// Reduction kernels. Each writes a op b into dst for the first len(dst)
// elements; a and b are at least as long, and dst may be exactly a or b.
//
// The floating-point kernels go through kern, which start-up points at
// vector code where the CPU has it (kernels_amd64.go). The plain Go
// versions below are the reference the vector code is tested against, and
// what runs elsewhere and under the purego build tag.

// kernelSet holds the kernels that have vector versions.
type kernelSet struct {
	sumF32, prodF32, minF32, maxF32 func(dst, a, b []float32)
	sumF64, prodF64, minF64, maxF64 func(dst, a, b []float64)
	divF32                          func(x []float32, d float32)
	divF64                          func(x []float64, d float64)
	sumF16, prodF16, minF16, maxF16 func(dst, a, b []uint16)
	sumBF, prodBF, minBF, maxBF     func(dst, a, b []uint16)
	divF16, divBF                   func(x []uint16, d float32)
	name                            string
}

// goKernels is the portable set.
var goKernels = kernelSet{
	sumF32: sumF32Go, prodF32: prodF32Go, minF32: minF32Go, maxF32: maxF32Go,
	sumF64: sumF64Go, prodF64: prodF64Go, minF64: minF64Go, maxF64: maxF64Go,
	divF32: divFloat[float32], divF64: divFloat[float64],
	sumF16: sumF16, prodF16: prodF16, minF16: minF16, maxF16: maxF16, divF16: divF16,
	sumBF: sumBF16, prodBF: prodBF16, minBF: minBF16, maxBF: maxBF16, divBF: divBF16,
	name: "go",
}

// kern is the set in use; vectorKernels is the vector set when the CPU
// has one (the tests compare it with goKernels).
var (
	kern          = goKernels
	vectorKernels *kernelSet
)

type floating interface{ float32 | float64 }

type integer interface{ int32 | int64 | uint8 }

// A NaN sum or product takes the payload of one operand, which depends on
// the order; making every NaN result the same NaN keeps the op
// commutative bit for bit.

func sumF32Go(dst, a, b []float32) {
	a, b = a[:len(dst)], b[:len(dst)]
	for i := range dst {
		dst[i] = nan32(a[i] + b[i])
	}
}

func prodF32Go(dst, a, b []float32) {
	a, b = a[:len(dst)], b[:len(dst)]
	for i := range dst {
		dst[i] = nan32(a[i] * b[i])
	}
}

func sumF64Go(dst, a, b []float64) {
	a, b = a[:len(dst)], b[:len(dst)]
	for i := range dst {
		dst[i] = nan64(a[i] + b[i])
	}
}

func prodF64Go(dst, a, b []float64) {
	a, b = a[:len(dst)], b[:len(dst)]
	for i := range dst {
		dst[i] = nan64(a[i] * b[i])
	}
}

func nan32(x float32) float32 {
	if x != x {
		return nanF32
	}
	return x
}

func nan64(x float64) float64 {
	if x != x {
		return nanF64
	}
	return x
}

func divFloat[T floating](x []T, d T) {
	for i := range x {
		x[i] /= d
	}
}

// nanF32 and nanF64 are the NaN every op returns: all bits set, which is
// what the vector code produces by OR-ing in an unordered mask.
var (
	nanF32 = math.Float32frombits(0xffffffff)
	nanF64 = math.Float64frombits(0xffffffffffffffff)
)

// maxF32 is a commutative maximum: NaN wins, +0 beats -0. The comparison
// operators alone are not commutative for those two cases, and an
// AllReduce whose ranks combine in different orders must still agree bit
// for bit.
func maxF32(x, y float32) float32 {
	switch {
	case x != x || y != y:
		return nanF32
	case x > y:
		return x
	case y > x:
		return y
	}
	return math.Float32frombits(math.Float32bits(x) & math.Float32bits(y))
}

// minF32 is the commutative minimum: NaN wins, -0 beats +0.
func minF32(x, y float32) float32 {
	switch {
	case x != x || y != y:
		return nanF32
	case x < y:
		return x
	case y < x:
		return y
	}
	return math.Float32frombits(math.Float32bits(x) | math.Float32bits(y))
}

func maxF64(x, y float64) float64 {
	switch {
	case x != x || y != y:
		return nanF64
	case x > y:
		return x
	case y > x:
		return y
	}
	return math.Float64frombits(math.Float64bits(x) & math.Float64bits(y))
}

func minF64(x, y float64) float64 {
	switch {
	case x != x || y != y:
		return nanF64
	case x < y:
		return x
	case y < x:
		return y
	}
	return math.Float64frombits(math.Float64bits(x) | math.Float64bits(y))
}

func maxF32Go(dst, a, b []float32) {
	a, b = a[:len(dst)], b[:len(dst)]
	for i := range dst {
		dst[i] = maxF32(a[i], b[i])
	}
}

func minF32Go(dst, a, b []float32) {
	a, b = a[:len(dst)], b[:len(dst)]
	for i := range dst {
		dst[i] = minF32(a[i], b[i])
	}
}

func maxF64Go(dst, a, b []float64) {
	a, b = a[:len(dst)], b[:len(dst)]
	for i := range dst {
		dst[i] = maxF64(a[i], b[i])
	}
}

func minF64Go(dst, a, b []float64) {
	a, b = a[:len(dst)], b[:len(dst)]
	for i := range dst {
		dst[i] = minF64(a[i], b[i])
	}
}

func sumInt[T integer](dst, a, b []T) {
	a, b = a[:len(dst)], b[:len(dst)]
	for i := range dst {
		dst[i] = a[i] + b[i]
	}
}

func prodInt[T integer](dst, a, b []T) {
	a, b = a[:len(dst)], b[:len(dst)]
	for i := range dst {
		dst[i] = a[i] * b[i]
	}
}

func minInt[T integer](dst, a, b []T) {
	a, b = a[:len(dst)], b[:len(dst)]
	for i := range dst {
		dst[i] = min(a[i], b[i])
	}
}

func maxInt[T integer](dst, a, b []T) {
	a, b = a[:len(dst)], b[:len(dst)]
	for i := range dst {
		dst[i] = max(a[i], b[i])
	}
}

func divInt[T int32 | int64](x []T, d T) {
	for i := range x {
		x[i] /= d
	}
}

// divUint8 divides by the number of ranks, which may exceed 255: the
// quotient is then zero.
func divUint8(x []uint8, n int) {
	if n > 255 {
		clear(x)
		return
	}
	d := uint8(n)
	for i := range x {
		x[i] /= d
	}
}

// The 16-bit kernels widen to float32, combine and round back; a NaN
// result is the float32 one with all bits set, which narrows to 0xffff.

func sumF16(dst, a, b []uint16) {
	a, b = a[:len(dst)], b[:len(dst)]
	for i := range dst {
		dst[i] = f32ToF16(nan32(f16ToF32(a[i]) + f16ToF32(b[i])))
	}
}

func prodF16(dst, a, b []uint16) {
	a, b = a[:len(dst)], b[:len(dst)]
	for i := range dst {
		dst[i] = f32ToF16(nan32(f16ToF32(a[i]) * f16ToF32(b[i])))
	}
}

func minF16(dst, a, b []uint16) {
	a, b = a[:len(dst)], b[:len(dst)]
	for i := range dst {
		dst[i] = f32ToF16(minF32(f16ToF32(a[i]), f16ToF32(b[i])))
	}
}

func maxF16(dst, a, b []uint16) {
	a, b = a[:len(dst)], b[:len(dst)]
	for i := range dst {
		dst[i] = f32ToF16(maxF32(f16ToF32(a[i]), f16ToF32(b[i])))
	}
}

func divF16(x []uint16, d float32) {
	for i := range x {
		x[i] = f32ToF16(f16ToF32(x[i]) / d)
	}
}

func sumBF16(dst, a, b []uint16) {
	a, b = a[:len(dst)], b[:len(dst)]
	for i := range dst {
		dst[i] = f32ToBF16(nan32(bf16ToF32(a[i]) + bf16ToF32(b[i])))
	}
}

func prodBF16(dst, a, b []uint16) {
	a, b = a[:len(dst)], b[:len(dst)]
	for i := range dst {
		dst[i] = f32ToBF16(nan32(bf16ToF32(a[i]) * bf16ToF32(b[i])))
	}
}

func minBF16(dst, a, b []uint16) {
	a, b = a[:len(dst)], b[:len(dst)]
	for i := range dst {
		dst[i] = f32ToBF16(minF32(bf16ToF32(a[i]), bf16ToF32(b[i])))
	}
}

func maxBF16(dst, a, b []uint16) {
	a, b = a[:len(dst)], b[:len(dst)]
	for i := range dst {
		dst[i] = f32ToBF16(maxF32(bf16ToF32(a[i]), bf16ToF32(b[i])))
	}
}

func divBF16(x []uint16, d float32) {
	for i := range x {
		x[i] = f32ToBF16(bf16ToF32(x[i]) / d)
	}
}
