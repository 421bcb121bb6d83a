package collectives

import (
	"bytes"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/rdmacell/rdmacell/collectives/exact"
	"github.com/rdmacell/rdmacell/collectives/internal/memp2p"
	"github.com/stretchr/testify/require"
)

// A configuration of a group that, in reproducible mode, must not change
// any result: the algorithm asked for, whether the ranks share a host (the
// Shared algorithm, unless another is forced) or are split over two (where
// Hierarchical would run), and the chunk size.
type layout struct {
	algo  Algorithm
	host  bool
	split bool
	chunk int
}

func (l layout) String() string {
	return fmt.Sprintf("%s/host=%v/split=%v/chunk=%d", l.algo, l.host, l.split, l.chunk)
}

var reproLayouts = func() []layout {
	var ls []layout
	for _, a := range []Algorithm{Auto, Ring, RecursiveDoubling, HalvingDoubling, Chain, Tree} {
		for _, host := range []bool{false, true} {
			for _, chunk := range []int{smallChunk, 0} {
				if host && a == Auto {
					a = Shared
				}
				ls = append(ls, layout{algo: a, host: host, chunk: chunk})
			}
		}
	}
	return append(ls, layout{algo: Auto, split: true}, layout{algo: Hierarchical, split: true, chunk: smallChunk})
}()

func (l layout) world(t testing.TB, n int, m mode) *world {
	opts := func(int) Options {
		return Options{Algorithm: l.algo, ChunkBytes: l.chunk, Reproducible: m == modeReproducible, Exact: m == modeExact}
	}
	if l.split {
		hosts := make([]string, n)
		for r := range hosts {
			hosts[r] = fmt.Sprint("host-", 2*r/n)
		}
		return newWorldMem(t, memp2p.New(n).Hosts(hosts...), opts)
	}
	return newWorldOn(t, n, l.host, opts)
}

// messy draws values of many magnitudes, so that the order in which they
// are added changes the rounding; products stay near 1.
func messy(rng *rand.Rand, op Op) float64 {
	if op == Prod {
		return 1 + rng.NormFloat64()/8
	}
	return rng.NormFloat64() * math.Ldexp(1, rng.IntN(30)-15)
}

// foldRef is the reproducible result of one element, computed serially:
// the left fold in rank order, in float32 for the 16-bit floats.
func foldRef[T Element](xs []T, op Op) T {
	switch d := dtypeOf[T](); {
	case d == dtFloat64:
		return fromF64[T](foldIn[float64](xs, op))
	case isFloat(d):
		f := nan32(foldIn[float32](xs, op))
		var out T
		switch p := any(&out).(type) {
		case *float32:
			*p = f
		case *Float16:
			*p = ToFloat16(f)
		case *BFloat16:
			*p = ToBFloat16(f)
		}
		return out
	}
	rows := make([][]T, len(xs))
	for r, x := range xs {
		rows[r] = []T{x}
	}
	return reference(rows, op)[0]
}

// foldIn folds xs, as F, in rank order.
func foldIn[F float32 | float64, T Element](xs []T, op Op) F {
	acc := F(toF64(xs[0]))
	for _, v := range xs[1:] {
		x := F(toF64(v))
		switch op {
		case Prod:
			acc *= x
		case Min, Max:
			acc = minMax(acc, x, op)
		default:
			acc += x
		}
	}
	if op == Avg {
		acc /= F(len(xs))
	}
	return acc
}

// minMax is the package's commutative minimum or maximum, of F.
func minMax[F float32 | float64](a, b F, op Op) F {
	if p, ok := any(a).(float32); ok {
		q := float32(b)
		if op == Min {
			return F(minF32(p, q))
		}
		return F(maxF32(p, q))
	}
	p, q := float64(a), float64(b)
	if op == Min {
		return F(minF64(p, q))
	}
	return F(maxF64(p, q))
}

