package experiment

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Record is one line the traffic program printed: its kind (BEGIN, ITER,
// SUMMARY or WRONG) and its key=value fields.
type Record struct {
	Kind   string
	Rank   int
	Fields map[string]string
}

// parseRecord reads a line of cellrun's output ("[rank] KIND k=v ..."),
// and reports whether it is one of the traffic program's records.
func parseRecord(line string) (Record, bool) {
	rest, ok := strings.CutPrefix(line, "[")
	if !ok {
		return Record{}, false
	}
	rankText, rest, ok := strings.Cut(rest, "] ")
	if !ok {
		return Record{}, false
	}
	rank, err := strconv.Atoi(rankText)
	if err != nil {
		return Record{}, false
	}
	f := strings.Fields(rest)
	if len(f) == 0 {
		return Record{}, false
	}
	switch f[0] {
	case "BEGIN", "ITER", "SUMMARY", "WRONG":
	default:
		return Record{}, false
	}
	r := Record{Kind: f[0], Rank: rank, Fields: map[string]string{}}
	for _, kv := range f[1:] {
		if k, v, ok := strings.Cut(kv, "="); ok {
			r.Fields[k] = v
		}
	}
	return r, true
}

// Int returns field k as an integer.
func (r Record) Int(k string) (int64, error) {
	n, err := strconv.ParseInt(r.Fields[k], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("experiment: %s record: field %s=%q: %w", r.Kind, k, r.Fields[k], err)
	}
	return n, nil
}

// Float returns field k as a float.
func (r Record) Float(k string) (float64, error) {
	f, err := strconv.ParseFloat(r.Fields[k], 64)
	if err != nil {
		return 0, fmt.Errorf("experiment: %s record: field %s=%q: %w", r.Kind, k, r.Fields[k], err)
	}
	return f, nil
}

// Time returns field k, nanoseconds since the epoch, as a time.
func (r Record) Time(k string) (time.Time, error) {
	n, err := r.Int(k)
	return time.Unix(0, n), err
}
