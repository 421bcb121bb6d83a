package cell

// Global_Cell_IDs and range sequence numbers are 32-bit counters that wrap.
// They are compared with serial-number arithmetic (RFC 1982): a is before
// b when the distance from b to a, read as a signed 32-bit number, is
// negative. That is unambiguous while every id compared lies within 2^31
// of the others, which the window (at most 2^20) guarantees.

// seqDiff returns a − b as a signed distance.
func seqDiff(a, b uint32) int32 { return int32(a - b) }

// seqBefore reports whether a comes before b.
func seqBefore(a, b uint32) bool { return seqDiff(a, b) < 0 }

// inWindow reports whether id lies in [lo, lo+n).
func inWindow(id, lo, n uint32) bool { return id-lo < n }
