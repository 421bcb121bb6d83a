package collectives

import (
	"math"
	"unsafe"

	"github.com/rdmacell/rdmacell/collectives/exact"
)

// The fold of the reproducible and exact modes: every element's n
// contributions, one per rank, combined at one place in one order. Both
// the Reproducible algorithm (reproducible.go) and the Shared one (through
// combineRanks) end in foldRanks, so both give the same bits:
//
//   - by default, a left fold in rank order, ((x0 op x1) op x2) …, with the
//     element type's arithmetic (the kernels of kernels.go), then Avg's
//     division;
//   - the 16-bit floats are widened to float32, folded in rank order in
//     float32 and rounded once at the end (after Avg's division, which is
//     in float32 too);
//   - in exact mode, float32 and float64 Sum and Avg are the correctly
//     rounded sum of the n values (Avg then divides it once, rounding
//     again).
//
// A NaN result is the NaN with all bits set, as in the default mode, but
// for a plain fold over one rank, which returns its input as it is.

// rankFold is the fold's scratch, kept by the group's run.
type rankFold struct {
	srcs [][]byte
	f32  [][]float32
	f64  [][]float64
	u16  [][]uint16
	acc  []byte // a block of partial results, where dst overlaps a source
}

// foldBlock is the size of rankFold.acc: small enough to stay in cache.
const foldBlock = 4096

// foldRanks folds every rank's src(r) into dst (which may be one of
// them) and applies the op's finish.
func (x *run) foldRanks(dst []byte, src func(r int) []byte) {
	n := x.g.size
	f := &x.rf
	if cap(f.srcs) < n {
		f.srcs = make([][]byte, n)
	}
	srcs := f.srcs[:n]
	for r := range n {
		srcs[r] = src(r)[:len(dst)]
	}
	switch dt := x.op.dt; {
	case x.op.mode == modeExact && dt == dtFloat32:
		exactSum32(view[float32](dst), viewsOf(&f.f32, srcs))
		x.finish(dst)
	case x.op.mode == modeExact:
		exactSum64(view[float64](dst), viewsOf(&f.f64, srcs))
		x.finish(dst)
	case dt == dtFloat16 || dt == dtBFloat16:
		fold16(view[uint16](dst), viewsOf(&f.u16, srcs), dt == dtBFloat16, x.op.rop)
	default:
		x.foldPlain(dst, srcs)
	}
	clear(srcs)
}

// viewsOf views each of srcs as elements of type E, in *buf.
func viewsOf[E any](buf *[][]E, srcs [][]byte) [][]E {
	if cap(*buf) < len(srcs) {
		*buf = make([][]E, len(srcs))
	}
	v := (*buf)[:len(srcs)]
	for r, s := range srcs {
		v[r] = view[E](s)
	}
	return v
}

// foldPlain is the left fold with the element type's kernels, straight
// into dst when no source that is read after dst is first written
// overlaps it, through a cached block otherwise (in-place forms).
func (x *run) foldPlain(dst []byte, srcs [][]byte) {
	if len(dst) == 0 {
		return
	}
	if len(srcs) == 1 {
		copyUnlessSame(dst, srcs[0])
		x.finish(dst)
		return
	}
	direct := true
	for r, s := range srcs {
		if overlap(dst, s) && (r >= 2 || !same(dst, s)) {
			direct = false
		}
	}
	if direct {
		x.combine(dst, srcs[0], srcs[1])
		for _, s := range srcs[2:] {
			x.combine(dst, dst, s)
		}
		x.finish(dst)
		return
	}
	if x.rf.acc == nil {
		x.rf.acc = unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(make([]uint64, foldBlock/8)))), foldBlock)
	}
	for lo := 0; lo < len(dst); lo += foldBlock {
		hi := min(lo+foldBlock, len(dst))
		a := x.rf.acc[:hi-lo]
		x.combine(a, srcs[0][lo:hi], srcs[1][lo:hi])
		for _, s := range srcs[2:] {
			x.combine(a, a, s[lo:hi])
		}
		copy(dst[lo:hi], a)
	}
	x.finish(dst)
}

// fold16 folds 16-bit floats in float32, block by block, reading every
// source of a block before writing it to dst.
func fold16(dst []uint16, srcs [][]uint16, bf bool, op Op) {
	widen := f16ToF32
	narrow := f32ToF16
	if bf {
		widen, narrow = bf16ToF32, f32ToBF16
	}
	n := float32(len(srcs))
	var acc [256]float32
	for lo := 0; lo < len(dst); lo += len(acc) {
		hi := min(lo+len(acc), len(dst))
		a := acc[:hi-lo]
		for i, h := range srcs[0][lo:hi] {
			a[i] = widen(h)
		}
		for _, s := range srcs[1:] {
			s := s[lo:hi]
			switch op {
			case Sum, Avg:
				for i := range a {
					a[i] += widen(s[i])
				}
			case Prod:
				for i := range a {
					a[i] *= widen(s[i])
				}
			case Min:
				for i := range a {
					a[i] = minF32(a[i], widen(s[i]))
				}
			case Max:
				for i := range a {
					a[i] = maxF32(a[i], widen(s[i]))
				}
			}
		}
		for i, v := range a {
			if op == Avg {
				v /= n
			}
			dst[lo+i] = narrow(nan32(v))
		}
	}
}

