package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/bench/cellbench/internal/bench"
)

// binDir holds cellrun and cellbench, built once for every test.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "cellbench-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	out, err := exec.Command("go", "build", "-o", dir+string(filepath.Separator),
		"github.com/rdmacell/rdmacell/launcher/cellrun", ".").CombinedOutput()
	code := 1
	if err != nil {
		fmt.Fprintf(os.Stderr, "build: %v\n%s", err, out)
	} else {
		code = m.Run()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// rowPattern is a data row of the table, behind cellrun's rank prefix:
// size, count, type, redop, root, then time, algbw, busbw, #wrong twice.
var rowPattern = regexp.MustCompile(`^\[0\]\s+(\d+)\s+(\d+)\s+\S+\s+\S+\s+-?\d+` +
	`\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+(\S+)\s+(?:[\d.]+|N/A)\s+(?:[\d.]+|N/A)\s+(?:[\d.]+|N/A)\s+(\S+)$`)

// TestCollectivesCorrect runs every collective briefly through the real
// launcher (two ranks over shared memory, embedded etcd) with checking on,
// and demands a well-formed table with no wrong value.
func TestCollectivesCorrect(t *testing.T) {
	cases := [][]string{}
	for _, c := range bench.Collectives {
		cases = append(cases, []string{c.Name()})
	}
	// Other types and ops go through the same paths; one of each kind.
	cases = append(cases,
		[]string{"allreduce", "-d", "half", "-o", "max"},
		[]string{"reduce", "-d", "int64", "-o", "prod", "-r", "1"},
		[]string{"reducescatter", "-d", "bfloat16", "-o", "avg"},
		[]string{"gather", "-d", "int32", "-r", "1"},
		[]string{"scatter", "-d", "half", "-r", "1"})
	for _, args := range cases {
		t.Run(strings.Join(args, "_"), func(t *testing.T) {
			jsonFile := filepath.Join(t.TempDir(), "rows.json")
			lines := runBench(t, append(args, "-b", "8", "-e", "256K", "-f", "32",
				"-n", "2", "-w", "1", "--reps", "1", "-c", "1", "--json", jsonFile)...)

			var sizes []string
			for _, l := range lines {
				if m := rowPattern.FindStringSubmatch(l); m != nil {
					sizes = append(sizes, m[1])
					assert.Equal(t, "0", m[3], "out-of-place #wrong in %q", l)
					if args[0] != "sendrecv" {
						assert.Equal(t, "0", m[4], "in-place #wrong in %q", l)
					}
				}
			}
			assert.NotEmpty(t, sizes, "no table rows in:\n%s", strings.Join(lines, "\n"))
			assert.Contains(t, lines, "[0] # Out of bounds values : 0 OK")
			assert.NotContains(t, strings.Join(lines, "\n"), "# Paths", "no paths report unless asked for")

			var rows []bench.Row
			data, err := os.ReadFile(jsonFile)
			require.NoError(t, err)
			require.NoError(t, json.Unmarshal(data, &rows))
			require.Len(t, rows, len(sizes))
			for i, r := range rows {
				assert.Equal(t, sizes[i], fmt.Sprint(r.Bytes))
				assert.Equal(t, 2, r.Ranks)
				assert.Zero(t, r.OutOfPlace.Wrong)
				if !r.InPlace.Skipped {
					assert.Zero(t, r.InPlace.Wrong)
				}
			}
		})
	}
}

// Gather and scatter rows are nccl-tests': the size is the root's whole
// buffer, a whole number of blocks, the root column is -r, and the bus
// bandwidth is the algorithm bandwidth times (n-1)/n.
func TestGatherScatterRows(t *testing.T) {
	for _, coll := range []string{"gather", "scatter"} {
		t.Run(coll, func(t *testing.T) {
			jsonFile := filepath.Join(t.TempDir(), "rows.json")
			lines := runBench(t, coll, "-b", "1K", "-e", "1M", "-f", "32", "-r", "1",
				"-n", "2", "-w", "1", "--reps", "1", "-c", "1", "--json", jsonFile)
			var rows []bench.Row
			data, err := os.ReadFile(jsonFile)
			require.NoError(t, err)
			require.NoError(t, json.Unmarshal(data, &rows))
			require.Len(t, rows, 3, "1K, 32K and 1M in:\n%s", strings.Join(lines, "\n"))
			for _, r := range rows {
				assert.Equal(t, coll, r.Collective)
				assert.Equal(t, 1, r.Root)
				assert.Equal(t, "none", r.RedOp)
				assert.Equal(t, r.Bytes, int64(4*r.Count))
				assert.Zero(t, r.Count%2, "a block per rank")
				for _, res := range []bench.Result{r.OutOfPlace, r.InPlace} {
					assert.False(t, res.Skipped)
					assert.Zero(t, res.Wrong)
					assert.InDelta(t, res.AlgBW/2, res.BusBW, 1e-9*res.AlgBW)
				}
			}
			var roots []string
			for _, l := range lines {
				if m := rowPattern.FindStringSubmatch(l); m != nil {
					roots = append(roots, strings.Fields(l)[5])
				}
			}
			assert.Equal(t, []string{"1", "1", "1"}, roots)
		})
	}
}

// runBench runs cellbench under cellrun with two ranks, over the default
// transport (shared memory on one host), and returns its output's lines.
func runBench(t *testing.T, args ...string) []string {
	return runBenchUnder(t, nil, args...)
}

// runBenchUnder is runBench with cellrun's flags launch.
func runBenchUnder(t *testing.T, launch []string, args ...string) []string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "cellrun"),
		slices.Concat([]string{"-n", "2"}, launch, []string{filepath.Join(binDir, "cellbench")}, args)...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "cellbench %v:\n%s", args, out)
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// pathRowPattern is a row of the paths report: rank, peer, transport,
// link, path, state, cells, bytes, RTT, T_soft, late margin, demotions,
// promotions, re-probes, give-ups, resets.
var pathRowPattern = regexp.MustCompile(`^\[0\]\s+(\d+)\s+(\d+)\s+(\S+)\s+(control|bulk)\s+(\d+)\s+(up|slow|down|resetting|dead)` +
	`\s+(\d+)\s+(\d+)\s+([\d.]+|-)\s+([\d.]+)\s+([\d.]+|-)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)$`)

