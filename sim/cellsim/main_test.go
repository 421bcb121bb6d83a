package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/sim"
)

func TestParseDefaults(t *testing.T) {
	o, err := parse([]string{"--workloads", "a.txt"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, sim.Config{
		Topology: sim.Topology{Kind: "fattree", K: 8, Leaves: 8, Spines: 8, HostsPerLeaf: 8},
		Duration: 20e6, Warmup: 5e6, Drain: 50e6,
		Paths: 4, CellBDP: 1.5, QPReset: 100e3, RecvLead: 1e6, TokenPrio: true, SoftBackoff: 64,
	}, o.base)
	assert.Equal(t, sim.Schemes, o.schemes)
	assert.Equal(t, []string{"a.txt"}, o.workloads)
	assert.Equal(t, []float64{0.2, 0.4, 0.6, 0.8}, o.loads)
	assert.Equal(t, 1, o.seeds)
	assert.Equal(t, 1, o.firstSeed)
	assert.Equal(t, runtime.NumCPU(), o.jobs)
	assert.Equal(t, ".", o.out)
	assert.True(t, o.plot)
	assert.Empty(t, o.collectives)
}

func TestParseEveryFlag(t *testing.T) {
	o, err := parse(strings.Fields(`--topo leafspine -k 4 --leaves 3 --spines 2 --hosts-per-leaf 5
		--schemes ecmp,rdmacell --workloads a.txt,b.txt --loads 0.5,0.8 --seeds 3 --first-seed 7
		--duration 2ms --warmup 0.5ms --drain 5ms -j 1 --out dir --plot=false
		--paths 2 --cell-bdp 3 --qp-reset 50us --recv-lead 50us --soft-floor 2ms --soft-backoff 1
		--token-prio=false --no-dcqcn --pfc --rto 1ms --cpuprofile cpu.prof --conn flow --dcqcn-keep-target`), io.Discard)
	require.NoError(t, err)
	assert.Equal(t, sim.Config{
		Topology: sim.Topology{Kind: "leafspine", K: 4, Leaves: 3, Spines: 2, HostsPerLeaf: 5},
		Duration: 2e6, Warmup: 0.5e6, Drain: 5e6,
		Paths: 2, CellBDP: 3, QPReset: 50e3, RecvLead: 50e3, MinSoftTimeout: 2e6, SoftBackoff: 1,
		NoDCQCN: true, DCQCNKeepTarget: true, PFC: true, RTO: 1e6, Conn: "flow",
	}, o.base)
	assert.Equal(t, []string{"ecmp", "rdmacell"}, o.schemes)
	assert.Equal(t, []string{"a.txt", "b.txt"}, o.workloads)
	assert.Equal(t, []float64{0.5, 0.8}, o.loads)
	assert.Equal(t, 3, o.seeds)
	assert.Equal(t, 7, o.firstSeed)
	assert.Equal(t, 1, o.jobs)
	assert.Equal(t, "dir", o.out)
	assert.False(t, o.plot)
	assert.Equal(t, "cpu.prof", o.cpuProfile)

	o, err = parse(strings.Fields(`--collective allreduce,alltoall --placement linear,random --ranks 128
		--coll-bytes 4MiB --cell-bdp 0`), io.Discard)
	require.NoError(t, err)
	assert.Equal(t, []string{"allreduce", "alltoall"}, o.collectives)
	assert.Equal(t, []string{"linear", "random"}, o.placements)
	assert.Equal(t, 128, o.ranks)
	assert.Equal(t, int64(4<<20), o.collBytes)
	assert.Equal(t, -1.0, o.base.CellBDP, "--cell-bdp 0 is the engine's adaptive sizing")
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		args string
		want string
	}{
		{"", "--workloads or --collective is required"},
		{"--workloads a.txt --loads 0.5,x", `--loads: "x"`},
		{"--collective allreduce --coll-bytes 4MB", `--coll-bytes: "4MB": want a positive byte count`},
		{"--workloads a.txt extra", `unexpected argument "extra"`},
		{"--workloads a.txt --k eight", `invalid argument "eight" for "-k, --k" flag`},
		{"--workloads a.txt --nosuch", "unknown flag: --nosuch"},
		// The standard flag package's spelling, which cellsim took before.
		{"-k 8 -schemes ecmp --workloads a.txt", "-schemes: a long flag takes two dashes: --schemes"},
		{"--workloads a.txt -plot=false", "-plot=false: a long flag takes two dashes: --plot=false"},
	}
	for _, tt := range tests {
		t.Run(tt.args, func(t *testing.T) {
			_, err := parse(strings.Fields(tt.args), io.Discard)
			require.ErrorContains(t, err, tt.want)
		})
	}
}

