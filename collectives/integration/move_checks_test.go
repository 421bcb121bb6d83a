package integration

import (
	"fmt"

	"github.com/rdmacell/rdmacell/collectives"
)

// every runs fn at every count, out of place and in place.
func every(fn func(count int, inPlace bool) error) error {
	return eachCase(reduceCase{large: true}, fn)
}

func checkAllGather(k *checker) error {
	return every(func(n int, in bool) error { return allGather[float32](k, n, in) })
}

func allGather[T number](k *checker, count int, inPlace bool) error {
	salt := k.next()
	recv := make([]T, k.size*count)
	send := values[T](k.rank, salt, 0, count)
	if inPlace {
		// The in-place form sends this rank's block of recv.
		send = recv[k.rank*count:][:count]
		copy(send, values[T](k.rank, salt, 0, count))
	}
	what := fmt.Sprintf("AllGather %T count %d in-place %v", *new(T), count, inPlace)
	if err := collectives.AllGather(k.ctx, k.g, send, recv); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	var want []T
	for r := range k.size {
		want = append(want, values[T](r, salt, 0, count)...)
	}
	return same(what, recv, want)
}

func checkAllGatherV(k *checker) error {
	return every(func(n int, in bool) error { return allGatherV[int64](k, n, in) })
}

// allGatherV gives rank r about count/(r+1) elements, so that the ranks'
// blocks differ in length.
func allGatherV[T number](k *checker, count int, inPlace bool) error {
	salt := k.next()
	sizes := make([]int, k.size)
	at, total := 0, 0
	for r := range sizes {
		sizes[r] = (count + r) / (r + 1)
		if r < k.rank {
			at += sizes[r]
		}
		total += sizes[r]
	}
	recv := make([]T, total)
	send := values[T](k.rank, salt, 0, sizes[k.rank])
	if inPlace {
		send = recv[at:][:sizes[k.rank]]
		copy(send, values[T](k.rank, salt, 0, sizes[k.rank]))
	}
	what := fmt.Sprintf("AllGatherV %T counts %v in-place %v", *new(T), sizes, inPlace)
	if err := collectives.AllGatherV(k.ctx, k.g, send, recv, sizes); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	var want []T
	for r := range k.size {
		want = append(want, values[T](r, salt, 0, sizes[r])...)
	}
	return same(what, recv, want)
}

func checkAllToAll(k *checker) error {
	return every(func(n int, in bool) error { return allToAll[int32](k, n, in) })
}

// allToAll sends block d of this rank's data to rank d: rank s's block d
// is elements [d*count, (d+1)*count) of its values.
func allToAll[T number](k *checker, count int, inPlace bool) error {
	salt := k.next()
	send := values[T](k.rank, salt, 0, k.size*count)
	recv := make([]T, k.size*count)
	if inPlace {
		recv = send
	}
	what := fmt.Sprintf("AllToAll %T count %d in-place %v", *new(T), count, inPlace)
	if err := collectives.AllToAll(k.ctx, k.g, send, recv); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	var want []T
	for s := range k.size {
		want = append(want, values[T](s, salt, k.rank*count, count)...)
	}
	return same(what, recv, want)
}

func checkAllToAllV(k *checker) error {
	return every(func(n int, in bool) error { return allToAllV[float32](k, n, in) })
}

// allToAllV sends cell(s, d) elements from rank s to rank d. The in-place
// form needs as many elements in as out, so it uses counts symmetric in s
// and d; the out-of-place form uses lopsided ones.
func allToAllV[T number](k *checker, count int, inPlace bool) error {
	salt := k.next()
	cell := func(s, d int) int { return count * ((s+2*d)%3 + 1) / 3 }
	if inPlace {
		cell = func(s, d int) int { return count * ((s+d)%3 + 1) / 3 }
	}
	sendCounts, recvCounts := make([]int, k.size), make([]int, k.size)
	var send, want []T
	for r := range k.size {
		sendCounts[r], recvCounts[r] = cell(k.rank, r), cell(r, k.rank)
		// What rank s sends rank d is its values under salt+d.
		send = append(send, values[T](k.rank, salt+r, 0, sendCounts[r])...)
		want = append(want, values[T](r, salt+k.rank, 0, recvCounts[r])...)
	}
	recv := make([]T, len(want))
	if inPlace {
		recv = send
	}
	what := fmt.Sprintf("AllToAllV %T send %v recv %v in-place %v", *new(T), sendCounts, recvCounts, inPlace)
	if err := collectives.AllToAllV(k.ctx, k.g, send, sendCounts, recv, recvCounts); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return same(what, recv, want)
}

func checkBroadcast(k *checker) error {
	for _, root := range []int{0, k.size - 1} {
		if err := every(func(n int, in bool) error { return broadcast[float64](k, root, n, in) }); err != nil {
			return err
		}
	}
	return nil
}

// broadcast checks a Broadcast from root; send is nil elsewhere.
func broadcast[T number](k *checker, root, count int, inPlace bool) error {
	salt := k.next()
	recv := make([]T, count)
	var send []T
	if k.rank == root {
		send = values[T](root, salt, 0, count)
		if inPlace {
			copy(recv, send)
			send = recv
		}
	}
	what := fmt.Sprintf("Broadcast %T root %d count %d in-place %v", *new(T), root, count, inPlace)
	if err := collectives.Broadcast(k.ctx, k.g, send, recv, root); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return same(what, recv, values[T](root, salt, 0, count))
}
