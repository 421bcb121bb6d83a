package bench

// Row is one message size: the out-of-place and in-place results.
type Row struct {
	Collective string `json:"collective"`
	Ranks      int    `json:"ranks"`
	// Bytes is the full per-rank buffer, as nccl-tests counts it; Count
	// the number of elements in it.
	Bytes      int64  `json:"bytes"`
	Count      int    `json:"count"`
	Type       string `json:"type"`
	RedOp      string `json:"redop"`
	Root       int    `json:"root"`
	OutOfPlace Result `json:"out_of_place"`
	InPlace    Result `json:"in_place"`
}

// Result is the measurement of one form of a call.
type Result struct {
	// TimeUS is the median over repetitions of the per-call time (the
	// maximum over ranks), in microseconds; Min and Max bound the
	// repetitions.
	TimeUS    float64 `json:"time_us"`
	TimeMinUS float64 `json:"time_us_min"`
	TimeMaxUS float64 `json:"time_us_max"`
	// AlgBW is Bytes over the time, BusBW that times the collective's
	// bus factor, both in GB/s (1e9 bytes).
	AlgBW float64 `json:"algbw_GBps"`
	BusBW float64 `json:"busbw_GBps"`
	// Wrong counts the wrong elements over all ranks; -1 when unchecked.
	Wrong int64 `json:"wrong"`
	Iters int   `json:"iters"`
	Reps  int   `json:"reps"`
	// Skipped marks a form the collective does not have.
	Skipped bool `json:"skipped,omitempty"`
}

// newRow starts the row of one size.
func (b *bencher) newRow(bytes int64, count int) Row {
	r := Row{Collective: b.coll.name, Ranks: b.n, Bytes: bytes, Count: count, Type: b.typ.name, RedOp: "none", Root: -1}
	if b.coll.reduces {
		r.RedOp = b.cfg.Op
	}
	if b.coll.rooted {
		r.Root = b.cfg.Root
	}
	return r
}
