package collectives

import (
	"math"
	"unsafe"
)

// Float16 is an IEEE 754 binary16 number stored in its 16 bits. Reductions
// convert each element to float32, combine, and round the result back to
// nearest even, so a sum of many elements rounds once per combining step;
// in the reproducible and exact modes (Options.Reproducible) they
// accumulate every rank's value in float32 and round once.
type Float16 uint16

// BFloat16 is a bfloat16 number (the upper half of a float32) stored in
// its 16 bits. It is reduced in float32 like Float16.
type BFloat16 uint16

// Element is the set of element types the collectives move and reduce.
// The 16-bit floats are distinct named types so that the reductions know
// how to interpret their bits.
type Element interface {
	float32 | float64 | int32 | int64 | uint8 | Float16 | BFloat16
}

// Float32 returns h as a float32, exactly.
func (h Float16) Float32() float32 { return math.Float32frombits(f16ToF32Bits(uint16(h))) }

// ToFloat16 rounds f to the nearest Float16, ties to even. Values beyond
// the largest finite Float16 become infinities; a NaN stays a NaN.
func ToFloat16(f float32) Float16 { return Float16(f32ToF16(f)) }

// Float32 returns h as a float32, exactly.
func (h BFloat16) Float32() float32 { return math.Float32frombits(uint32(h) << 16) }

// ToBFloat16 rounds f to the nearest BFloat16, ties to even.
func ToBFloat16(f float32) BFloat16 { return BFloat16(f32ToBF16(f)) }

// dtype names an element type on the wire and in fingerprints.
type dtype uint8

const (
	dtFloat32 dtype = iota + 1
	dtFloat64
	dtInt32
	dtInt64
	dtUint8
	dtFloat16
	dtBFloat16
	dtNone = 0
)

var dtypeNames = [...]string{"none", "float32", "float64", "int32", "int64", "uint8", "float16", "bfloat16"}

func (d dtype) String() string {
	if int(d) < len(dtypeNames) {
		return dtypeNames[d]
	}
	return "dtype(" + itoa(int(d)) + ")"
}

// size is the width of one element in bytes.
func (d dtype) size() int {
	switch d {
	case dtFloat64, dtInt64:
		return 8
	case dtFloat32, dtInt32:
		return 4
	case dtFloat16, dtBFloat16:
		return 2
	case dtUint8:
		return 1
	}
	return 0
}

// dtypeOf maps a type parameter to its dtype. The switch is on a pointer
// type so that the conversion to an interface does not allocate.
func dtypeOf[T Element]() dtype {
	switch any((*T)(nil)).(type) {
	case *float32:
		return dtFloat32
	case *float64:
		return dtFloat64
	case *int32:
		return dtInt32
	case *int64:
		return dtInt64
	case *uint8:
		return dtUint8
	case *Float16:
		return dtFloat16
	case *BFloat16:
		return dtBFloat16
	}
	return dtNone
}

// asBytes views s as its bytes, without copying. nil stays nil.
func asBytes[T Element](s []T) []byte {
	if s == nil {
		return nil
	}
	var zero T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(zero)))
}

// view reinterprets b as elements of type E. Every buffer the collectives
// hand to a kernel starts at a multiple of the element size from memory
// that was allocated for that element type (or from registered memory,
// which is page aligned), so the conversion is aligned.
func view[E any](b []byte) []E {
	var zero E
	n := len(b) / int(unsafe.Sizeof(zero))
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*E)(unsafe.Pointer(unsafe.SliceData(b))), n)
}

// itoa formats small integers without fmt, for String methods.
func itoa(v int) string {
	if v == 0 {
		return "0"
	}
	var buf [20]byte
	i := len(buf)
	neg := v < 0
	if neg {
		v = -v
	}
	for v > 0 {
		i--
		buf[i] = byte('0' + v%10)
		v /= 10
	}
	if neg {
		i--
		buf[i] = '-'
	}
	return string(buf[i:])
}
