package integration

import (
	"errors"
	"fmt"
	"slices"

	"github.com/rdmacell/rdmacell/collectives"
)

func checkBarrier(k *checker) error {
	for i := range 3 {
		k.next()
		if err := collectives.Barrier(k.ctx, k.g); err != nil {
			return fmt.Errorf("Barrier %d: %w", i, err)
		}
	}
	return nil
}

// checkInFlight issues several non-blocking operations before waiting for
// any, then waits for them newest first: each must still complete, in
// issue order, with its own result.
func checkInFlight(k *checker) error {
	type pending struct {
		what  string
		req   collectives.Request
		check func() error
	}
	var ops []pending
	start := func(what string, req collectives.Request, err error, check func() error) error {
		if err != nil {
			return fmt.Errorf("in flight: start %s: %w", what, err)
		}
		ops = append(ops, pending{what, req, check})
		return nil
	}

	const prime, large = 7919, 1 << 18
	sumSalt := k.next()
	sumIn := values[float32](k.rank, sumSalt, 0, large)
	req, err := collectives.IAllReduce(k.ctx, k.g, sumIn, sumIn, collectives.Sum)
	if err := start("IAllReduce", req, err, func() error {
		return same("in flight: IAllReduce", sumIn, reduced[float32](collectives.Sum, k.size, sumSalt, 0, large))
	}); err != nil {
		return err
	}

	gatherSalt := k.next()
	gathered := make([]int64, k.size*prime)
	req, err = collectives.IAllGather(k.ctx, k.g, values[int64](k.rank, gatherSalt, 0, prime), gathered)
	if err := start("IAllGather", req, err, func() error {
		var want []int64
		for r := range k.size {
			want = append(want, values[int64](r, gatherSalt, 0, prime)...)
		}
		return same("in flight: IAllGather", gathered, want)
	}); err != nil {
		return err
	}

	req, err = collectives.IBarrier(k.ctx, k.g)
	if err := start("IBarrier", req, err, func() error { return nil }); err != nil {
		return err
	}

	root, castSalt := k.size-1, k.next()
	cast := make([]float64, prime)
	var castSend []float64
	if k.rank == root {
		castSend = values[float64](root, castSalt, 0, prime)
	}
	req, err = collectives.IBroadcast(k.ctx, k.g, castSend, cast, root)
	if err := start("IBroadcast", req, err, func() error {
		return same("in flight: IBroadcast", cast, values[float64](root, castSalt, 0, prime))
	}); err != nil {
		return err
	}

	maxSalt := k.next()
	maxOut := make([]int32, prime)
	req, err = collectives.IReduceScatter(k.ctx, k.g, values[int32](k.rank, maxSalt, 0, k.size*prime), maxOut, collectives.Max)
	if err := start("IReduceScatter", req, err, func() error {
		return same("in flight: IReduceScatter", maxOut, reduced[int32](collectives.Max, k.size, maxSalt, k.rank*prime, prime))
	}); err != nil {
		return err
	}

	for _, op := range slices.Backward(ops) {
		if err := op.req.Wait(k.ctx); err != nil {
			return fmt.Errorf("in flight: wait %s: %w", op.what, err)
		}
		if err := op.check(); err != nil {
			return err
		}
	}
	return nil
}

// checkMismatch has ranks disagree and requires that every rank gets a
// *MismatchError naming the odd rank, and that the group is still usable
// after it.
func checkMismatch(k *checker) error {
	const count = 5
	data := values[float32](k.rank, k.next(), 0, count)

	// Different collectives: rank 0 gathers while the others reduce.
	var err error
	if k.rank == 0 {
		err = collectives.AllGather(k.ctx, k.g, data, make([]float32, k.size*count))
	} else {
		err = collectives.AllReduce(k.ctx, k.g, data, make([]float32, count), collectives.Sum)
	}
	if err := wantMismatch("AllGather against AllReduce", err, nil); err != nil {
		return err
	}

	// Same collective, different counts: the last rank is the odd one
	// out (with two ranks the tie goes to rank 0's call).
	n := count
	if k.rank == k.size-1 {
		n = count + 1
	}
	err = collectives.AllReduce(k.ctx, k.g, make([]float32, n), make([]float32, n), collectives.Sum)
	if err := wantMismatch("AllReduce counts", err, []int{k.size - 1}); err != nil {
		return err
	}

	// The ranks agree again: the group works.
	if err := allReduce[float32](k, collectives.Sum, count, false); err != nil {
		return fmt.Errorf("after mismatches: %w", err)
	}
	return nil
}

// wantMismatch checks that err reports a disagreement, and the odd ranks
// when odd is not nil.
func wantMismatch(what string, err error, odd []int) error {
	var me *collectives.MismatchError
	switch {
	case err == nil:
		return fmt.Errorf("mismatch %s: no error", what)
	case !errors.Is(err, collectives.ErrMismatch) || !errors.As(err, &me):
		return fmt.Errorf("mismatch %s: want a *MismatchError: %w", what, err)
	case len(me.Odd) == 0:
		return fmt.Errorf("mismatch %s: no odd rank named: %w", what, err)
	case odd != nil && !slices.Equal(me.Odd, odd):
		return fmt.Errorf("mismatch %s: odd ranks %v, want %v: %w", what, me.Odd, odd, err)
	}
	return nil
}
