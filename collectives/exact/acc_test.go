package exact

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// reference is the sum of xs rounded by math/big: exact in 4096 bits,
// then to the nearest float64 and float32, ties to even.
func reference(xs []float64) (float64, float32) {
	var inf, ninf, nan bool
	sum := new(big.Float).SetPrec(4096)
	allNegZero := len(xs) > 0
	for _, x := range xs {
		switch {
		case math.IsNaN(x):
			nan = true
		case math.IsInf(x, 1):
			inf = true
		case math.IsInf(x, -1):
			ninf = true
		default:
			sum.Add(sum, new(big.Float).SetFloat64(x))
		}
		if x != 0 || !math.Signbit(x) {
			allNegZero = false
		}
	}
	switch {
	case nan || inf && ninf:
		return math.NaN(), float32(math.NaN())
	case inf:
		return math.Inf(1), float32(math.Inf(1))
	case ninf:
		return math.Inf(-1), float32(math.Inf(-1))
	}
	if sum.Sign() == 0 {
		z := 0.0
		if allNegZero {
			z = math.Copysign(0, -1)
		}
		return z, float32(z)
	}
	f64, _ := sum.Float64()
	f32, _ := sum.Float32()
	return f64, f32
}

func sumOf(xs []float64) *Acc {
	var a Acc
	for _, x := range xs {
		a.Add(x)
	}
	return &a
}

func requireRounds(t *testing.T, a *Acc, xs []float64, msg string) {
	t.Helper()
	w64, w32 := reference(xs)
	g64, g32 := a.Float64(), a.Float32()
	if math.IsNaN(w64) {
		require.True(t, math.IsNaN(g64), "%s: float64 %v, want NaN", msg, g64)
		require.True(t, g32 != g32, "%s: float32 %v, want NaN", msg, g32)
		return
	}
	require.Equal(t, math.Float64bits(w64), math.Float64bits(g64), "%s: float64 %v (%x), want %v (%x)", msg, g64, math.Float64bits(g64), w64, math.Float64bits(w64))
	require.Equal(t, math.Float32bits(w32), math.Float32bits(g32), "%s: float32 %v, want %v", msg, g32, w32)
}

func TestKnownSums(t *testing.T) {
	tiny := math.SmallestNonzeroFloat64
	cases := []struct {
		name string
		xs   []float64
		want float64
	}{
		{"empty", nil, 0},
		{"cancel", []float64{1e8, 1, -1e8}, 1},
		{"cancel tiny", []float64{1e300, 1e-300, -1e300}, 1e-300},
		{"subnormals", []float64{tiny, tiny, tiny}, 3 * tiny},
		{"max twice minus max", []float64{math.MaxFloat64, math.MaxFloat64, -math.MaxFloat64}, math.MaxFloat64},
		{"overflow", []float64{math.MaxFloat64, math.MaxFloat64}, math.Inf(1)},
		{"negative overflow", []float64{-math.MaxFloat64, -math.MaxFloat64}, math.Inf(-1)},
		{"ulp half ties to even", []float64{1, 0x1p-53}, 1},
		{"ulp half plus sticky", []float64{1, 0x1p-53, 0x1p-1000}, 1 + 0x1p-52},
		{"negative", []float64{-3, 1}, -2},
		{"negative zeros", []float64{math.Copysign(0, -1), math.Copysign(0, -1)}, math.Copysign(0, -1)},
		{"zero and negative zero", []float64{0, math.Copysign(0, -1)}, 0},
		{"infinity", []float64{math.Inf(1), -1e308}, math.Inf(1)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := sumOf(c.xs)
			require.Equal(t, math.Float64bits(c.want), math.Float64bits(a.Float64()))
			requireRounds(t, a, c.xs, c.name)
		})
	}
	require.True(t, math.IsNaN(sumOf([]float64{math.Inf(1), math.Inf(-1)}).Float64()))
	require.True(t, math.IsNaN(sumOf([]float64{1, math.NaN()}).Float64()))
}

// TestFloat32RoundsOnce: rounding the exact sum to float64 and then to
// float32 would be wrong here; the accumulator rounds once.
func TestFloat32RoundsOnce(t *testing.T) {
	xs := []float64{1, 0x1p-24, 0x1p-78} // just above half an ulp of float32(1)
	a := sumOf(xs)
	require.Equal(t, float32(1+0x1p-23), a.Float32())
	require.Equal(t, float32(1), float32(a.Float64()), "the double rounding this test guards against")
	requireRounds(t, a, xs, "once")
}

// cancelling draws values that cancel badly: large ones and their
// negations around small ones, at random exponents.
func cancelling(rng *rand.Rand, n int) []float64 {
	xs := make([]float64, 0, n)
	for len(xs) < n {
		switch rng.IntN(5) {
		case 0:
			big := math.Ldexp(1+rng.Float64(), rng.IntN(200)-20)
			xs = append(xs, big, 1, -big)
		case 1:
			xs = append(xs, 1e8, float64(rng.IntN(7)-3), -1e8)
		case 2:
			xs = append(xs, math.Ldexp(rng.NormFloat64(), rng.IntN(2098)-1074))
		case 3:
			xs = append(xs, float64(float32(rng.NormFloat64()*1e4)))
		default:
			xs = append(xs, math.Float64frombits(rng.Uint64()&^(0x7ff<<52)|uint64(rng.IntN(2046)+1)<<52))
		}
	}
	rng.Shuffle(len(xs), func(i, j int) { xs[i], xs[j] = xs[j], xs[i] })
	return xs[:n]
}

