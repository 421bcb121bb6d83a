package experiment

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// csvHeader names the columns WriteCSV writes.
var csvHeader = []string{"scenario", "op", "bytes", "ranks_per_host", "policy", "trial",
	"completed", "wrong", "busbw_MBps", "median_iter_ms", "max_iter_ms", "stall_ms",
	"fault", "fault_link", "qp_failures", "demotions", "promotions", "give_ups", "resets", "elapsed_s", "error"}

// CSVWriter writes one row per trial, as trials finish.
type CSVWriter struct {
	w *csv.Writer
}

// NewCSVWriter writes the header to w.
func NewCSVWriter(w io.Writer) (*CSVWriter, error) {
	c := &CSVWriter{w: csv.NewWriter(w)}
	if err := c.w.Write(csvHeader); err != nil {
		return nil, fmt.Errorf("experiment: write csv: %w", err)
	}
	c.w.Flush()
	return c, c.w.Error()
}

// Write writes r's row.
func (c *CSVWriter) Write(r Result) error {
	t := r.Trial
	maxIter := time.Duration(0)
	for _, it := range r.Iterations {
		maxIter = max(maxIter, it.Duration())
	}
	errText := ErrorText(r.Err)
	faultLink := ""
	if !r.FaultAt.IsZero() || t.Fault.Kind == Degrade {
		faultLink = r.FaultLink.String()
	}
	ms := func(d time.Duration) string { return strconv.FormatFloat(d.Seconds()*1e3, 'f', 1, 64) }
	row := []string{t.Scenario, t.Op, strconv.Itoa(t.Bytes), strconv.Itoa(t.RanksPerHost), t.Policy, strconv.Itoa(t.Index),
		strconv.FormatBool(r.Completed()), strconv.FormatInt(r.Wrong, 10),
		strconv.FormatFloat(r.BusBW/1e6, 'f', 2, 64), ms(r.MedianIteration()), ms(maxIter), ms(r.Stall()),
		t.Fault.String(), faultLink, strconv.Itoa(r.QPFailures),
		count(r.Demotions), count(r.Promotions), count(r.GiveUps), count(r.Resets), strconv.FormatFloat(r.Elapsed.Seconds(), 'f', 1, 64), errText}
	if err := c.w.Write(row); err != nil {
		return fmt.Errorf("experiment: write csv: %w", err)
	}
	c.w.Flush()
	return c.w.Error()
}

// ErrorText is err in one line: for a failed node, how it ended and the
// line of its output that says why.
func ErrorText(err error) string {
	hung := ""
	if errors.Is(err, ErrTimeout) {
		hung = "hung (job timeout): "
	}
	var node *NodeError
	if errors.As(err, &node) {
		why := ""
		for _, line := range node.Tail {
			if strings.Contains(line, "labprog:") || strings.Contains(line, "WRONG") || why == "" {
				why = line
			}
		}
		return fmt.Sprintf("%shost %d: %v: %s", hung, node.Host, node.Err, why)
	}
	if err == nil {
		return ""
	}
	line, _, _ := strings.Cut(err.Error(), "\n")
	return hung + line
}

// FabricBound is the most bus bandwidth (bytes per second) op can reach
// between two hosts whose fabric carries capacity bytes per second each
// way, with ranksPerHost ranks on each: AllReduce and a one-rank AllToAll
// move their busbw across it; an AllToAll with R ranks per host sends
// half of every rank's buffer across, R buffers per host.
func FabricBound(op string, ranksPerHost int, capacity float64) float64 {
	r := float64(max(ranksPerHost, 1))
	if op == "alltoall" && r > 1 {
		n := 2 * r
		return 2 * capacity / r * (n - 1) / n
	}
	return capacity
}

// group is the trials of one scenario, op and policy.
type group struct {
	scenario, op, policy string
	results              []Result
}

