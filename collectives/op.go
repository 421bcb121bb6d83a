package collectives

// Op is a reduction operator. The zero Op is invalid, so that a forgotten
// argument is an error rather than a silent sum.
type Op uint8

// The reduction operators. All are commutative bit for bit, so every rank
// of an AllReduce ends with identical bits whichever algorithm runs:
//
//   - Sum and Prod are the arithmetic of the element type; integers wrap
//     on overflow. A NaN result of a float is the NaN with all bits set,
//     whatever the payloads of the inputs.
//   - Min and Max of floating-point values treat +0 as greater than -0,
//     and return that NaN when either input is a NaN.
//   - Avg is Sum followed by a division by the number of ranks. Floats
//     divide (correctly rounded, not multiplied by a reciprocal); the
//     16-bit floats divide in float32 and round once. Integers divide the
//     wrapped sum with Go's /, so the average rounds toward zero.
const (
	Sum Op = iota + 1
	Prod
	Min
	Max
	Avg
)

var opNames = [...]string{"none", "sum", "prod", "min", "max", "avg"}

// String returns the op's lower-case name.
func (o Op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return "op(" + itoa(int(o)) + ")"
}

func (o Op) valid() bool { return o >= Sum && o <= Avg }

// reducer is what a reducing algorithm needs of an (element type, op)
// pair, on raw bytes: combine writes a op b into dst element by element
// (dst may be a or b, exactly), and finish turns a fully combined buffer
// into the result (the division of Avg; nil for the other ops).
type reducer struct {
	combine func(dst, a, b []byte)
	finish  func(buf []byte, n int)
}

// reducers is indexed by dtype and Op. Entries are built once; the
// kernels they call are chosen at start-up from the CPU's features.
var reducers [dtBFloat16 + 1][Avg + 1]reducer

func init() {
	set := func(d dtype, sum, prod, lo, hi func(dst, a, b []byte), avg func([]byte, int)) {
		reducers[d][Sum] = reducer{combine: sum}
		reducers[d][Prod] = reducer{combine: prod}
		reducers[d][Min] = reducer{combine: lo}
		reducers[d][Max] = reducer{combine: hi}
		reducers[d][Avg] = reducer{combine: sum, finish: avg}
	}
	set(dtFloat32,
		func(d, a, b []byte) { kern.sumF32(view[float32](d), view[float32](a), view[float32](b)) },
		func(d, a, b []byte) { kern.prodF32(view[float32](d), view[float32](a), view[float32](b)) },
		func(d, a, b []byte) { kern.minF32(view[float32](d), view[float32](a), view[float32](b)) },
		func(d, a, b []byte) { kern.maxF32(view[float32](d), view[float32](a), view[float32](b)) },
		func(d []byte, n int) { kern.divF32(view[float32](d), float32(n)) })
	set(dtFloat64,
		func(d, a, b []byte) { kern.sumF64(view[float64](d), view[float64](a), view[float64](b)) },
		func(d, a, b []byte) { kern.prodF64(view[float64](d), view[float64](a), view[float64](b)) },
		func(d, a, b []byte) { kern.minF64(view[float64](d), view[float64](a), view[float64](b)) },
		func(d, a, b []byte) { kern.maxF64(view[float64](d), view[float64](a), view[float64](b)) },
		func(d []byte, n int) { kern.divF64(view[float64](d), float64(n)) })
	set(dtInt32,
		func(d, a, b []byte) { sumInt(view[int32](d), view[int32](a), view[int32](b)) },
		func(d, a, b []byte) { prodInt(view[int32](d), view[int32](a), view[int32](b)) },
		func(d, a, b []byte) { minInt(view[int32](d), view[int32](a), view[int32](b)) },
		func(d, a, b []byte) { maxInt(view[int32](d), view[int32](a), view[int32](b)) },
		func(d []byte, n int) { divInt(view[int32](d), int32(n)) })
	set(dtInt64,
		func(d, a, b []byte) { sumInt(view[int64](d), view[int64](a), view[int64](b)) },
		func(d, a, b []byte) { prodInt(view[int64](d), view[int64](a), view[int64](b)) },
		func(d, a, b []byte) { minInt(view[int64](d), view[int64](a), view[int64](b)) },
		func(d, a, b []byte) { maxInt(view[int64](d), view[int64](a), view[int64](b)) },
		func(d []byte, n int) { divInt(view[int64](d), int64(n)) })
	set(dtUint8,
		func(d, a, b []byte) { sumInt(d, a, b) },
		func(d, a, b []byte) { prodInt(d, a, b) },
		func(d, a, b []byte) { minInt(d, a, b) },
		func(d, a, b []byte) { maxInt(d, a, b) },
		func(d []byte, n int) { divUint8(d, n) })
	set(dtFloat16,
		func(d, a, b []byte) { kern.sumF16(view[uint16](d), view[uint16](a), view[uint16](b)) },
		func(d, a, b []byte) { kern.prodF16(view[uint16](d), view[uint16](a), view[uint16](b)) },
		func(d, a, b []byte) { kern.minF16(view[uint16](d), view[uint16](a), view[uint16](b)) },
		func(d, a, b []byte) { kern.maxF16(view[uint16](d), view[uint16](a), view[uint16](b)) },
		func(d []byte, n int) { kern.divF16(view[uint16](d), float32(n)) })
	set(dtBFloat16,
		func(d, a, b []byte) { kern.sumBF(view[uint16](d), view[uint16](a), view[uint16](b)) },
		func(d, a, b []byte) { kern.prodBF(view[uint16](d), view[uint16](a), view[uint16](b)) },
		func(d, a, b []byte) { kern.minBF(view[uint16](d), view[uint16](a), view[uint16](b)) },
		func(d, a, b []byte) { kern.maxBF(view[uint16](d), view[uint16](a), view[uint16](b)) },
		func(d []byte, n int) { kern.divBF(view[uint16](d), float32(n)) })
}
