package launcher

import (
	"errors"
	"math"
	"strconv"
	"strings"
)

// sizeUnits are the suffixes --cell-size accepts. Both spellings are binary:
// a cell size is about memory, where nobody means 1000.
var sizeUnits = []struct {
	suffix string
	factor int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30},
	{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30},
	{"B", 1},
}

// parseSize reads a byte size such as "65536", "64K" or "64KiB". Its errors
// say what was expected; the caller names the flag and value.
func parseSize(s string) (int64, error) {
	num, factor := strings.TrimSpace(s), int64(1)
	for _, u := range sizeUnits {
		if n, ok := strings.CutSuffix(num, u.suffix); ok {
			num, factor = n, u.factor
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 {
		return 0, errors.New("want a positive number of bytes, optionally with K, M or G (KiB, MiB, GiB)")
	}
	if n > math.MaxInt64/factor {
		return 0, errors.New("want at most 8 EiB")
	}
	return n * factor, nil
}
