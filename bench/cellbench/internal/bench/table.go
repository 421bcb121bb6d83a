package bench

import (
	"fmt"
	"io"
	"strconv"
)

// The table reproduces nccl-tests' layout so that its readers find every
// column where they expect it.

func printHeader(w io.Writer) {
	fmt.Fprintf(w, "#%52s%36s%34s\n", "", "out-of-place", "in-place")
	fmt.Fprintf(w, "#%11s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n",
		"size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong")
	fmt.Fprintf(w, "#%11s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n",
		"(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "")
}

func printRow(w io.Writer, r Row) {
	fmt.Fprintf(w, "%12d  %12d  %8s  %6s  %6d", r.Bytes, r.Count, r.Type, r.RedOp, r.Root)
	for _, res := range []Result{r.OutOfPlace, r.InPlace} {
		if res.Skipped {
			fmt.Fprintf(w, "  %7s  %6s  %6s  %6s", "N/A", "N/A", "N/A", "N/A")
			continue
		}
		fmt.Fprintf(w, "  %7s  %6.2f  %6.2f  %6s", formatTime(res.TimeUS), res.AlgBW, res.BusBW, formatWrong(res.Wrong))
	}
	fmt.Fprintln(w)
}

// formatTime keeps the column seven characters wide, as nccl-tests does.
func formatTime(us float64) string {
	switch {
	case us < 1e4:
		return strconv.FormatFloat(us, 'f', 2, 64)
	case us < 1e6:
		return strconv.FormatFloat(us, 'f', 1, 64)
	}
	return strconv.FormatFloat(us, 'f', 0, 64)
}

func formatWrong(n int64) string {
	if n < 0 {
		return "N/A"
	}
	return strconv.FormatInt(n, 10)
}

// printFooter sums up the rows: the values out of place and the average
// bus bandwidth over both forms of every row.
func printFooter(w io.Writer, rows []Row) {
	var wrong int64
	var sum float64
	var n int
	for _, r := range rows {
		for _, res := range []Result{r.OutOfPlace, r.InPlace} {
			if !res.Skipped {
				wrong += max(res.Wrong, 0)
				sum, n = sum+res.BusBW, n+1
			}
		}
	}
	verdict := "OK"
	if wrong > 0 {
		verdict = "FAILED"
	}
	avg := 0.0
	if n > 0 {
		avg = sum / float64(n)
	}
	fmt.Fprintf(w, "# Out of bounds values : %d %s\n", wrong, verdict)
	fmt.Fprintf(w, "# Avg bus bandwidth    : %g\n", avg)
	fmt.Fprintln(w, "#")
}