// reproCase runs AllReduce (both forms), ReduceScatter and Reduce of
// count elements on w, and requires every result to be, byte for byte,
// want: the serial fold of the same inputs.
func reproCase[T Element](t *testing.T, w *world, in [][]T, op Op, want func(xs []T) T) {
	t.Helper()
	n, count := w.n, len(in[0])
	ctx := testCtx(t)
	ref := make([]T, count)
	xs := make([]T, n)
	for i := range ref {
		for r := range n {
			xs[r] = in[r][i]
		}
		ref[i] = want(xs)
	}
	wantBytes := asBytes(ref)
	check := func(what string, r int, got []T, lo int) {
		t.Helper()
		if !bytes.Equal(asBytes(got), wantBytes[lo*len(asBytes(ref[:1])):][:len(asBytes(got))]) {
			for i := range got {
				if !bytes.Equal(asBytes(got[i:i+1]), asBytes(ref[lo+i:lo+i+1])) {
					t.Fatalf("%s: rank %d element %d: got %v, want %v", what, r, lo+i, got[i], ref[lo+i])
				}
			}
		}
	}
	outs := make([][]T, n)
	for _, inPlace := range []bool{false, true} {
		w.ok(t, "AllReduce", func(r int, g *Group) error {
			send := append([]T(nil), in[r]...)
			outs[r] = make([]T, count)
			if inPlace {
				outs[r] = send
			}
			return AllReduce(ctx, g, send, outs[r], op)
		})
		for r := range n {
			check(fmt.Sprintf("AllReduce in place %v", inPlace), r, outs[r], 0)
		}
	}
	w.ok(t, "IAllReduce", func(r int, g *Group) error {
		outs[r] = make([]T, count)
		req, err := IAllReduce(ctx, g, in[r], outs[r], op)
		if err != nil {
			return err
		}
		return req.Wait(ctx)
	})
	for r := range n {
		check("IAllReduce", r, outs[r], 0)
	}
	root := n - 1
	w.ok(t, "Reduce", func(r int, g *Group) error {
		outs[r] = nil
		if r == root {
			outs[r] = make([]T, count)
		}
		return Reduce(ctx, g, in[r], outs[r], op, root)
	})
	check("Reduce", root, outs[root], 0)
	if count%n == 0 {
		blk := count / n
		w.ok(t, "ReduceScatter", func(r int, g *Group) error {
			send := append([]T(nil), in[r]...)
			outs[r] = send[r*blk : (r+1)*blk]
			return ReduceScatter(ctx, g, send, outs[r], op)
		})
		for r := range n {
			check("ReduceScatter in place", r, outs[r], r*blk)
		}
	}
}

func reproInputs[T Element](seed uint64, n, count int, op Op) [][]T {
	rng := rand.New(rand.NewPCG(seed, uint64(n*1000+count)))
	in := make([][]T, n)
	for r := range in {
		in[r] = make([]T, count)
		for i := range in[r] {
			if isFloat(dtypeOf[T]()) {
				in[r][i] = fromF64[T](messy(rng, op))
			} else {
				in[r][i] = fromF64[T](float64(rng.IntN(200) - 100))
			}
		}
	}
	return in
}

// reproCounts: one element, seven, one small chunk's worth, many chunks
// of blocks that do not divide evenly, and an even split.
func reproCounts(n int) []int { return []int{1, 7, smallChunk / 4, 97*n + 3, 64 * n} }

func reproSuite[T Element](t *testing.T, n int) {
	for _, l := range reproLayouts {
		w := l.world(t, n, modeReproducible)
		for _, count := range reproCounts(n) {
			for _, op := range []Op{Sum, Avg, Prod, Min, Max} {
				in := reproInputs[T](1, n, count, op)
				reproCase(t, w, in, op, func(xs []T) T { return foldRef(xs, op) })
				if t.Failed() {
					t.Fatalf("layout %s, count %d, op %s", l, count, op)
				}
			}
		}
	}
}

// TestReproducible: in reproducible mode every reduction, whatever the
// algorithm, the transport (messages, or the memory of one host), the
// chunk size and the count, gives exactly the serial fold in rank order.
func TestReproducible(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4, 5, 8} {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			t.Parallel()
			t.Run("float32", func(t *testing.T) { reproSuite[float32](t, n) })
			t.Run("float64", func(t *testing.T) { reproSuite[float64](t, n) })
			t.Run("float16", func(t *testing.T) { reproSuite[Float16](t, n) })
			t.Run("bfloat16", func(t *testing.T) { reproSuite[BFloat16](t, n) })
			t.Run("int32", func(t *testing.T) { reproSuite[int32](t, n) })
		})
	}
}

