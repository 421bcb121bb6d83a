package bench

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseSize reads a byte count with an optional K, M or G suffix (powers
// of 1024, as nccl-tests reads them); a trailing "B" or "iB" is accepted.
func ParseSize(s string) (int64, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	t = strings.TrimSuffix(strings.TrimSuffix(t, "B"), "I")
	shift := 0
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'K':
			shift = 10
		case 'M':
			shift = 20
		case 'G':
			shift = 30
		}
		if shift != 0 {
			t = t[:n-1]
		}
	}
	v, err := strconv.ParseInt(t, 10, 64)
	if err != nil || v < 0 || v > (1<<62)>>shift {
		return 0, fmt.Errorf("size %q: want a byte count such as 8, 64K, 1M or 2G", s)
	}
	return v << shift, nil
}

// Sizes lists the message sizes from min to max: multiplied by factor at
// each step when factor > 1, else increased by step.
func Sizes(min, max int64, factor float64, step int64) []int64 {
	var out []int64
	for s := min; s <= max; {
		out = append(out, s)
		next := s + step
		if factor > 1 {
			next = int64(float64(s) * factor)
		}
		if next <= s {
			break
		}
		s = next
	}
	return out
}
