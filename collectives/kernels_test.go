package collectives

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// specialF32 are the inputs where vector and scalar code most often part:
// signed zeros, infinities, NaNs (quiet, signalling, with payloads),
// subnormals and the extremes.
var specialF32 = []float32{
	0, float32(math.Copysign(0, -1)), 1, -1, float32(math.Inf(1)), float32(math.Inf(-1)),
	float32(math.NaN()), math.Float32frombits(0x7f800001), math.Float32frombits(0xffc00123),
	math.SmallestNonzeroFloat32, -math.SmallestNonzeroFloat32, math.MaxFloat32, -math.MaxFloat32, 1e-40,
}

func randF32(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		if r.IntN(4) == 0 {
			x[i] = specialF32[r.IntN(len(specialF32))]
		} else {
			x[i] = float32(r.NormFloat64() * 100)
		}
	}
	return x
}

func randF64(r *rand.Rand, n int) []float64 {
	x := make([]float64, n)
	for i, v := range randF32(r, n) {
		x[i] = float64(v) * (1 + r.Float64()*1e-9)
		if v != v {
			x[i] = math.Float64frombits(0x7ff0000000000001 + uint64(r.IntN(1000)))
		}
	}
	return x
}

func bitsF32(x []float32) []uint32 {
	b := make([]uint32, len(x))
	for i, v := range x {
		b[i] = math.Float32bits(v)
	}
	return b
}

func bitsF64(x []float64) []uint64 {
	b := make([]uint64, len(x))
	for i, v := range x {
		b[i] = math.Float64bits(v)
	}
	return b
}

// kernelLengths covers every tail length of the vector loops (0..67) and
// a few lengths that run the four-vector loop many times.
func kernelLengths() []int {
	var ls []int
	for n := 0; n <= 67; n++ {
		ls = append(ls, n)
	}
	return append(ls, 128, 1000, 4099)
}

func TestVectorKernelsMatchGo(t *testing.T) {
	if vectorKernels == nil {
		t.Skip("no vector kernels on this CPU or build")
	}
	v, g := vectorKernels, goKernels
	f32 := []struct {
		name   string
		vk, gk func(dst, a, b []float32)
	}{
		{"sum", v.sumF32, g.sumF32}, {"prod", v.prodF32, g.prodF32},
		{"min", v.minF32, g.minF32}, {"max", v.maxF32, g.maxF32},
	}
	f64 := []struct {
		name   string
		vk, gk func(dst, a, b []float64)
	}{
		{"sum", v.sumF64, g.sumF64}, {"prod", v.prodF64, g.prodF64},
		{"min", v.minF64, g.minF64}, {"max", v.maxF64, g.maxF64},
	}
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range kernelLengths() {
		for off := range 8 { // start offsets that are not vector aligned
			for _, k := range f32 {
				a, b := randF32(r, n+off), randF32(r, n+off)
				want, got := make([]float32, n+off), make([]float32, n+off)
				k.gk(want[off:], a[off:], b[off:])
				k.vk(got[off:], a[off:], b[off:])
				require.Equal(t, bitsF32(want), bitsF32(got), "float32 %s n=%d off=%d", k.name, n, off)
				// dst aliasing a, as the in-place reductions use it
				k.vk(a[off:], a[off:], b[off:])
				require.Equal(t, bitsF32(want[off:]), bitsF32(a[off:]), "float32 %s in place n=%d off=%d", k.name, n, off)
			}
			for _, k := range f64 {
				a, b := randF64(r, n+off), randF64(r, n+off)
				want, got := make([]float64, n+off), make([]float64, n+off)
				k.gk(want[off:], a[off:], b[off:])
				k.vk(got[off:], a[off:], b[off:])
				require.Equal(t, bitsF64(want), bitsF64(got), "float64 %s n=%d off=%d", k.name, n, off)
			}
			x := randF32(r, n+off)
			xv := append([]float32(nil), x...)
			g.divF32(x[off:], 7)
			v.divF32(xv[off:], 7)
			require.Equal(t, bitsF32(x), bitsF32(xv), "float32 div n=%d off=%d", n, off)
			y := randF64(r, n+off)
			yv := append([]float64(nil), y...)
			g.divF64(y[off:], 7)
			v.divF64(yv[off:], 7)
			require.Equal(t, bitsF64(y), bitsF64(yv), "float64 div n=%d off=%d", n, off)
		}
	}
}