// TestReproducibleCatchesOrder: the data of TestReproducible is such that
// order matters: without the mode, the ring and the shared memory of one
// host do not agree with the serial fold, nor with each other.
func TestReproducibleCatchesOrder(t *testing.T) {
	const n, count = 4, 4096
	in := reproInputs[float32](1, n, count, Sum)
	results := make(map[string][]float32)
	for _, l := range []layout{{algo: Ring}, {algo: Shared, host: true}, {algo: RecursiveDoubling}} {
		w := l.world(t, n, modeDefault)
		ctx := testCtx(t)
		outs := make([][]float32, n)
		w.ok(t, "AllReduce", func(r int, g *Group) error {
			outs[r] = make([]float32, count)
			return AllReduce(ctx, g, in[r], outs[r], Sum)
		})
		results[l.algo.String()] = outs[0]
	}
	require.NotEqual(t, results["ring"], results["recursive-doubling"])
	require.NotEqual(t, results["ring"], results["shared"])
}

// TestReproducibleMismatch: ranks that disagree about the mode are told so
// (the mode is in the fingerprint), with nothing moved.
func TestReproducibleMismatch(t *testing.T) {
	w := newWorldOn(t, 3, false, func(r int) Options { return Options{Reproducible: r == 1} })
	ctx := testCtx(t)
	for r, err := range w.run(func(r int, g *Group) error {
		return AllReduce(ctx, g, make([]float32, 8), make([]float32, 8), Sum)
	}) {
		var me *MismatchError
		require.ErrorAs(t, err, &me, "rank %d", r)
		require.Equal(t, []int{1}, me.Odd)
		require.Contains(t, err.Error(), "reproducible")
	}
}

func TestReproducibleFromEnv(t *testing.T) {
	t.Setenv(EnvReproducible, "1")
	o, err := OptionsFromEnv()
	require.NoError(t, err)
	w := newWorld(t, 2, o)
	require.Equal(t, modeReproducible, w.groups[0].mode)
	t.Setenv(EnvReproducible, "maybe")
	_, err = OptionsFromEnv()
	require.ErrorContains(t, err, EnvReproducible)
}

// bigSum is the correctly rounded sum of xs, by math/big, and its Avg.
func bigSum(xs []float64) (float64, float32) {
	s := new(big.Float).SetPrec(4096)
	negZeros := 0
	for _, x := range xs {
		s.Add(s, new(big.Float).SetFloat64(x))
		if x == 0 && math.Signbit(x) {
			negZeros++
		}
	}
	if s.Sign() == 0 && negZeros == len(xs) {
		return math.Copysign(0, -1), float32(math.Copysign(0, -1)) // as IEEE adds -0 and -0
	}
	f64, _ := s.Float64()
	f32, _ := s.Float32()
	return f64, f32
}

// cancelBadly draws the inputs of the exact tests: large values and their
// negations around small ones (1e8, 1, -1e8 and the like), spread over
// the ranks, and plain values of random magnitude.
func cancelBadly(rng *rand.Rand, n int, f32 bool) []float64 {
	xs := make([]float64, n)
	for r := range xs {
		switch rng.IntN(4) {
		case 0:
			xs[r] = 1e8
		case 1:
			xs[r] = -1e8
		case 2:
			xs[r] = float64(rng.IntN(5) - 2)
		default:
			xs[r] = messy(rng, Sum) * math.Ldexp(1, rng.IntN(60)-30)
		}
		if f32 {
			xs[r] = float64(float32(xs[r]))
		}
	}
	return xs
}

func exactSuite[T float32 | float64](t *testing.T, n int) {
	f32 := dtypeOf[T]() == dtFloat32
	for _, l := range reproLayouts {
		w := l.world(t, n, modeExact)
		for _, count := range reproCounts(n) {
			rng := rand.New(rand.NewPCG(uint64(n), uint64(count)))
			in := make([][]T, n)
			for r := range in {
				in[r] = make([]T, count)
			}
			for i := range count {
				for r, x := range cancelBadly(rng, n, f32) {
					in[r][i] = T(x)
				}
			}
			for _, op := range []Op{Sum, Avg} {
				reproCase(t, w, in, op, func(xs []T) T {
					vs := make([]float64, len(xs))
					for r, x := range xs {
						vs[r] = float64(x)
					}
					s64, s32 := bigSum(vs)
					s := T(s64)
					if f32 {
						s = T(s32)
					}
					if op == Avg {
						s /= T(len(xs))
					}
					return s
				})
				if t.Failed() {
					t.Fatalf("layout %s, count %d, op %s", l, count, op)
				}
			}
		}
	}
}