// exactSum32 writes the correctly rounded sum of srcs[r][i] into dst[i].
// Widened to float64, the values are summed with TwoSum (Knuth), whose
// errors are summed the same way; when that second sum is exact, the
// exact total is s + c, two float64s. Their sum rounded to odd (Boldo and
// Melquiond: to the float64 whose last bit is 1 among the two around it,
// unless it is exact) rounds to nearest float32 as the exact total would,
// because float64 has more than 24+1 bits. Elements where the errors did
// not sum exactly, or that are not finite or overflow float32, go through
// an exact.Acc; with float32 inputs that takes values about 2^80 apart.
func exactSum32(dst []float32, srcs [][]float32) { exactSum(dst, srcs, exactVec32, exactOne32) }

// exactSum runs the vector path (if any) on the whole groups of four
// elements, and one on the elements it leaves and the rest.
func exactSum[F float32 | float64](dst []F, srcs [][]F, vec func([]F, [][]F, int) int, one func([][]F, int) F) {
	i := 0
	if vec != nil && len(srcs) > 1 {
		for end := len(dst) &^ 3; i < end; {
			if i = vec(dst, srcs, i); i < end {
				// A group the vector code left: element by element.
				for j := i; j < i+4; j++ {
					dst[j] = one(srcs, j)
				}
				i += 4
			}
		}
	}
	for ; i < len(dst); i++ {
		dst[i] = one(srcs, i)
	}
}

// exactVec32, where the CPU has the vector instructions it needs, runs
// exactSum32's fast path on whole groups of four elements from the given
// index on, and returns where it stopped: at the end of the groups, or at
// the first group with an element the fast path cannot settle.
var exactVec32 func(dst []float32, srcs [][]float32, from int) int

// exactOne32 is exactSum32 for element i.
func exactOne32(srcs [][]float32, i int) float32 {
	s, c := float64(srcs[0][i]), 0.0
	bad := false
	for _, v := range srcs[1:] {
		// Widened float32s mostly add exactly, so the branch on e is
		// well predicted (unlike float64's; see exactSum64).
		x := float64(v[i])
		t := s + x
		bp := t - s
		e := (s - (t - bp)) + (x - bp)
		s = t
		if e != 0 {
			u := c + e
			bq := u - c
			if (c-(u-bq))+(e-bq) != 0 {
				bad = true
			}
			c = u
		}
	}
	t := s + c
	if t == 0 {
		t = s // ±0: a sum of -0s is -0
	}
	if bad || math.Abs(t) > math.MaxFloat32 || t != t {
		return accSum32(srcs, i)
	}
	bp := t - s
	if e := (s - (t - bp)) + (c - bp); e != 0 {
		// Round to odd: the neighbour towards e if t is even.
		if b := math.Float64bits(t); b&1 == 0 {
			if (e > 0) == (t > 0) {
				b++
			} else {
				b--
			}
			t = math.Float64frombits(b)
		}
	}
	return float32(t)
}

// accSum32 sums element i of srcs with an exact.Acc.
func accSum32(srcs [][]float32, i int) float32 {
	var a exact.Acc
	for _, v := range srcs {
		a.AddFloat32(v[i])
	}
	return nan32(a.Float32())
}

// accSum64 sums element i of srcs with an exact.Acc.
func accSum64(srcs [][]float64, i int) float64 {
	var a exact.Acc
	for _, v := range srcs {
		a.Add(v[i])
	}
	return nan64(a.Float64())
}

// twoSumStep adds x to the sum s and its error to c, TwoSum (Knuth) both
// times, and adds the magnitude of the second error to bad (NaN once a
// value is not finite or a sum overflows).
func twoSumStep(s, c, bad, x float64) (float64, float64, float64) {
	t := s + x
	bp := t - s
	e := (s - (t - bp)) + (x - bp)
	u := c + e
	bq := u - c
	return t, u, bad + math.Abs((c-(u-bq))+(e-bq))
}

// exactSum64 writes the correctly rounded sum of srcs[r][i] into dst[i].
// TwoSum splits each addition into its rounded sum s and its error; the
// errors are summed the same way into c, and when that sum is exact the
// exact total is s + c, whose rounding is one IEEE addition. Otherwise,
// and for values that are not finite, an exact.Acc sums the element.
// float64 additions are inexact about half the time, at random, so the
// scalar loop (exactOne64) has no branch on it; the vector one works on
// four elements at once where the CPU can.
func exactSum64(dst []float64, srcs [][]float64) { exactSum(dst, srcs, exactVec64, exactOne64) }

// exactVec64 is exactVec32 for exactSum64.
var exactVec64 func(dst []float64, srcs [][]float64, from int) int

// exactOne64 is exactSum64 for element i.
func exactOne64(srcs [][]float64, i int) float64 {
	s, c := srcs[0][i], 0.0
	var bad float64
	for _, v := range srcs[1:] {
		s, c, bad = twoSumStep(s, c, bad, v[i])
	}
	t := s + c
	if t == 0 {
		t = s // ±0: a sum of -0s is -0
	}
	if bad != 0 || t-t != 0 {
		t = accSum64(srcs, i)
	}
	return t
}
