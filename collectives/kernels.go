package collectives

import "math"

// Reduction kernels. Each writes a op b into dst for the first len(dst)
// elements; a and b are at least as long, and dst may be exactly a or b.
//
// The float32 and float64 kernels go through kern, which start-up points
// at vector code where the CPU has it (kernels_amd64.go). The plain Go
// versions below are the reference the vector code is tested against, and
// what runs elsewhere and under the purego build tag.

// kernelSet holds the kernels that have vector versions.
type kernelSet struct {
	sumF32, prodF32, minF32, maxF32 func(dst, a, b []float32)
	sumF64, prodF64, minF64, maxF64 func(dst, a, b []float64)
	divF32                          func(x []float32, d float32)
	divF64                          func(x []float64, d float64)
	name                            string
}

// goKernels is the portable set.
var goKernels = kernelSet{
	sumF32: sumFloat[float32], prodF32: prodFloat[float32], minF32: minF32Go, maxF32: maxF32Go,
	sumF64: sumFloat[float64], prodF64: prodFloat[float64], minF64: minF64Go, maxF64: maxF64Go,
	divF32: divFloat[float32], divF64: divFloat[float64],
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

func sumFloat[T floating](dst, a, b []T) {
	a, b = a[:len(dst)], b[:len(dst)]
	for i := range dst {
		dst[i] = a[i] + b[i]
	}
}

func prodFloat[T floating](dst, a, b []T) {
	a, b = a[:len(dst)], b[:len(dst)]
	for i := range dst {
		dst[i] = a[i] * b[i]
	}
}

func divFloat[T floating](x []T, d T) {
	for i := range x {
		x[i] /= d
	}
}

// nanF32 and nanF64 are the NaN that Min and Max return: all bits set,
// which is what the vector code produces by OR-ing in an unordered mask.
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

// The 16-bit kernels widen to float32, combine and round back. Min and Max
// are exact in float32, so only their NaN is new (all bits set).

func sumF16(dst, a, b []uint16) {
	a, b = a[:len(dst)], b[:len(dst)]
	for i := range dst {
		dst[i] = f32ToF16(f16ToF32(a[i]) + f16ToF32(b[i]))
	}
}

func prodF16(dst, a, b []uint16) {
	a, b = a[:len(dst)], b[:len(dst)]
	for i := range dst {
		dst[i] = f32ToF16(f16ToF32(a[i]) * f16ToF32(b[i]))
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
		dst[i] = f32ToBF16(bf16ToF32(a[i]) + bf16ToF32(b[i]))
	}
}

func prodBF16(dst, a, b []uint16) {
	a, b = a[:len(dst)], b[:len(dst)]
	for i := range dst {
		dst[i] = f32ToBF16(bf16ToF32(a[i]) * bf16ToF32(b[i]))
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
