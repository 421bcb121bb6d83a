package launcher

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBadFlags runs cellrun with command lines it must refuse: exit code 2
// and a message naming the flag (and its value).
func TestBadFlags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no ranks", []string{"-n", "0", "prog"}, `-n/--nproc-per-node "0": want at least 1`},
		{"not a number", []string{"-n", "four", "prog"}, `invalid argument "four" for "-n, --nproc-per-node" flag`},
		{"unknown flag", []string{"--ranks", "4", "prog"}, `unknown flag: --ranks`},
		{"no program", []string{"-n", "4"}, `missing PROGRAM`},
		{"unknown transport", []string{"--transport", "udp", "prog"}, `--transport "udp": want auto, shm, tcp or ibv`},
		{"unknown policy", []string{"--policy", "random", "prog"}, `--policy "random": want adaptive, ecmp or spray`},
		{"no paths", []string{"--paths", "0", "prog"}, `--paths "0": want 1 to 64 paths per peer`},
		{"bad cell size", []string{"--cell-size", "12X", "prog"}, `--cell-size "12X": want a positive number of bytes`},
		{"tiny cell size", []string{"--cell-size", "1", "prog"}, `--cell-size "1": want 4KiB to 2GiB`},
		{"huge cell size", []string{"--cell-size", "3GiB", "prog"}, `--cell-size "3221225472": want 4KiB to 2GiB`},
		{"too many paths", []string{"--paths", "65", "prog"}, `--paths "65": want 1 to 64 paths per peer`},
		{"short node timeout", []string{"--node-timeout", "500ms", "prog"}, `--node-timeout "500ms": want 1s to 1h0m0s`},
		{"long grace", []string{"--grace", "48h", "prog"}, `--grace "48h0m0s": want a positive duration of at most 24h0m0s`},
		{"too many nodes", []string{"--nnodes", "5000", "prog"}, `--nnodes "5000": want at most 4096 nodes`},
		{"zero cell size", []string{"--cell-size", "0", "prog"}, `--cell-size "0": want a positive number of bytes`},
		{"bad debug", []string{"--debug=Cell!", "prog"}, `--debug "Cell!": want 1, or a comma-separated list`},
		{"negative timeout", []string{"--rendezvous-timeout", "-1s", "prog"}, `--rendezvous-timeout "-1s": want a positive duration`},
		{"zero grace", []string{"--grace", "0s", "prog"}, `--grace "0s": want a positive duration`},
		{"bad rendezvous endpoint", []string{"--rdzv-endpoint", "nohost", "prog"}, `--rdzv-endpoint "nohost": want node 0's host:port`},
		{"rendezvous endpoint without token", []string{"--nnodes", "2", "--job", "j", "--rdzv-endpoint", "n0:29400", "prog"}, `--join "": --rdzv-endpoint needs the job's token`},
		{"rendezvous endpoint and etcd", []string{"--rdzv-endpoint", "n0:29400", "--etcd", "n0:2379", "prog"}, `--rdzv-endpoint "n0:29400": replaces --etcd and --etcd-serve`},
		{"bad job id", []string{"--job", "a/b", "prog"}, `--job "a/b": want letters, digits`},
		{"no job on two nodes", []string{"--nnodes", "2", "--etcd", "h:2379", "prog"}, `--job "": a job of --nnodes 2 needs the same --job id on every node`},
		{"node 1 without etcd", []string{"--nnodes", "2", "--node-rank", "1", "--job", "j", "prog"}, `--etcd "": node 1 of --nnodes 2 needs --etcd host:port`},
		{"node 0 without etcd", []string{"--nnodes", "2", "--job", "j", "prog"}, `--etcd "": a job of --nnodes 2 needs --etcd host:port, or --etcd-serve ADDR on node 0`},
		{"node rank too large", []string{"--nnodes", "2", "--node-rank", "2", "--job", "j", "--etcd", "h:1", "prog"}, `--node-rank "2": want 0 <= node rank < --nnodes 2`},
		{"no nodes", []string{"--nnodes", "0", "prog"}, `--nnodes "0": want at least 1 node`},
		{"serve on node 1", []string{"--nnodes", "2", "--node-rank", "1", "--job", "j", "--etcd-serve", "0.0.0.0:2379", "prog"}, `--etcd-serve "0.0.0.0:2379": only node 0 serves etcd`},
		{"serve and use", []string{"--etcd-serve", "127.0.0.1:2379", "--etcd", "h:2379", "prog"}, `--etcd-serve "127.0.0.1:2379": serve an embedded etcd or use --etcd h:2379, not both`},
		{"bad endpoint", []string{"--etcd", "no-port", "prog"}, `--etcd "no-port": want host:port`},
		{"empty endpoints", []string{"--etcd", ",", "prog"}, `--etcd ",": want host:port`},
		{"credentials without cluster", []string{"--etcd-user", "u", "prog"}, `--etcd-user "u": only applies to an external cluster given with --etcd`},
		{"password hidden", []string{"--etcd-password", "secret", "prog"}, `--etcd-password "***": only applies`},
		{"negative restarts", []string{"--max-restarts", "-1", "prog"}, `--max-restarts "-1": want 0 to 1000 restarts`},
		{"too many restarts", []string{"--max-restarts", "1001", "prog"}, `--max-restarts "1001": want 0 to 1000 restarts`},
		{"negative restart delay", []string{"--restart-delay", "-1s", "prog"}, `--restart-delay "-1s": want 0 or a positive duration`},
		{"cert without key", []string{"--etcd", "h:1", "--etcd-cert", "c.pem", "prog"}, `--etcd-cert/--etcd-key "c.pem/": give both or neither`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, code := runCellrun(t, tt.args...)
			assert.Equal(t, ExitUsage, code)
			stderr := strings.Join(p.stderr.all(), "\n")
			assert.Contains(t, stderr, "cellrun: "+tt.want)
			assert.NotContains(t, stderr, "secret", "a password is never echoed")
			assert.Empty(t, p.stdout.all())
		})
	}
}