// TestVectorKernels16MatchGo feeds the 16-bit kernels every kind of bit
// pattern: normals, subnormals, infinities and NaNs of either kind.
func TestVectorKernels16MatchGo(t *testing.T) {
	if vectorKernels == nil {
		t.Skip("no vector kernels on this CPU or build")
	}
	v, g := vectorKernels, goKernels
	ks := []struct {
		name   string
		vk, gk func(dst, a, b []uint16)
	}{
		{"f16 sum", v.sumF16, g.sumF16}, {"f16 prod", v.prodF16, g.prodF16},
		{"f16 min", v.minF16, g.minF16}, {"f16 max", v.maxF16, g.maxF16},
		{"bf16 sum", v.sumBF, g.sumBF}, {"bf16 prod", v.prodBF, g.prodBF},
		{"bf16 min", v.minBF, g.minBF}, {"bf16 max", v.maxBF, g.maxBF},
	}
	r := rand.New(rand.NewPCG(5, 6))
	rnd := func(n int) []uint16 {
		x := make([]uint16, n)
		for i := range x {
			x[i] = uint16(r.Uint32())
			if r.IntN(2) == 0 { // mostly values of moderate size
				x[i] = x[i]&0x83ff | 0x3c00
			}
		}
		return x
	}
	for _, n := range kernelLengths() {
		for off := range 8 {
			for _, k := range ks {
				a, b := rnd(n+off), rnd(n+off)
				want, got := make([]uint16, n+off), make([]uint16, n+off)
				k.gk(want[off:], a[off:], b[off:])
				k.vk(got[off:], a[off:], b[off:])
				require.Equal(t, want, got, "%s n=%d off=%d", k.name, n, off)
			}
			for _, k := range []struct {
				name   string
				vk, gk func([]uint16, float32)
			}{{"f16 div", v.divF16, g.divF16}, {"bf16 div", v.divBF, g.divBF}} {
				x := rnd(n + off)
				y := slices.Clone(x)
				k.gk(x[off:], 3)
				k.vk(y[off:], 3)
				require.Equal(t, x, y, "%s n=%d off=%d", k.name, n, off)
			}
		}
	}
}

func TestMinMaxCommutative(t *testing.T) {
	for _, x := range specialF32 {
		for _, y := range specialF32 {
			for _, f := range []func(a, b float32) float32{minF32, maxF32} {
				require.Equal(t, math.Float32bits(f(x, y)), math.Float32bits(f(y, x)), "%v %v", x, y)
			}
			for _, f := range []func(a, b float64) float64{minF64, maxF64} {
				require.Equal(t, math.Float64bits(f(float64(x), float64(y))), math.Float64bits(f(float64(y), float64(x))), "%v %v", x, y)
			}
		}
	}
	// Every kernel, vector or not, on every pair of special values.
	sets := []kernelSet{goKernels}
	if vectorKernels != nil {
		sets = append(sets, *vectorKernels)
	}
	for _, ks := range sets {
		for _, k := range []func(dst, a, b []float32){ks.sumF32, ks.prodF32, ks.minF32, ks.maxF32} {
			for _, x := range specialF32 {
				for _, y := range specialF32 {
					xy, yx := []float32{x}, []float32{y}
					k(xy, xy, []float32{y})
					k(yx, yx, []float32{x})
					require.Equal(t, math.Float32bits(xy[0]), math.Float32bits(yx[0]), "%s: %v and %v", ks.name, x, y)
				}
			}
		}
	}
	negZero := float32(math.Copysign(0, -1))
	require.Equal(t, uint32(0), math.Float32bits(maxF32(0, negZero)))
	require.Equal(t, uint32(0x80000000), math.Float32bits(minF32(0, negZero)))
	require.Equal(t, uint32(0xffffffff), math.Float32bits(maxF32(1, float32(math.NaN()))))
}

func TestFloat16RoundTrip(t *testing.T) {
	for h := range 1 << 16 {
		f := f16ToF32(uint16(h))
		back := f32ToF16(f)
		if f != f {
			require.Equal(t, uint16(h)|0x200, back, "NaN %#x is quieted, payload kept", h)
			continue
		}
		require.Equal(t, uint16(h), back, "binary16 %#x", h)
	}
}

// nearestF16 finds the binary16 nearest to f by search over all finite
// values, ties to the even one: the definition the bit code implements.
func nearestF16(t *testing.T, f float32, sorted []uint16) uint16 {
	t.Helper()
	x := math.Abs(float64(f))
	best, bestErr := uint16(0), math.Inf(1)
	for _, h := range sorted {
		e := math.Abs(float64(f16ToF32(h)) - x)
		if e < bestErr || e == bestErr && h&1 == 0 {
			best, bestErr = h, e
		}
	}
	// Beyond max + half an ulp rounds to infinity.
	if x >= 65520 {
		best = 0x7c00
	}
	if math.Signbit(float64(f)) {
		best |= 0x8000
	}
	return best
}

