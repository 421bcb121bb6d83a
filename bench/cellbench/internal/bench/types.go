package bench

import (
	"fmt"
	"math"
	"strings"

	"github.com/rdmacell/rdmacell/collectives"
)

// codec converts between an element type and the float64 in which the
// expected results are computed; every value the check uses is a small
// integer, exact in each type.
type codec[T collectives.Element] struct {
	from    func(float64) T
	to      func(T) float64
	integer bool
}

// elemType is an element type as -d names it, bound to the generic sweep.
type elemType struct {
	name string // as nccl-tests prints it
	size int
	run  func(*bencher) error
}

func plain[T float32 | float64 | int32 | int64 | uint8](integer bool) codec[T] {
	return codec[T]{from: func(v float64) T { return T(v) }, to: func(v T) float64 { return float64(v) }, integer: integer}
}

var elemTypes = []struct {
	aliases []string
	t       elemType
}{
	{[]string{"float", "float32", "f32"}, elemType{"float", 4, func(b *bencher) error { return sweep(b, plain[float32](false)) }}},
	{[]string{"double", "float64", "f64"}, elemType{"double", 8, func(b *bencher) error { return sweep(b, plain[float64](false)) }}},
	{[]string{"int32", "int"}, elemType{"int32", 4, func(b *bencher) error { return sweep(b, plain[int32](true)) }}},
	{[]string{"int64"}, elemType{"int64", 8, func(b *bencher) error { return sweep(b, plain[int64](true)) }}},
	{[]string{"uint8", "byte"}, elemType{"uint8", 1, func(b *bencher) error { return sweep(b, plain[uint8](true)) }}},
	{[]string{"half", "float16", "f16"}, elemType{"half", 2, func(b *bencher) error {
		return sweep(b, codec[collectives.Float16]{
			from: func(v float64) collectives.Float16 { return collectives.ToFloat16(float32(v)) },
			to:   func(v collectives.Float16) float64 { return float64(v.Float32()) },
		})
	}}},
	{[]string{"bfloat16", "bf16"}, elemType{"bfloat16", 2, func(b *bencher) error {
		return sweep(b, codec[collectives.BFloat16]{
			from: func(v float64) collectives.BFloat16 { return collectives.ToBFloat16(float32(v)) },
			to:   func(v collectives.BFloat16) float64 { return float64(v.Float32()) },
		})
	}}},
}

func typeByName(s string) (elemType, error) {
	var names []string
	for _, e := range elemTypes {
		for _, a := range e.aliases {
			if strings.EqualFold(a, s) {
				return e.t, nil
			}
		}
		names = append(names, e.aliases[0])
	}
	return elemType{}, fmt.Errorf("unknown type %q: want one of %s", s, strings.Join(names, ", "))
}

var ops = map[string]collectives.Op{
	"sum": collectives.Sum, "prod": collectives.Prod, "min": collectives.Min,
	"max": collectives.Max, "avg": collectives.Avg,
}

func opByName(s string) (collectives.Op, error) {
	if o, ok := ops[strings.ToLower(s)]; ok {
		return o, nil
	}
	return 0, fmt.Errorf("unknown op %q: want sum, prod, min, max or avg", s)
}

// combine is op applied, in float64, to the values f(0..n-1).
func combine(op collectives.Op, n int, integer bool, f func(q int) float64) float64 {
	acc := f(0)
	for q := 1; q < n; q++ {
		v := f(q)
		switch op {
		case collectives.Prod:
			acc *= v
		case collectives.Min:
			acc = math.Min(acc, v)
		case collectives.Max:
			acc = math.Max(acc, v)
		default:
			acc += v
		}
	}
	if op == collectives.Avg {
		acc /= float64(n)
		if integer {
			acc = math.Trunc(acc)
		}
	}
	return acc
}
