package flight

import (
	"math/bits"
	"time"
)

// SizeClasses are the upper bounds, in bytes, of the size classes the
// latency histograms are kept by; the last class has none.
var SizeClasses = [...]int64{1 << 10, 64 << 10, 1 << 20, 16 << 20}

// NumSizeClasses counts the classes, the unbounded last one included.
const NumSizeClasses = len(SizeClasses) + 1

// NumBuckets is the number of latency buckets: bucket b counts
// operations that took at most BucketBound(b), the last one every longer
// one too.
const NumBuckets = 32

// maxNames bounds the operation names the histograms tell apart; further
// names share the last histogram under the name "other".
const maxNames = 24

// BucketBound is the upper bound of latency bucket b: 2^b microseconds.
func BucketBound(b int) time.Duration { return time.Microsecond << b }

// SizeClassName names size class c by its bound, e.g. "le64KiB", or
// "gt16MiB" for the last.
func SizeClassName(c int) string {
	if c < len(SizeClasses) {
		return "le" + bytesName(SizeClasses[c])
	}
	return "gt" + bytesName(SizeClasses[len(SizeClasses)-1])
}

func bytesName(n int64) string {
	switch {
	case n >= 1<<20:
		return itoa(n>>20) + "MiB"
	case n >= 1<<10:
		return itoa(n>>10) + "KiB"
	}
	return itoa(n) + "B"
}

func itoa(n int64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}

// Histogram counts the operations of one name and size class by latency.
type Histogram struct {
	// Buckets[b] counts those that took at most BucketBound(b) and more
	// than BucketBound(b-1) (the last bucket: more than the one before).
	Buckets [NumBuckets]uint64
	// Count, Failed and Sum are their number, how many of them failed and
	// their total latency.
	Count, Failed uint64
	Sum           time.Duration
}

// Histograms are the latency histograms of a recorder, one per operation
// name and size class.
type Histograms struct {
	names [maxNames]string
	n     int
	h     [maxNames][NumSizeClasses]Histogram
}

// Each calls f for every histogram that counted an operation.
func (hs *Histograms) Each(f func(name string, class int, h *Histogram)) {
	for i := range hs.n {
		for c := range NumSizeClasses {
			if hs.h[i][c].Count > 0 {
				f(hs.names[i], c, &hs.h[i][c])
			}
		}
	}
}

func (hs *Histograms) observe(name string, bytes int64, d time.Duration, failed bool) {
	i := 0
	for i < hs.n && hs.names[i] != name {
		i++
	}
	if i == hs.n {
		if hs.n == maxNames {
			i = maxNames - 1
			hs.names[i] = "other"
		} else {
			hs.names[i] = name
			hs.n++
		}
	}
	h := &hs.h[i][sizeClass(bytes)]
	h.Buckets[bucket(d)]++
	h.Count++
	h.Sum += d
	if failed {
		h.Failed++
	}
}

func sizeClass(n int64) int {
	for c, bound := range SizeClasses {
		if n <= bound {
			return c
		}
	}
	return len(SizeClasses)
}

// bucket is the smallest b with d <= BucketBound(b), at most the last.
func bucket(d time.Duration) int {
	us := uint64(max(d, 0)+time.Microsecond-1) / uint64(time.Microsecond)
	if us <= 1 {
		return 0
	}
	return min(bits.Len64(us-1), NumBuckets-1)
}
