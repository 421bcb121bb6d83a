package bench

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
)

// csvHeader is the reference benchmarks' column list, so that their
// summarizer tabulates cellbench beside them.
var csvHeader = []string{"run", "label", "nranks", "collective", "bytes", "count", "iters", "reps",
	"time_us", "time_us_min", "time_us_max", "algbw_GBps", "busbw_GBps", "check"}

func writeJSON(path string, rows []Row) error {
	data, err := json.MarshalIndent(rows, "", "  ")
	if err != nil {
		return fmt.Errorf("encode rows: %w", err)
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("write --json file: %w", err)
	}
	return nil
}

// writeCSV writes the out-of-place results, the only form the references
// measure. An existing file is appended to, without a second header, so
// that several runs collect in one file.
func writeCSV(path, label string, run int, coll *collective, rows []Row) (err error) {
	st, statErr := os.Stat(path)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("open --csv file: %w", err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("close --csv file: %w", cerr)
		}
	}()
	w := csv.NewWriter(f)
	if statErr != nil || st.Size() == 0 {
		_ = w.Write(csvHeader)
	}
	ff := func(v float64, prec int) string { return strconv.FormatFloat(v, 'f', prec, 64) }
	for _, r := range rows {
		res := r.OutOfPlace
		check := "ok"
		if res.Wrong > 0 {
			check = "FAIL"
		}
		_ = w.Write([]string{strconv.Itoa(run), label, strconv.Itoa(r.Ranks), coll.csvName,
			strconv.FormatInt(r.Bytes, 10), strconv.Itoa(r.Count), strconv.Itoa(res.Iters), strconv.Itoa(res.Reps),
			ff(res.TimeUS, 3), ff(res.TimeMinUS, 3), ff(res.TimeMaxUS, 3), ff(res.AlgBW, 4), ff(res.BusBW, 4), check})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return fmt.Errorf("write --csv file: %w", err)
	}
	return nil
}
