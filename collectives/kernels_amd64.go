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
	name:    "avx2",
}

func init() {
	if cpu.X86.HasAVX2 {
		kern = avx2Kernels
		vectorKernels = &avx2Kernels
	}
}
