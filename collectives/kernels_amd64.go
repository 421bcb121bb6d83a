//go:build amd64 && !purego

package collectives

import "golang.org/x/sys/cpu"

// AVX2 kernels, in kernels_amd64.s. They process 128 bytes per iteration
// with unaligned loads, then 32, then single elements, so any length and
// any element-aligned start is fine.

//go:noescape
func sumF32AVX2(dst, a, b []float32)

//go:noescape
func prodF32AVX2(dst, a, b []float32)

//go:noescape
func minF32AVX2(dst, a, b []float32)

//go:noescape
func maxF32AVX2(dst, a, b []float32)

//go:noescape
func sumF64AVX2(dst, a, b []float64)

//go:noescape
func prodF64AVX2(dst, a, b []float64)

//go:noescape
func minF64AVX2(dst, a, b []float64)

//go:noescape
func maxF64AVX2(dst, a, b []float64)

//go:noescape
func divF32AVX2(x []float32, d float32)

//go:noescape
func divF64AVX2(x []float64, d float64)

//go:noescape
func sumF16F16C(dst, a, b []uint16)

//go:noescape
func prodF16F16C(dst, a, b []uint16)

//go:noescape
func minF16F16C(dst, a, b []uint16)

//go:noescape
func maxF16F16C(dst, a, b []uint16)

//go:noescape
func divF16F16C(x []uint16, d float32)

//go:noescape
func sumBF16AVX2(dst, a, b []uint16)

//go:noescape
func prodBF16AVX2(dst, a, b []uint16)

//go:noescape
func minBF16AVX2(dst, a, b []uint16)

//go:noescape
func maxBF16AVX2(dst, a, b []uint16)

//go:noescape
func divBF16AVX2(x []uint16, d float32)

// by8 runs a 16-bit vector kernel on the whole groups of eight and the Go
// kernel on the rest.
func by8(vec, tail func(dst, a, b []uint16)) func(dst, a, b []uint16) {
	return func(dst, a, b []uint16) {
		n := len(dst) &^ 7
		vec(dst[:n], a[:n], b[:n])
		tail(dst[n:], a[n:len(dst)], b[n:len(dst)])
	}
}

func div8(vec, tail func([]uint16, float32)) func([]uint16, float32) {
	return func(x []uint16, d float32) {
		n := len(x) &^ 7
		vec(x[:n], d)
		tail(x[n:], d)
	}
}

// avx2Kernels is the vector set; the assembly reads only len(dst)
// elements of a and b, which the wrappers below check are there.
var avx2Kernels = kernelSet{
	sumF32:  func(d, a, b []float32) { sumF32AVX2(d, a[:len(d)], b[:len(d)]) },
	prodF32: func(d, a, b []float32) { prodF32AVX2(d, a[:len(d)], b[:len(d)]) },
	minF32:  func(d, a, b []float32) { minF32AVX2(d, a[:len(d)], b[:len(d)]) },
	maxF32:  func(d, a, b []float32) { maxF32AVX2(d, a[:len(d)], b[:len(d)]) },
	sumF64:  func(d, a, b []float64) { sumF64AVX2(d, a[:len(d)], b[:len(d)]) },
	prodF64: func(d, a, b []float64) { prodF64AVX2(d, a[:len(d)], b[:len(d)]) },
	minF64:  func(d, a, b []float64) { minF64AVX2(d, a[:len(d)], b[:len(d)]) },
	maxF64:  func(d, a, b []float64) { maxF64AVX2(d, a[:len(d)], b[:len(d)]) },
	divF32:  divF32AVX2,
	divF64:  divF64AVX2,
	sumBF:   by8(sumBF16AVX2, sumBF16),
	prodBF:  by8(prodBF16AVX2, prodBF16),
	minBF:   by8(minBF16AVX2, minBF16),
	maxBF:   by8(maxBF16AVX2, maxBF16),
	divBF:   div8(divBF16AVX2, divBF16),
	name:    "avx2",
}

func init() {
	if !cpu.X86.HasAVX2 {
		return
	}
	k := avx2Kernels
	if cpu.X86.HasF16C {
		k.sumF16 = by8(sumF16F16C, sumF16)
		k.prodF16 = by8(prodF16F16C, prodF16)
		k.minF16 = by8(minF16F16C, minF16)
		k.maxF16 = by8(maxF16F16C, maxF16)
		k.divF16 = div8(divF16F16C, divF16)
	} else {
		k.sumF16, k.prodF16, k.minF16, k.maxF16, k.divF16 = sumF16, prodF16, minF16, maxF16, divF16
	}
	kern = k
	vectorKernels = &kern
}
