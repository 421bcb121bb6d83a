package collectives

import (
	"context"
	"errors"
	"fmt"
	"reflect"
)

// WaitAll waits until every request of reqs has completed and returns
// their errors joined (nil if all succeeded), each naming its index in
// reqs. ctx bounds the waiting only, as it does for Wait: if it ends
// first, WaitAll returns its error and no request is spent, so WaitAll
// (or Wait on any of them) may be called again. A zero Request, or one
// already waited for, is inactive and ignored, as MPI_Waitall ignores
// MPI_REQUEST_NULL. Collectives and messages may be mixed.
func WaitAll(ctx context.Context, reqs ...Request) error {
	// The requests are spent only once all of them are done.
	for i, r := range reqs {
		switch op, m := r.active(); {
		case m != nil:
			if err := m.wait(ctx); err != nil {
				return fmt.Errorf("collectives: waiting for request %d of %d: %w", i, len(reqs), err)
			}
		case op != nil:
			if !op.completed(ctx) {
				return fmt.Errorf("collectives: waiting for request %d of %d (%s #%d): %w", i, len(reqs), op.kind, op.seq, ctx.Err())
			}
		}
	}
	var errs []error
	for i, r := range reqs {
		var err error
		switch op, m := r.active(); {
		case m != nil:
			err = m.take()
		case op != nil:
			err = op.take()
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("request %d: %w", i, err))
		}
	}
	return errors.Join(errs...)
}

// WaitAny waits until one of reqs has completed, spends it and returns
// its index and error; the others are left as they were. Inactive
// requests (zero, or already waited for) are skipped, so that calling
// WaitAny on the same slice until it returns -1 collects every result, as
// with MPI_Waitany; -1 and a nil error mean none was active. If ctx ends
// first, WaitAny returns -1 and ctx's error, and no request is spent.
//
// A group completes its operations in the order they were issued, so
// among the collectives of one group WaitAny waits for the earliest
// issued; collectives of several groups cost it an allocation, and
// messages a goroutine each while it waits.
func WaitAny(ctx context.Context, reqs ...Request) (int, error) {
	one, many := -1, false // the earliest collective of the first group seen; another group or a message seen
	for i, r := range reqs {
		op, m := r.active()
		if m != nil {
			if done, _, _ := m.h.Test(); done {
				return i, m.take()
			}
			many = true
			continue
		}
		if op == nil {
			continue
		}
		if op.state.Load() == opDone {
			return i, op.take()
		}
		switch {
		case one < 0:
			one = i
		case reqs[one].op.group != op.group:
			many = true
		case op.seq < reqs[one].op.seq:
			one = i
		}
	}
	if many {
		return waitAnyMixed(ctx, reqs)
	}
	if one < 0 {
		return -1, nil
	}
	if !reqs[one].op.completed(ctx) {
		return -1, fmt.Errorf("collectives: waiting for any of %d requests: %w", len(reqs), ctx.Err())
	}
	return one, reqs[one].op.take()
}

// waitAnyMixed is WaitAny over collectives of several groups, or over
// messages: one select over the earliest pending collective of each
// group, the messages (each waited for by a goroutine until the select
// returns) and ctx.
func waitAnyMixed(ctx context.Context, reqs []Request) (int, error) {
	var first, msgs []int
	for i, r := range reqs {
		op, m := r.active()
		if m != nil {
			msgs = append(msgs, i)
			continue
		}
		if op == nil {
			continue
		}
		j := -1
		for k, f := range first {
			if reqs[f].op.group == op.group {
				j = k
			}
		}
		switch {
		case j < 0:
			first = append(first, i)
		case op.seq < reqs[first[j]].op.seq:
			first[j] = i
		}
	}
	cases := make([]reflect.SelectCase, 0, len(first)+2)
	for _, i := range first {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(reqs[i].op.done)})
	}
	var hit chan int // stays nil, never ready, without messages
	if len(msgs) > 0 {
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		hit = make(chan int, len(msgs))
		for _, i := range msgs {
			m := reqs[i].msg
			go func() {
				if m.wait(wctx) == nil {
					hit <- i
				}
			}()
		}
	}
	cases = append(cases,
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(hit)},
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())})
	k, v, _ := reflect.Select(cases)
	switch k {
	case len(first) + 1:
		return -1, fmt.Errorf("collectives: waiting for any of %d requests: %w", len(reqs), ctx.Err())
	case len(first):
		i := int(v.Int())
		return i, reqs[i].msg.take()
	}
	i := first[k]
	op := reqs[i].op
	op.done <- struct{}{} // put back for take
	return i, op.take()
}

// completed waits until the operation of a live Request is done, leaving
// its completion token for take; false if ctx ended first.
func (op *operation) completed(ctx context.Context) bool {
	select {
	case <-op.done:
		op.done <- struct{}{}
		return true
	case <-ctx.Done():
		return false
	}
}

// take spends the Request of a completed operation: it takes the result
// and recycles the operation.
func (op *operation) take() error {
	<-op.done
	err := op.err
	op.group.recycle(op)
	return err
}
