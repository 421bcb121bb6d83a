//go:build amd64 && !purego

package collectives

import "golang.org/x/sys/cpu"

// exactSum32AVX2 and exactSum64AVX2 are in exact_amd64.s. Every srcs[r]
// must hold len(dst) elements.
//
//go:noescape
func exactSum32AVX2(dst []float32, srcs [][]float32, from int) int

//go:noescape
func exactSum64AVX2(dst []float64, srcs [][]float64, from int) int

func init() {
	if cpu.X86.HasAVX2 {
		exactVec32, exactVec64 = exactSum32AVX2, exactSum64AVX2
	}
}