// TestExact: in exact mode a float sum is the correctly rounded sum of the
// ranks' values (math/big's), on inputs that cancel badly, whatever the
// layout; Avg divides it once.
func TestExact(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4, 8} {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			t.Parallel()
			t.Run("float32", func(t *testing.T) { exactSuite[float32](t, n) })
			t.Run("float64", func(t *testing.T) { exactSuite[float64](t, n) })
		})
	}
}

// TestExactOtherOps: exact mode folds what it does not sum exactly in the
// reproducible order.
func TestExactOtherOps(t *testing.T) {
	w := layout{algo: Ring, chunk: smallChunk}.world(t, 4, modeExact)
	in := reproInputs[float32](2, 4, 103, Prod)
	reproCase(t, w, in, Prod, func(xs []float32) float32 { return foldRef(xs, Prod) })
	in16 := reproInputs[Float16](2, 4, 103, Sum)
	reproCase(t, w, in16, Sum, func(xs []Float16) Float16 { return foldRef(xs, Sum) })
}

// TestAllReduceAccWorldSizes: the same global terms, split over 1, 2, 3, 4
// or 8 ranks that each sum their share into exact.Acc, give one result:
// the correctly rounded sum of all of them.
func TestAllReduceAccWorldSizes(t *testing.T) {
	const terms, count = 24, 37
	rng := rand.New(rand.NewPCG(5, 8))
	global := make([][]float64, count) // element → its terms
	for i := range global {
		global[i] = cancelBadly(rng, terms, false)
	}
	for _, n := range []int{1, 2, 3, 4, 8} {
		for _, l := range []layout{{algo: Auto}, {algo: Ring, chunk: smallChunk}, {algo: Shared, host: true}} {
			w := l.world(t, n, modeDefault)
			ctx := testCtx(t)
			accs := make([][]exact.Acc, n)
			w.ok(t, "AllReduceAcc", func(r int, g *Group) error {
				accs[r] = make([]exact.Acc, count)
				for i := range count {
					for k := r; k < terms; k += n { // rank r's share: every n-th term
						accs[r][i].Add(global[i][k])
					}
				}
				return AllReduceAcc(ctx, g, accs[r])
			})
			for r := range n {
				for i := range count {
					w64, w32 := bigSum(global[i])
					require.Equal(t, math.Float64bits(w64), math.Float64bits(accs[r][i].Float64()), "n=%d %s rank %d element %d", n, l, r, i)
					require.Equal(t, math.Float32bits(w32), math.Float32bits(accs[r][i].Float32()), "n=%d %s rank %d element %d", n, l, r, i)
				}
			}
		}
	}
}

// TestExactKernels drives the exact sums directly over inputs whose
// exponents spread wide enough to defeat their fast paths.
func TestExactKernels(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	for range 3000 {
		n := 1 + rng.IntN(9)
		xs := make([]float64, n)
		for r := range xs {
			xs[r] = math.Ldexp(rng.NormFloat64(), rng.IntN(400)-200)
			if rng.IntN(4) == 0 && r > 0 {
				xs[r] = -xs[r-1]
			}
		}
		src64 := make([][]float64, n)
		src32 := make([][]float32, n)
		f32s := make([]float64, n)
		for r, x := range xs {
			src64[r] = []float64{x}
			y := float32(math.Ldexp(x, -100)) // within float32's range, subnormals too
			src32[r] = []float32{y}
			f32s[r] = float64(y)
		}
		got64, got32 := []float64{0}, []float32{0}
		exactSum64(got64, src64)
		exactSum32(got32, src32)
		w64, _ := bigSum(xs)
		_, w32 := bigSum(f32s)
		require.Equal(t, math.Float64bits(w64), math.Float64bits(got64[0]), "%v", xs)
		require.Equal(t, math.Float32bits(w32), math.Float32bits(got32[0]), "%v", f32s)
	}
	nan := []float64{0}
	exactSum64(nan, [][]float64{{math.Inf(1)}, {math.Inf(-1)}})
	require.Equal(t, math.Float64bits(nanF64), math.Float64bits(nan[0]))
	// Five elements: four for the vector code, one for the scalar.
	negz := math.Copysign(0, -1)
	nz64 := []float64{negz, negz, negz, negz, negz}
	nz32 := []float32{float32(negz), float32(negz), float32(negz), float32(negz), float32(negz)}
	z64, z32 := make([]float64, 5), make([]float32, 5)
	exactSum64(z64, [][]float64{nz64, nz64})
	exactSum32(z32, [][]float32{nz32, nz32})
	for i := range z64 {
		require.True(t, math.Signbit(z64[i]) && math.Signbit(float64(z32[i])), "-0 + -0 is -0 (element %d)", i)
	}
	// A float32 sum whose float64 rounding is a float32 tie: only
	// rounding to odd first gets it right.
	tie := []float32{0}
	exactSum32(tie, [][]float32{{1}, {0x1p-24}, {0x1p-60}, {0x1p-90}})
	require.Equal(t, float32(1+0x1p-23), tie[0])
}