// Summary writes, in Markdown, one table per scenario and op: for each
// policy the trials completed, correct and hung (past the job timeout), the median bus bandwidth with
// its spread, its fraction of the fabric bound, and its ratio to ecmp
// and spray; with a link failure, the stall; and how many queue pairs
// failed (path resets, mostly). capacity is the fabric's
// capacity each way, in bytes per second.
func Summary(w io.Writer, results []Result, capacity float64) {
	var groups []*group
	find := func(r Result) *group {
		for _, g := range groups {
			if g.scenario == r.Trial.Scenario && g.op == r.Trial.Op && g.policy == r.Trial.Policy {
				return g
			}
		}
		g := &group{scenario: r.Trial.Scenario, op: r.Trial.Op, policy: r.Trial.Policy}
		groups = append(groups, g)
		return g
	}
	for _, r := range results {
		g := find(r)
		g.results = append(g.results, r)
	}
	medians := map[[3]string]float64{}
	for _, g := range groups {
		medians[[3]string{g.scenario, g.op, g.policy}] = median(busbws(g.results))
	}
	var table [2]string
	for _, g := range groups {
		if key := [2]string{g.scenario, g.op}; key != table {
			table = key
			first := g.results[0].Trial
			bound := FabricBound(g.op, first.RanksPerHost, capacity)
			fmt.Fprintf(w, "\n%s, %s, %d MiB per rank, %d rank(s) per host; %s; fabric bound %.1f MB/s busbw\n\n",
				g.scenario, g.op, first.Bytes>>20, first.RanksPerHost, first.Fault, bound/1e6)
			fmt.Fprintln(w, "| policy | completed | correct | hung | busbw MB/s median (min–max) | of bound | ÷ ecmp | ÷ spray | stall ms median (max) | QP failures median | demotions, promotions, give-ups median |")
			fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|")
		}
		bws := busbws(g.results)
		completed, correct, hung := 0, 0, 0
		var stalls, failures, demotions, promotions, giveUps []float64
		for _, r := range g.results {
			failures = append(failures, float64(r.QPFailures))
			if r.Demotions >= 0 {
				demotions = append(demotions, float64(r.Demotions))
				promotions = append(promotions, float64(r.Promotions))
				giveUps = append(giveUps, float64(r.GiveUps))
			}
			if r.Completed() {
				completed++
			}
			if r.Correct() {
				correct++
			}
			if r.Hung() {
				hung++
			}
			if !r.FaultAt.IsZero() && r.Trial.Fault.Kind == LinkDown && r.Completed() {
				stalls = append(stalls, r.Stall().Seconds()*1e3)
			}
		}
		m := median(bws)
		bound := FabricBound(g.op, g.results[0].Trial.RanksPerHost, capacity)
		ratio := func(other string) string {
			o := medians[[3]string{g.scenario, g.op, other}]
			if o == 0 || m == 0 {
				return "–"
			}
			return fmt.Sprintf("%.2f", m/o)
		}
		stall := "–"
		if len(stalls) > 0 {
			stall = fmt.Sprintf("%.0f (%.0f)", median(stalls), slices.Max(stalls))
		}
		spread := "–"
		if len(bws) > 0 {
			spread = fmt.Sprintf("%.1f (%.1f–%.1f)", m/1e6, slices.Min(bws)/1e6, slices.Max(bws)/1e6)
		}
		paths := "–"
		if len(demotions) > 0 {
			paths = fmt.Sprintf("%.0f, %.0f, %.0f", median(demotions), median(promotions), median(giveUps))
		}
		fmt.Fprintf(w, "| %s | %d/%d | %d/%d | %d | %s | %.2f | %s | %s | %s | %.0f | %s |\n",
			g.policy, completed, len(g.results), correct, len(g.results), hung, spread, m/bound, ratio("ecmp"), ratio("spray"), stall, median(failures), paths)
	}
}

// busbws are the bus bandwidths of the trials that completed.
func busbws(rs []Result) []float64 {
	var bw []float64
	for _, r := range rs {
		if r.Completed() {
			bw = append(bw, r.BusBW)
		}
	}
	return bw
}

// median of xs, 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// count is a counter for the CSV: empty when unknown (negative).
func count(n int64) string {
	if n < 0 {
		return ""
	}
	return strconv.FormatInt(n, 10)
}
