package integration

import (
	"fmt"

	"github.com/rdmacell/rdmacell/collectives"
)

// A reduction case: an op on an element type, at every count, in place
// and out of place.
type reduceCase struct {
	op    collectives.Op
	large bool // also at the largest count, which is slow on small machines
}

var (
	floatOps = []reduceCase{{collectives.Sum, true}, {collectives.Avg, true}, {collectives.Prod, false}, {collectives.Min, false}, {collectives.Max, false}}
	intOps   = []reduceCase{{collectives.Sum, true}, {collectives.Max, false}}
)

// eachCase calls fn for every count and placement the case runs with.
func eachCase(c reduceCase, fn func(count int, inPlace bool) error) error {
	for _, count := range counts {
		if count == counts[len(counts)-1] && !c.large {
			continue
		}
		for _, inPlace := range []bool{false, true} {
			if err := fn(count, inPlace); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkAllReduce(k *checker) error {
	for _, c := range floatOps {
		if err := eachCase(c, func(n int, in bool) error { return allReduce[float32](k, c.op, n, in) }); err != nil {
			return err
		}
	}
	for _, c := range intOps {
		if err := eachCase(c, func(n int, in bool) error { return allReduce[int64](k, c.op, n, in) }); err != nil {
			return err
		}
	}
	return nil
}

func allReduce[T number](k *checker, op collectives.Op, count int, inPlace bool) error {
	salt := k.next()
	send := values[T](k.rank, salt, 0, count)
	recv := make([]T, count)
	if inPlace {
		recv = send
	}
	what := fmt.Sprintf("AllReduce %T %v count %d in-place %v", *new(T), op, count, inPlace)
	if err := collectives.AllReduce(k.ctx, k.g, send, recv, op); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return same(what, recv, reduced[T](op, k.size, salt, 0, count))
}

func checkReduceScatter(k *checker) error {
	if err := eachCase(floatOps[0], func(n int, in bool) error { return reduceScatter[float32](k, collectives.Sum, n, in) }); err != nil {
		return err
	}
	return eachCase(intOps[1], func(n int, in bool) error { return reduceScatter[int64](k, collectives.Max, n, in) })
}

// reduceScatter checks a ReduceScatter whose result is count elements.
func reduceScatter[T number](k *checker, op collectives.Op, count int, inPlace bool) error {
	salt := k.next()
	send := values[T](k.rank, salt, 0, k.size*count)
	recv := make([]T, count)
	if inPlace {
		recv = send[k.rank*count:][:count]
	}
	what := fmt.Sprintf("ReduceScatter %T %v count %d in-place %v", *new(T), op, count, inPlace)
	if err := collectives.ReduceScatter(k.ctx, k.g, send, recv, op); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return same(what, recv, reduced[T](op, k.size, salt, k.rank*count, count))
}

func checkReduce(k *checker) error {
	for _, root := range []int{0, k.size - 1} {
		err := eachCase(floatOps[0], func(n int, in bool) error { return reduce[float64](k, collectives.Sum, root, n, in) })
		if err != nil {
			return err
		}
		err = eachCase(floatOps[3], func(n int, in bool) error { return reduce[int32](k, collectives.Min, root, n, in) })
		if err != nil {
			return err
		}
	}
	return nil
}

// reduce checks a Reduce to root; only the root has a result to check.
func reduce[T number](k *checker, op collectives.Op, root, count int, inPlace bool) error {
	salt := k.next()
	send := values[T](k.rank, salt, 0, count)
	var recv []T
	if k.rank == root {
		recv = make([]T, count)
		if inPlace {
			recv = send
		}
	}
	what := fmt.Sprintf("Reduce %T %v root %d count %d in-place %v", *new(T), op, root, count, inPlace)
	if err := collectives.Reduce(k.ctx, k.g, send, recv, op, root); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if k.rank != root {
		return nil
	}
	return same(what, recv, reduced[T](op, k.size, salt, 0, count))
}
