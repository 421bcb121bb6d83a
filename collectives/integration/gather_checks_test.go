package integration

import (
	"errors"
	"fmt"

	"github.com/rdmacell/rdmacell/collectives"
)

// roots are the roots the rooted checks run from: the first and the last
// rank.
func (k *checker) roots() []int { return []int{0, k.size - 1} }

// blocks returns the ranks' block lengths, their offsets and their total:
// count each, or for a V collective about count/(r+1) for rank r and none
// for rank 1, so that the blocks differ in length and one is empty.
func (k *checker) blocks(count int, v bool) (sizes, at []int, total int) {
	sizes, at = make([]int, k.size), make([]int, k.size)
	for r := range sizes {
		switch {
		case !v:
			sizes[r] = count
		case r != 1:
			sizes[r] = (count + r) / (r + 1)
		}
		at[r], total = total, total+sizes[r]
	}
	return sizes, at, total
}

func checkGather(k *checker) error {
	for _, root := range k.roots() {
		if err := every(func(n int, in bool) error { return gather[float32](k, root, n, in, false) }); err != nil {
			return err
		}
		if err := every(func(n int, in bool) error { return gather[int64](k, root, n, in, true) }); err != nil {
			return err
		}
	}
	return nil
}

// gather checks a Gather (or GatherV, with uneven counts) to root; only
// the root has a result to check.
func gather[T number](k *checker, root, count int, inPlace, v bool) error {
	salt := k.next()
	sizes, at, total := k.blocks(count, v)
	send := values[T](k.rank, salt, 0, sizes[k.rank])
	var recv []T
	if k.rank == root {
		recv = make([]T, total)
		if inPlace {
			send = recv[at[root]:][:sizes[root]]
			copy(send, values[T](k.rank, salt, 0, sizes[root]))
		}
	}
	what := fmt.Sprintf("Gather %T root %d count %d in-place %v", *new(T), root, count, inPlace)
	var err error
	if v {
		what = fmt.Sprintf("GatherV %T root %d counts %v in-place %v", *new(T), root, sizes, inPlace)
		err = collectives.GatherV(k.ctx, k.g, send, recv, sizes, root)
	} else {
		err = collectives.Gather(k.ctx, k.g, send, recv, root)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if k.rank != root {
		return nil
	}
	var want []T
	for r := range k.size {
		want = append(want, values[T](r, salt, 0, sizes[r])...)
	}
	return same(what, recv, want)
}

func checkScatter(k *checker) error {
	for _, root := range k.roots() {
		if err := every(func(n int, in bool) error { return scatter[float64](k, root, n, in, false) }); err != nil {
			return err
		}
		if err := every(func(n int, in bool) error { return scatter[int32](k, root, n, in, true) }); err != nil {
			return err
		}
	}
	return nil
}

// scatter checks a Scatter (or ScatterV, with uneven counts) from root:
// the root's values, in blocks.
func scatter[T number](k *checker, root, count int, inPlace, v bool) error {
	salt := k.next()
	sizes, at, total := k.blocks(count, v)
	recv := make([]T, sizes[k.rank])
	var send []T
	if k.rank == root {
		send = values[T](root, salt, 0, total)
		if inPlace {
			recv = send[at[root]:][:sizes[root]]
		}
	}
	what := fmt.Sprintf("Scatter %T root %d count %d in-place %v", *new(T), root, count, inPlace)
	var err error
	if v {
		what = fmt.Sprintf("ScatterV %T root %d counts %v in-place %v", *new(T), root, sizes, inPlace)
		err = collectives.ScatterV(k.ctx, k.g, send, recv, sizes, root)
	} else {
		err = collectives.Scatter(k.ctx, k.g, send, recv, root)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return same(what, recv, values[T](root, salt, at[k.rank], sizes[k.rank]))
}

func checkReduceScatterV(k *checker) error {
	if err := eachCase(floatOps[0], func(n int, in bool) error { return reduceScatterV[float32](k, collectives.Sum, n, in) }); err != nil {
		return err
	}
	return eachCase(intOps[1], func(n int, in bool) error { return reduceScatterV[int64](k, collectives.Max, n, in) })
}

// reduceScatterV checks a ReduceScatterV over uneven blocks.
func reduceScatterV[T number](k *checker, op collectives.Op, count int, inPlace bool) error {
	salt := k.next()
	sizes, at, total := k.blocks(count, true)
	send := values[T](k.rank, salt, 0, total)
	recv := make([]T, sizes[k.rank])
	if inPlace {
		recv = send[at[k.rank]:][:sizes[k.rank]]
	}
	what := fmt.Sprintf("ReduceScatterV %T %v counts %v in-place %v", *new(T), op, sizes, inPlace)
	if err := collectives.ReduceScatterV(k.ctx, k.g, send, recv, sizes, op); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return same(what, recv, reduced[T](op, k.size, salt, at[k.rank], sizes[k.rank]))
}

// checkWaitAll issues the non-blocking forms and waits for them together,
// then disagrees about GatherV's counts: every rank must say so.
func checkWaitAll(k *checker) error {
	const count = 7919
	gs, ss := k.next(), k.next()
	root := k.size - 1
	var gathered, scatterSend []float32
	if k.rank == root {
		gathered = make([]float32, k.size*count)
		scatterSend = values[float32](root, ss, 0, k.size*count)
	}
	scattered := make([]float32, count)
	g, err1 := collectives.IGather(k.ctx, k.g, values[float32](k.rank, gs, 0, count), gathered, root)
	s, err2 := collectives.IScatter(k.ctx, k.g, scatterSend, scattered, root)
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("start IGather, IScatter: %w", err)
	}
	if err := collectives.WaitAll(k.ctx, s, g); err != nil {
		return fmt.Errorf("WaitAll: %w", err)
	}
	if err := same("IScatter", scattered, values[float32](root, ss, k.rank*count, count)); err != nil {
		return err
	}
	if k.rank == root {
		var want []float32
		for r := range k.size {
			want = append(want, values[float32](r, gs, 0, count)...)
		}
		if err := same("IGather", gathered, want); err != nil {
			return err
		}
	}

	// The totals agree; the counts of rank 0 are the odd ones (with two
	// ranks the tie goes to rank 0's call).
	counts := make([]int, k.size)
	counts[k.size-1] = 3
	if k.rank == 0 {
		counts[0], counts[k.size-1] = 3, 0
	}
	odd := []int{0}
	if k.size == 2 {
		odd = []int{1}
	}
	err := collectives.GatherV(k.ctx, k.g, make([]float32, counts[k.rank]), make([]float32, 3), counts, 0)
	return wantMismatch("GatherV counts", err, odd)
}

// checkSendrecv shifts messages of every size class round the ring in
// both directions with the group's Sendrecv.
func checkSendrecv(k *checker) error {
	right, left := (k.rank+1)%k.size, (k.rank+k.size-1)%k.size
	for _, count := range counts {
		for dir, to := range []int{right, left} {
			from := left
			if dir == 1 {
				from = right
			}
			salt := k.next()
			send := values[int64](k.rank, salt, 0, count)
			recv := make([]int64, count)
			what := fmt.Sprintf("Sendrecv of %d elements to rank %d from rank %d", count, to, from)
			st, err := collectives.Sendrecv(k.ctx, k.g, to, uint64(salt), send, from, uint64(salt), recv)
			if err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			if st.Len != 8*count || st.Source != from {
				return fmt.Errorf("%s: received %d bytes from rank %d, want %d from rank %d", what, st.Len, st.Source, 8*count, from)
			}
			if err := same(what, recv, values[int64](from, salt, 0, count)); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkMessages sends every size class to every other rank with Isend,
// receives from any rank with Irecv, and waits for all of them together
// with a non-blocking AllReduce issued among them: each receive's Status
// names its sender, whose data it holds.
func checkMessages(k *checker) error {
	for _, count := range counts {
		salt := k.next()
		var reqs, recvs []collectives.Request
		var bufs [][]float32
		for j := range k.size {
			if j == k.rank {
				continue
			}
			buf := make([]float32, count)
			r, err := collectives.Irecv(k.ctx, k.g, collectives.AnySource, uint64(salt), buf)
			if err != nil {
				return err
			}
			s, err := collectives.Isend(k.ctx, k.g, j, uint64(salt), values[float32](k.rank, salt, 0, count))
			if err != nil {
				return err
			}
			reqs, recvs, bufs = append(reqs, r, s), append(recvs, r), append(bufs, buf)
		}
		sum := []int64{int64(k.rank)}
		ar, err := collectives.IAllReduce(k.ctx, k.g, sum, sum, collectives.Sum)
		if err != nil {
			return err
		}
		what := fmt.Sprintf("messages of %d elements", count)
		if err := collectives.WaitAll(k.ctx, append(reqs, ar)...); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if want := int64(k.size * (k.size - 1) / 2); sum[0] != want {
			return fmt.Errorf("%s: the AllReduce among them gave %d, want %d", what, sum[0], want)
		}
		from := map[int]bool{}
		for i, r := range recvs {
			st := r.Status()
			if st.Source < 0 || st.Source >= k.size || st.Source == k.rank || from[st.Source] || st.Len != 4*count {
				return fmt.Errorf("%s: a receive's Status is %+v", what, st)
			}
			from[st.Source] = true
			if err := same(fmt.Sprintf("%s from rank %d", what, st.Source), bufs[i], values[float32](st.Source, salt, 0, count)); err != nil {
				return err
			}
		}
	}
	return nil
}