// TestHelp lists every flag with its explanation, on stdout, exit code 0.
func TestHelp(t *testing.T) {
	t.Parallel()
	p, code := runCellrun(t, "--help")
	require.Equal(t, 0, code)
	help := strings.Join(p.stdout.all(), "\n")
	var cfg Config
	fs := newFlagSet(&cfg, &flagValues{})
	n := 0
	fs.VisitAll(func(f *pflag.Flag) {
		n++
		assert.Regexp(t, `(?m)^ +(-\w, )?--`+f.Name+`\b.*\S{3,}`, help, "flag --%s is listed with an explanation", f.Name)
	})
	assert.Equal(t, 33, n, "flags of cellrun")
	assert.Contains(t, help, "Usage: cellrun [flags] PROGRAM [ARGS...]")
	assert.Empty(t, p.stderr.all())
}

// TestParseArgs checks what the flags turn into, including that
// everything after PROGRAM is the program's.
func TestParseArgs(t *testing.T) {
	cfg, err := ParseArgs([]string{"-n", "3", "--nnodes", "2", "--node-rank", "1", "--job", "j", "--etcd", "a:1, b:2",
		"--cell-size", "1MiB", "--debug", "--no-prefix", "--reproducible", "./train", "-n", "5", "--lr=0.1"})
	require.NoError(t, err)
	assert.Equal(t, 3, cfg.ProcsPerNode)
	assert.Equal(t, 2, cfg.Nodes)
	assert.Equal(t, 1, cfg.NodeRank)
	assert.Equal(t, []string{"a:1", "b:2"}, cfg.EtcdEndpoints)
	assert.Equal(t, int64(1<<20), cfg.CellSize)
	assert.Equal(t, "1", cfg.Debug, "--debug alone")
	assert.True(t, cfg.NoPrefix)
	assert.True(t, cfg.Reproducible)
	assert.Equal(t, "./train", cfg.Program)
	assert.Equal(t, []string{"-n", "5", "--lr=0.1"}, cfg.Args)
	assert.Equal(t, DefaultGrace, cfg.Grace)
	assert.Zero(t, cfg.MaxRestarts, "no restarts unless asked")

	cfg, err = ParseArgs([]string{"--max-restarts", "3", "--restart-delay", "2s", "./train"})
	require.NoError(t, err)
	assert.Equal(t, 3, cfg.MaxRestarts)
	assert.Equal(t, 2*time.Second, cfg.RestartDelay)

	tokenFile := filepath.Join(t.TempDir(), "token")
	token := NewToken()
	require.NoError(t, os.WriteFile(tokenFile, []byte(token+"\n"), 0o600))
	cfg, err = ParseArgs([]string{"--join", "@" + tokenFile, "./train"})
	require.NoError(t, err)
	assert.Equal(t, token, cfg.JoinToken, "--join @FILE")
	_, err = ParseArgs([]string{"--join", "@" + tokenFile + ".missing", "./train"})
	assert.ErrorIs(t, err, ErrUsage)

	cfg, err = ParseArgs([]string{"--timeout", "0", "--stall-report", "30s", "--trace-dir", "tr", "--metrics-port", "9400", "-n", "2", "./train"})
	require.NoError(t, err)
	assert.Equal(t, NoTimeout, cfg.Timeout, "--timeout 0 turns the watchdog off")
	assert.Equal(t, 30*time.Second, cfg.StallReport)
	assert.Equal(t, "tr", cfg.TraceDir)
	assert.Equal(t, 9400, cfg.MetricsPort)
	cfg, err = ParseArgs([]string{"./train"})
	require.NoError(t, err)
	assert.Zero(t, cfg.Timeout, "the ranks' default")
	for _, args := range [][]string{{"--timeout", "-1s"}, {"--stall-report", "-3m"}, {"--metrics-port", "65535", "-n", "2"}, {"--metrics-port", "0"}} {
		_, err = ParseArgs(append(args, "./train"))
		assert.ErrorIs(t, err, ErrUsage, "%v", args)
	}

	_, err = ParseArgs([]string{"-h"})
	assert.ErrorIs(t, err, ErrHelp)
	_, err = ParseArgs([]string{"--paths", "x", "prog"})
	assert.ErrorIs(t, err, ErrUsage)
}

// TestJoinTokenFlag refuses a malformed token without echoing it, and a
// token where no etcd is shared.
func TestJoinTokenFlag(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--etcd", "h:1", "--join", "rdmacell1.short-secret", "prog"}, `--join "***": want "rdmacell1." and 43 base64url characters`},
		{[]string{"--etcd", "h:1", "--join", "secret-guess", "prog"}, `--join "***": want a token printed by cellrun`},
		{[]string{"--join", NewToken(), "prog"}, `--join "***": joins a job whose etcd is given with --etcd or served with --etcd-serve`},
		{[]string{"--nnodes", "2", "--node-rank", "1", "--job", "j", "--etcd", "h:1", "prog"}, `--join "": node 1 of --nnodes 2 needs the job's token`},
	} {
		p, code := runCellrun(t, tt.args...)
		assert.Equal(t, ExitUsage, code)
		stderr := strings.Join(p.stderr.all(), "\n")
		assert.Contains(t, stderr, "cellrun: "+tt.want)
		assert.NotContains(t, stderr, "secret", "a token is never echoed")
	}
}