// With --paths-report, rank 0 prints after the table a row for every
// path of both ranks' connections, over tcp with two paths per peer: each
// rank's peer is the other, both links have both paths, and the cells
// and bytes add up to at least what the collectives moved.
func TestPathsReport(t *testing.T) {
	lines := runBenchUnder(t, []string{"--transport", "tcp", "--paths", "2"},
		"allreduce", "-b", "256K", "-e", "256K", "-n", "4", "-w", "1", "--reps", "1", "-c", "1", "--paths-report")
	out := strings.Join(lines, "\n")
	require.Contains(t, out, "[0] # Paths:")
	seen := map[string]bool{}
	bytes := map[int]int64{}
	lateMargins := 0
	for _, l := range lines {
		m := pathRowPattern.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		rank, peer := atoi(t, m[1]), atoi(t, m[2])
		assert.Equal(t, 1-rank, peer, "row %q", l)
		assert.Equal(t, "tcp", m[3], "row %q", l)
		seen[fmt.Sprintf("%d %s %s", rank, m[4], m[5])] = true
		cells, n := atoi(t, m[7]), atoi(t, m[8])
		if n > 0 {
			assert.Positive(t, cells, "row %q: bytes without cells", l)
		}
		if cells == 0 {
			assert.Equal(t, "-", m[9], "row %q: an RTT without a sample", l)
			assert.Equal(t, "-", m[11], "row %q: a late margin without tokens", l)
		}
		if m[11] != "-" {
			lateMargins++
		}
		assert.LessOrEqual(t, atoi(t, m[13]), atoi(t, m[12]), "row %q: every promotion follows a demotion", l)
		bytes[rank] += int64(n)
	}
	want := map[string]bool{}
	for _, r := range []int{0, 1} {
		for _, link := range []string{"control", "bulk"} {
			for _, p := range []string{"0", "1"} {
				want[fmt.Sprintf("%d %s %s", r, link, p)] = true
			}
		}
	}
	require.Equal(t, want, seen, "rows in:\n%s", out)
	require.Positive(t, lateMargins, "no path had its tokens timed:\n%s", out)
	// Check, warm-up and four timed calls, out of place and in place,
	// each sending at least half the vector to the other rank.
	for r, n := range bytes {
		assert.GreaterOrEqual(t, n, int64(2*6*128<<10), "rank %d posted too little:\n%s", r, out)
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	v, err := strconv.Atoi(s)
	require.NoError(t, err)
	return v
}