// TestRandomAgainstBig: random sums, in random orders and split between
// merged accumulators, round as math/big does.
func TestRandomAgainstBig(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for i := range 2000 {
		xs := cancelling(rng, 1+rng.IntN(40))
		a := sumOf(xs)
		requireRounds(t, a, xs, "sum")
		cut := rng.IntN(len(xs) + 1)
		b, c := sumOf(xs[:cut]), sumOf(xs[cut:])
		c.Merge(b)
		require.Equal(t, a.Float64(), c.Float64(), "case %d: merged", i)
		rng.Shuffle(len(xs), func(i, j int) { xs[i], xs[j] = xs[j], xs[i] })
		require.Equal(t, math.Float64bits(a.Float64()), math.Float64bits(sumOf(xs).Float64()), "case %d: reordered", i)
	}
}

// TestManyAdds crosses the load at which carries are propagated.
func TestManyAdds(t *testing.T) {
	var a Acc
	a.load = maxLoad - 3
	for range 10 {
		a.Add(math.MaxFloat64 / 4)
		a.Add(-math.MaxFloat64 / 4)
		a.Add(0x1p-1074)
	}
	require.Equal(t, 10*0x1p-1074, a.Float64())
	require.Less(t, a.load, int64(maxLoad))
}

// TestWords: summing the words of normalized accumulators is a merge.
func TestWords(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	accs := make([]Acc, 4)
	var all []float64
	for i := range accs {
		xs := cancelling(rng, 20)
		all = append(all, xs...)
		accs[i] = *sumOf(xs)
		accs[i].Normalize()
	}
	w := AsWords(accs)
	require.Len(t, w, 4*Words)
	var sum [1]Acc
	sw := AsWords(sum[:])
	for i := range accs {
		for j := range Words {
			sw[j] += w[i*Words+j]
		}
	}
	require.True(t, sum[0].Valid())
	requireRounds(t, &sum[0], all, "word sum")
	require.Nil(t, AsWords(nil))
}

// FuzzMergeRound: any values, split between two accumulators that are
// merged (directly or as summed words), round as math/big does.
func FuzzMergeRound(f *testing.F) {
	f.Add(uint64(0x4197d78400000000), uint64(0x3ff0000000000000), uint64(0xc197d78400000000), uint8(1))
	f.Add(uint64(1), uint64(0x8000000000000000), uint64(0x7fefffffffffffff), uint8(2))
	f.Add(uint64(0x7ff0000000000000), uint64(0xfff0000000000000), uint64(0), uint8(0))
	f.Fuzz(func(t *testing.T, x, y, z uint64, cut uint8) {
		xs := []float64{math.Float64frombits(x), math.Float64frombits(y), math.Float64frombits(z),
			-math.Float64frombits(x), math.Float64frombits(y) / 3}
		k := int(cut) % (len(xs) + 1)
		a, b := sumOf(xs[:k]), sumOf(xs[k:])
		whole := sumOf(xs)
		requireRounds(t, whole, xs, "whole")
		a.Normalize()
		b.Normalize()
		var words [1]Acc
		ws, wa, wb := AsWords(words[:]), AsWords([]Acc{*a}), AsWords([]Acc{*b})
		for i := range ws {
			ws[i] = wa[i] + wb[i]
		}
		a.Merge(b)
		requireRounds(t, a, xs, "merged")
		requireRounds(t, &words[0], xs, "words")
	})
}

func BenchmarkAdd(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	xs := make([]float64, 4096)
	for i := range xs {
		xs[i] = rng.NormFloat64()
	}
	var a Acc
	b.SetBytes(8 * int64(len(xs)))
	for b.Loop() {
		for _, x := range xs {
			a.Add(x)
		}
	}
}

func BenchmarkFloat64(b *testing.B) {
	var a Acc
	a.Add(1)
	a.Add(1e-10)
	for b.Loop() {
		_ = a.Float64()
	}
}

// FuzzWords: an accumulator made of any words (received from a rank that
// did not send accumulators, say) rounds without panicking, and Valid
// rejects negative counts and loads beyond the bound.
func FuzzWords(f *testing.F) {
	f.Add([]byte{1, 2, 3}, int64(1))
	f.Add(make([]byte, 8*Words), int64(-1))
	f.Fuzz(func(t *testing.T, b []byte, load int64) {
		var a [1]Acc
		w := AsWords(a[:])
		for i := 0; i+8 <= len(b) && i/8 < Words; i += 8 {
			for j := range 8 {
				w[i/8] |= int64(b[i+j]) << (8 * j)
			}
		}
		w[Words-1] = load
		_ = a[0].Float64()
		_ = a[0].Float32()
		if load < 0 || load > maxLoad {
			require.False(t, a[0].Valid())
		}
	})
}