func TestParseHelp(t *testing.T) {
	var out bytes.Buffer
	_, err := parse([]string{"--help"}, &out)
	require.ErrorIs(t, err, pflag.ErrHelp)
	assert.Contains(t, out.String(), "Usage: cellsim")
	assert.Contains(t, out.String(), "--schemes SCHEMES")
	assert.Contains(t, out.String(), "-k, --k K")
}

// TestBenchScriptsParse parses every cellsim command line of the scripts
// in bench/sim, so that a flag renamed or a spelling that cellsim no
// longer takes fails here rather than an hour into a sweep.
func TestBenchScriptsParse(t *testing.T) {
	scripts, err := filepath.Glob("../../bench/sim/*.sh")
	require.NoError(t, err)
	require.NotEmpty(t, scripts)
	commands := 0
	for _, script := range scripts {
		text, err := os.ReadFile(script)
		require.NoError(t, err)
		// A script with a run() function has its command there, to
		// which each call of it adds flags.
		hasRun := strings.Contains(string(text), "run() {")
		var base []string
		for line := range strings.SplitSeq(strings.ReplaceAll(string(text), "\\\n", " "), "\n") {
			words := strings.Fields(line)
			var args []string
			if i := slices.Index(words, "./cellsim"); i >= 0 {
				args = expand(t, script, words[i+1:])
				if hasRun && base == nil {
					base = args
					continue
				}
			} else if hasRun && len(words) > 2 && words[0] == "run" {
				args = append(slices.Clone(base), expand(t, script, words[2:])...)
			} else {
				continue
			}
			commands++
			t.Run(filepath.Base(script)+":"+strings.Join(args, " "), func(t *testing.T) {
				_, err := parse(args, io.Discard)
				require.NoError(t, err)
			})
		}
	}
	assert.GreaterOrEqual(t, commands, len(scripts), "a cellsim command line in each script")
}

// scriptVars are values for the shell variables the scripts of bench/sim
// pass to cellsim; a script that passes another one needs it here.
var scriptVars = map[string]string{
	"W": "workloads", "mode": "pfc", "pfc": "--pfc", "D": "dir", "c": "1.5", "s": "ecmp", "seed": "2", "f": "2ms", "out": "out",
}

var shellVar = regexp.MustCompile(`\$\{?(\w+)\}?`)

// expand does to the words of a command line what the shell does: their
// variables take the values of scriptVars ("$@" none) and quotes go.
func expand(t *testing.T, script string, words []string) []string {
	var out []string
	for _, w := range words {
		if w == `"$@"` {
			continue
		}
		w = shellVar.ReplaceAllStringFunc(w, func(v string) string {
			val, ok := scriptVars[strings.Trim(v, "${}")]
			require.True(t, ok, "%s: no value for %s in scriptVars", script, v)
			return val
		})
		out = append(out, strings.ReplaceAll(w, `"`, ""))
	}
	return out
}

// TestRunCollective runs a small collective sweep end to end, as the
// command does: the CSV has a row per scheme and the plot is written.
func TestRunCollective(t *testing.T) {
	out := t.TempDir()
	o, err := parse(strings.Fields("--collective allreduce -k 4 --ranks 4 --coll-bytes 64KiB --schemes ecmp,rdmacell -j 1 --out "+out), io.Discard)
	require.NoError(t, err)
	var progress bytes.Buffer
	start := time.Now()
	require.NoError(t, run(o, &progress))
	t.Logf("ran in %v", time.Since(start))

	csv, err := os.ReadFile(filepath.Join(out, "collective.csv"))
	require.NoError(t, err)
	rows := strings.Split(strings.TrimSpace(string(csv)), "\n")
	require.Len(t, rows, 3, "a header and a row per scheme:\n%s", csv)
	for i, scheme := range []string{"ecmp", "rdmacell"} {
		assert.True(t, strings.HasPrefix(rows[i+1], scheme+",allreduce,linear,4,65536,1,"), rows[i+1])
	}
	_, err = os.Stat(filepath.Join(out, "collective.png"))
	assert.NoError(t, err)
	assert.Contains(t, progress.String(), "2/2", "the progress of the sweep")
}
