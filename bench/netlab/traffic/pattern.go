package traffic

// The values each rank sends are small integers, exact in float32 and in
// their sums, and change with the rank, the element and the iteration, so
// that a block landing in the wrong place, a stale block from the previous
// iteration, or a lost one is caught.

// mod is x mod m, in [0, m) also for negative x.
func mod(x, m int) int { return ((x % m) + m) % m }

// reduceValue is what rank r contributes to element i of iteration it.
func reduceValue(r, i, it int) float32 { return float32((r + 1) * (mod(i+3*it, 8) + 1)) }

// exchangeValue is element k of the block rank src sends rank dst.
func exchangeValue(src, dst, k, it int) float32 {
	return float32(mod(src*251+dst*13+k+it, 4093))
}

// fill writes rank r's input of iteration it for op over n ranks.
func fill(op Op, send []float32, r, n, it int) {
	if op == AllReduce {
		for i := range send {
			send[i] = reduceValue(r, i, it)
		}
		return
	}
	blk := len(send) / n
	for dst := range n {
		b := send[dst*blk : (dst+1)*blk]
		for k := range b {
			b[k] = exchangeValue(r, dst, k, it)
		}
	}
}

// expected is element i of rank r's result of iteration it for op over n
// ranks, with blk elements per block (AllToAll).
func expected(op Op, i, blk, r, n, it int) float32 {
	if op == AllReduce {
		return float32(n * (n + 1) / 2 * (mod(i+3*it, 8) + 1))
	}
	return exchangeValue(i/blk, r, i%blk, it)
}

// Mismatch is the first wrong element of a result: where it is, what it
// held and what it should have held; and the first runs of consecutive
// wrong elements, which say which ranges of the buffer never landed or
// landed wrong.
type Mismatch struct {
	Index     int
	Got, Want float32
	Runs      []Span
}

// Span is the elements [Start, End) of a result, all wrong.
type Span struct{ Start, End int }

// maxRuns is how many runs of wrong elements a Mismatch keeps.
const maxRuns = 8

// check counts the elements of rank r's result of iteration it that are
// not what op over n ranks must give, and returns the first of them.
func check(op Op, recv []float32, r, n, it int) (int64, Mismatch) {
	var wrong int64
	var first Mismatch
	note := func(i int, got, want float32) {
		if wrong == 0 {
			first = Mismatch{Index: i, Got: got, Want: want}
		}
		wrong++
		if n := len(first.Runs); n > 0 && first.Runs[n-1].End == i {
			first.Runs[n-1].End++
		} else if n < maxRuns {
			first.Runs = append(first.Runs, Span{Start: i, End: i + 1})
		}
	}
	if op == AllReduce {
		ranks := n * (n + 1) / 2
		for i, v := range recv {
			if want := float32(ranks * (mod(i+3*it, 8) + 1)); v != want {
				note(i, v, want)
			}
		}
		return wrong, first
	}
	blk := len(recv) / n
	for src := range n {
		b := recv[src*blk : (src+1)*blk]
		for k, v := range b {
			if want := exchangeValue(src, r, k, it); v != want {
				note(src*blk+k, v, want)
			}
		}
	}
	return wrong, first
}