func TestFloat16Rounding(t *testing.T) {
	var pos []uint16
	for h := uint16(0); h < 0x7c00; h++ {
		pos = append(pos, h)
	}
	r := rand.New(rand.NewPCG(3, 4))
	cases := []float32{65504, 65519.99, 65520, 1e9, 5.9604645e-08, 2.9802322e-08, 2.9802326e-08, 1.0009766, 1.0004883, 1.0014648, 6.1035156e-05, 6.103515e-05}
	for range 300 {
		cases = append(cases, float32(math.Ldexp(r.Float64()*2-1, r.IntN(44)-28)))
		h := uint16(r.IntN(0x7c00))
		// exact midpoints between neighbours
		cases = append(cases, (f16ToF32(h)+f16ToF32(h+1))/2)
	}
	for _, f := range cases {
		require.Equal(t, nearestF16(t, f, pos), f32ToF16(f), "%g", f)
		require.Equal(t, nearestF16(t, -f, pos), f32ToF16(-f), "%g", -f)
	}
}

func TestBFloat16Rounding(t *testing.T) {
	cases := []struct {
		in   uint32
		want uint16
	}{
		{0x3f800000, 0x3f80}, {0x3f808000, 0x3f80}, {0x3f818000, 0x3f82}, {0x3f808001, 0x3f81},
		{0x7f7fffff, 0x7f80}, {0xff800000, 0xff80}, {0x7fc00001, 0x7fc0}, {0x7f800001, 0x7fc0}, {0x80000000, 0x8000},
	}
	for _, c := range cases {
		require.Equal(t, c.want, f32ToBF16(math.Float32frombits(c.in)), "%#x", c.in)
	}
	require.Equal(t, float32(1), ToBFloat16(1).Float32())
	require.Equal(t, float32(0.5), ToFloat16(0.5).Float32())
}

// Benchmarks of the float32 sum: the plain Go loop, the portable kernel
// (which also makes NaN results canonical) and the vector kernel, in cache
// (4 KiB) and from memory (64 MiB). Bytes are those of one operand, the
// unit in which a collective's bandwidth is counted.
func BenchmarkKernelSumF32(b *testing.B) {
	plain := goKernels
	plain.name, plain.sumF32 = "plain", func(dst, a, b []float32) {
		a, b = a[:len(dst)], b[:len(dst)]
		for i := range dst {
			dst[i] = a[i] + b[i]
		}
	}
	sets := []kernelSet{plain, goKernels}
	if vectorKernels != nil {
		sets = append(sets, *vectorKernels)
	}
	for _, size := range []int{4 << 10, 64 << 20} {
		for _, ks := range sets {
			b.Run(fmt.Sprintf("%s/%dKiB", ks.name, size>>10), func(b *testing.B) {
				n := size / 4
				dst, x := make([]float32, n), make([]float32, n)
				for i := range x {
					x[i] = float32(i)
					dst[i] = 1 // fault the pages in before timing
				}
				b.SetBytes(int64(size))
				for b.Loop() {
					ks.sumF32(dst, dst, x)
				}
			})
		}
	}
}

func BenchmarkKernels(b *testing.B) {
	sets := []kernelSet{goKernels}
	if vectorKernels != nil {
		sets = append(sets, *vectorKernels)
	}
	const size = 256 << 10
	for _, ks := range sets {
		for _, k := range []struct {
			name string
			f    func(dst, a, b []float32)
		}{{"maxF32", ks.maxF32}, {"minF32", ks.minF32}, {"prodF32", ks.prodF32}} {
			b.Run(ks.name+"/"+k.name, func(b *testing.B) {
				dst, x := make([]float32, size/4), make([]float32, size/4)
				b.SetBytes(size)
				for b.Loop() {
					k.f(dst, dst, x)
				}
			})
		}
		b.Run(ks.name+"/sumF64", func(b *testing.B) {
			dst, x := make([]float64, size/8), make([]float64, size/8)
			b.SetBytes(size)
			for b.Loop() {
				ks.sumF64(dst, dst, x)
			}
		})
		b.Run(ks.name+"/divF32", func(b *testing.B) {
			x := make([]float32, size/4)
			b.SetBytes(size)
			for b.Loop() {
				ks.divF32(x, 3)
			}
		})
	}
	for _, ks := range sets {
		for _, k := range []struct {
			name string
			f    func(dst, a, b []uint16)
		}{{"sumF16", ks.sumF16}, {"sumBF16", ks.sumBF}} {
			b.Run(ks.name+"/"+k.name, func(b *testing.B) {
				dst, x := make([]uint16, size/2), make([]uint16, size/2)
				b.SetBytes(size)
				for b.Loop() {
					k.f(dst, dst, x)
				}
			})
		}
	}
}
