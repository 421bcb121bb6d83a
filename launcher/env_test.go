package launcher

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestJobEnv(t *testing.T) {
	base := []string{"PATH=/bin", "RDMACELL_RANK=9", "RDMACELL_RESTART_COUNT=7", "RDMACELL_ETCD_PASSWORD=old", "RDMACELL_POLICY=ecmp", "RDMACELL_TRANSPORT=shm",
		"RDMACELL_SECRET=" + strings.Repeat("ab", 32)}
	secret := make([]byte, 32)
	secret[0] = 0xc5
	tests := []struct {
		name string
		cfg  Config
		gen  int
		want []string
	}{
		{
			name: "no knobs",
			cfg:  Config{Nodes: 1, ProcsPerNode: 2, Job: "j"},
			want: []string{"PATH=/bin", "RDMACELL_POLICY=ecmp", "RDMACELL_TRANSPORT=shm",
				"RDMACELL_WORLD_SIZE=2", "RDMACELL_LOCAL_WORLD_SIZE=2", "RDMACELL_JOB=j", "RDMACELL_RESTART_COUNT=0", "RDMACELL_ETCD_ENDPOINTS=http://a:1,http://b:2",
				"RDMACELL_SECRET=c5" + strings.Repeat("00", 31),
				"RDMACELL_RANK=5", "RDMACELL_LOCAL_RANK=1"},
		},
		{
			name: "every knob, third generation",
			cfg: Config{Nodes: 3, ProcsPerNode: 2, CPUs: 2, Job: "j", Transport: "tcp", Paths: 4, CellSize: 1 << 20,
				Policy: "spray", Debug: "1", Reproducible: true, RendezvousTimeout: 90 * time.Second,
				Timeout: NoTimeout, StallReport: 45 * time.Second, TraceDir: "/tr", MetricsPort: 9400,
				EtcdCA: "ca.pem", EtcdCert: "c.pem", EtcdKey: "k.pem", EtcdUser: "u", EtcdPassword: "p"},
			gen: 2,
			want: []string{"PATH=/bin",
				"RDMACELL_WORLD_SIZE=6", "RDMACELL_LOCAL_WORLD_SIZE=2", "RDMACELL_JOB=j.g2", "RDMACELL_RESTART_COUNT=2", "RDMACELL_ETCD_ENDPOINTS=http://a:1,http://b:2",
				"RDMACELL_SECRET=c5" + strings.Repeat("00", 31), "RDMACELL_TRANSPORT=tcp", "RDMACELL_PATHS=4", "RDMACELL_CELL_SIZE=1048576", "RDMACELL_POLICY=spray",
				"RDMACELL_DEBUG=1", "RDMACELL_REPRODUCIBLE=1", "RDMACELL_RENDEZVOUS_TIMEOUT=1m30s",
				"RDMACELL_TIMEOUT=0", "RDMACELL_STALL_REPORT=45s", "RDMACELL_TRACE_DIR=/tr/g2",
				"RDMACELL_ETCD_CA=ca.pem", "RDMACELL_ETCD_CERT=c.pem", "RDMACELL_ETCD_KEY=k.pem",
				"RDMACELL_ETCD_USER=u", "RDMACELL_ETCD_PASSWORD=p", "GOMAXPROCS=1",
				"RDMACELL_RANK=5", "RDMACELL_LOCAL_RANK=1", "RDMACELL_METRICS_ADDR=:9401"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := rankEnv(jobEnv(base, &tt.cfg, access{endpoints: []string{"http://a:1", "http://b:2"}, secret: secret}, tt.gen), 5, 1, tt.cfg.MetricsPort)
			assert.Equal(t, tt.want, env)
		})
	}
}

// Ranks that share a node's processors and talk over network cells only
// each get their share as GOMAXPROCS, at least 1; ranks that also use
// host memory, a lone rank and a user's own GOMAXPROCS keep theirs.
func TestGoMaxProcs(t *testing.T) {
	tests := []struct {
		name string
		base []string
		cfg  Config
		want int
	}{
		{"tcp on one node", nil, Config{Nodes: 1, ProcsPerNode: 2, CPUs: 8, Transport: "tcp"}, 4},
		{"ibv, more ranks than processors", nil, Config{Nodes: 1, ProcsPerNode: 16, CPUs: 2, Transport: "ibv"}, 1},
		{"several nodes, tcp", nil, Config{Nodes: 2, ProcsPerNode: 4, CPUs: 8, Transport: "tcp"}, 2},
		{"several nodes, auto", nil, Config{Nodes: 2, ProcsPerNode: 4, CPUs: 8}, 0},
		{"tcp inherited", []string{"RDMACELL_TRANSPORT=tcp"}, Config{Nodes: 1, ProcsPerNode: 2, CPUs: 8}, 4},
		{"one node, auto", nil, Config{Nodes: 1, ProcsPerNode: 4, CPUs: 8}, 0},
		{"one node, shm", nil, Config{Nodes: 1, ProcsPerNode: 4, CPUs: 8, Transport: "shm"}, 0},
		{"flag over the inherited", []string{"RDMACELL_TRANSPORT=tcp"}, Config{Nodes: 1, ProcsPerNode: 2, CPUs: 8, Transport: "shm"}, 0},
		{"one rank per node", nil, Config{Nodes: 4, ProcsPerNode: 1, CPUs: 8, Transport: "tcp"}, 0},
		{"the user's own", []string{"GOMAXPROCS=3"}, Config{Nodes: 2, ProcsPerNode: 2, CPUs: 8, Transport: "tcp"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, goMaxProcs(tt.base, &tt.cfg))
		})
	}
}

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"65536", 65536, true},
		{"64K", 64 << 10, true},
		{"64KiB", 64 << 10, true},
		{"2M", 2 << 20, true},
		{"1GiB", 1 << 30, true},
		{"512B", 512, true},
		{"0", 0, false},
		{"-1", 0, false},
		{"1.5M", 0, false},
		{"K", 0, false},
		{"12X", 0, false},
		{"9999999999G", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseSize(tt.in)
			if !tt.ok {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestExitOutcome(t *testing.T) {
	tests := []struct {
		name   string
		status syscall.WaitStatus // as wait(2) encodes it
		how    string
		code   int
		failed bool
	}{
		{"success", 0, "exited with code 0", 0, false},
		{"exit code", 3 << 8, "exited with code 3", 3, true},
		{"SIGKILL", syscall.WaitStatus(syscall.SIGKILL), "killed by signal 9 (killed)", 137, true},
		{"SIGSEGV", syscall.WaitStatus(syscall.SIGSEGV), "killed by signal 11 (segmentation fault)", 139, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			how, code, failed := exitOutcome(tt.status)
			assert.Equal(t, tt.how, how)
			assert.Equal(t, tt.code, code)
			assert.Equal(t, tt.failed, failed)
		})
	}
}
