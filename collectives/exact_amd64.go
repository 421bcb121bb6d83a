//go:build amd64 && !purego

package collectives

import "golang.org/x/sys/cpu"

// exactSum32AVX2 is in exact_amd64.s. Every srcs[r] must hold len(dst)
// elements.
//
//go:noescape
func exactSum32AVX2(dst []float32, srcs [][]float32, from int) int

func init() {
	if cpu.X86.HasAVX2 {
		exactVec32 = exactSum32AVX2
	}
}
