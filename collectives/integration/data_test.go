package integration

import (
	"fmt"

	"github.com/rdmacell/rdmacell/collectives"
)

// number is the element types these tests use. Every value is a small
// integer, so sums, products, minima and maxima over four ranks are exact
// in each of them, whatever order an algorithm combines in: the serial
// reference can be compared bit for bit.
type number interface {
	float32 | float64 | int32 | int64
}

// value is element i of the data rank contributes to a check; salt makes
// each check's data different from the previous one's.
func value[T number](rank, salt, i int) T {
	return T((rank*31+i*7+salt*13)%11 - 5)
}

// values is count elements of value, starting at element from.
func values[T number](rank, salt, from, count int) []T {
	v := make([]T, count)
	for i := range v {
		v[i] = value[T](rank, salt, from+i)
	}
	return v
}

// combine is the serial reference of op over one element of every rank,
// combined in rank order.
func combine[T number](op collectives.Op, size int, elem func(rank int) T) T {
	acc := elem(0)
	for r := 1; r < size; r++ {
		x := elem(r)
		switch op {
		case collectives.Sum, collectives.Avg:
			acc += x
		case collectives.Prod:
			acc *= x
		case collectives.Min:
			acc = min(acc, x)
		case collectives.Max:
			acc = max(acc, x)
		}
	}
	if op == collectives.Avg {
		// Floats divide correctly rounded and integers truncate, as
		// the collectives document.
		acc /= T(size)
	}
	return acc
}

// reduced is the reference result of reducing every rank's values.
func reduced[T number](op collectives.Op, size, salt, from, count int) []T {
	want := make([]T, count)
	for i := range want {
		want[i] = combine(op, size, func(r int) T { return value[T](r, salt, from+i) })
	}
	return want
}

// same reports the first element where got differs from want.
func same[T number](what string, got, want []T) error {
	if len(got) != len(want) {
		return fmt.Errorf("%s: %d elements, want %d", what, len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			return fmt.Errorf("%s: element %d is %v, want %v", what, i, got[i], want[i])
		}
	}
	return nil
}