// TestExactSumVector: the vector paths of the exact sums agree with
// math/big on vectors of every length, with zeros of both signs,
// infinities, NaNs, subnormals, float32 ties and values far apart mixed in.
func TestExactSumVector(t *testing.T) {
	t.Run("float32", func(t *testing.T) { exactVectorCase[float32](t, exactSum32, 125) })
	t.Run("float64", func(t *testing.T) { exactVectorCase[float64](t, exactSum64, 1000) })
}

func exactVectorCase[F float32 | float64](t *testing.T, sum func(dst []F, srcs [][]F), spread int) {
	rng := rand.New(rand.NewPCG(4, 4))
	odd := []float64{0, math.Copysign(0, -1), math.Inf(1), math.Inf(-1), math.NaN(),
		math.SmallestNonzeroFloat32, math.MaxFloat32, -math.MaxFloat32, 1, 0x1p-24, 0x1p-60, 0x1p100,
		math.SmallestNonzeroFloat64, math.MaxFloat64, 0x1p-53, 0x1p-106}
	for range 400 {
		n, count := 2+rng.IntN(7), rng.IntN(50)
		srcs := make([][]F, n)
		for r := range srcs {
			srcs[r] = make([]F, count)
			for i := range srcs[r] {
				switch rng.IntN(6) {
				case 0:
					srcs[r][i] = F(odd[rng.IntN(len(odd))])
				case 1:
					srcs[r][i] = F(math.Ldexp(rng.NormFloat64(), rng.IntN(2*spread)-spread))
				default:
					srcs[r][i] = F(math.Ldexp(rng.NormFloat64(), rng.IntN(20)-10))
				}
			}
		}
		got := make([]F, count)
		sum(got, srcs)
		for i := range got {
			vs := make([]float64, n)
			nan, pinf, ninf := false, false, false
			for r := range n {
				v := float64(srcs[r][i])
				vs[r] = v
				nan = nan || v != v
				pinf = pinf || math.IsInf(v, 1)
				ninf = ninf || math.IsInf(v, -1)
			}
			var want float64
			switch {
			case nan || pinf && ninf:
				want = nanF64
			case pinf:
				want = math.Inf(1)
			case ninf:
				want = math.Inf(-1)
			default:
				w64, w32 := bigSum(vs)
				want = w64
				if unsafe.Sizeof(got[0]) == 4 {
					want = float64(w32)
				}
			}
			g := float64(got[i])
			if want != want {
				require.True(t, g != g, "n=%d element %d of %d: %v gave %v, want NaN", n, i, count, vs, g)
				continue
			}
			require.Equal(t, math.Float64bits(want), math.Float64bits(g), "n=%d element %d of %d: %v", n, i, count, vs)
		}
	}
}

// TestAllReduceAccRejectsGarbage: words that no accumulator has, from one
// rank, are an error on every rank, not a silently wrong sum.
func TestAllReduceAccRejectsGarbage(t *testing.T) {
	w := newWorld(t, 3, Options{})
	ctx := testCtx(t)
	for r, err := range w.run(func(r int, g *Group) error {
		accs := make([]exact.Acc, 4)
		accs[2].Add(1)
		if r == 1 {
			exact.AsWords(accs)[2*exact.Words+exact.Digits] = -7 // a negative count of NaNs
		}
		return AllReduceAcc(ctx, g, accs)
	}) {
		require.ErrorContains(t, err, "element 2", "rank %d", r)
	}
}
