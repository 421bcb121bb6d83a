package launcher

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/bootstrap"
)

// srunTask is the environment of task rank of a step of world tasks, one
// per node, with the user's key file in home.
func srunTask(rank, world int, home string) func(string) (string, bool) {
	env := map[string]string{
		"SLURM_PROCID": strconv.Itoa(rank), "SLURM_NTASKS": strconv.Itoa(world), "SLURM_LOCALID": "0",
		"SLURM_NODEID": strconv.Itoa(rank), "SLURM_NNODES": strconv.Itoa(world), "SLURM_JOB_ID": "31",
		"SLURM_STEP_ID": "2", "SLURM_STEP_NODELIST": "gpu[1-" + strconv.Itoa(world) + "]",
		"HOME": home,
	}
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

// cellrun in a Slurm task takes the nodes, its node's rank, the job and
// the rendezvous from Slurm, and a token from the user's key: the same on
// every node, and on no command line.
func TestParseArgsUnderSlurm(t *testing.T) {
	home := t.TempDir()
	nodes := make([]Config, 3)
	for r := range nodes {
		cfg, err := ParseArgsEnv([]string{"-n", "4", "prog"}, srunTask(r, 3, home))
		require.NoError(t, err, "node %d", r)
		require.NoError(t, cfg.validate(), "node %d", r)
		nodes[r] = cfg
	}
	port := strconv.Itoa(nodes[0].nodesPort(t))
	assert.Equal(t, "0.0.0.0:"+port, nodes[0].EtcdServe)
	assert.Empty(t, nodes[0].EtcdEndpoints)
	for r, cfg := range nodes {
		assert.Equal(t, 3, cfg.Nodes)
		assert.Equal(t, r, cfg.NodeRank)
		assert.Equal(t, "slurm-31.2", cfg.Job)
		assert.Equal(t, nodes[0].JoinToken, cfg.JoinToken, "node %d derives another token", r)
		if r > 0 {
			assert.Equal(t, []string{"gpu1:" + port}, cfg.EtcdEndpoints)
			assert.Empty(t, cfg.EtcdServe)
		}
	}
	st, err := os.Stat(filepath.Join(home, ".config", "rdmacell", "secret"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())

	// Another step of the job gets another token.
	other, err := ParseArgsEnv([]string{"-n", "4", "prog"}, func(k string) (string, bool) {
		if k == "SLURM_STEP_ID" {
			return "3", true
		}
		return srunTask(0, 3, home)(k)
	})
	require.NoError(t, err)
	assert.NotEqual(t, nodes[0].JoinToken, other.JoinToken)

	// What the command line says wins.
	token := NewToken()
	cfg, err := ParseArgsEnv([]string{"--nnodes", "2", "--node-rank", "1", "--job", "mine", "--etcd", "h:1", "--join", token, "prog"},
		srunTask(0, 3, home))
	require.NoError(t, err)
	assert.Equal(t, []int{2, 1}, []int{cfg.Nodes, cfg.NodeRank})
	assert.Equal(t, "mine", cfg.Job)
	assert.Equal(t, []string{"h:1"}, cfg.EtcdEndpoints)
	assert.Equal(t, token, cfg.JoinToken)

	// One task: a single-node job with Slurm's job id, no served etcd.
	cfg, err = ParseArgsEnv([]string{"prog"}, srunTask(0, 1, home))
	require.NoError(t, err)
	assert.Equal(t, "slurm-31.2", cfg.Job)
	assert.Empty(t, cfg.EtcdServe)
	assert.Empty(t, cfg.JoinToken)

	// Outside Slurm, or without an environment, nothing changes.
	cfg, err = ParseArgsEnv([]string{"prog"}, func(string) (string, bool) { return "", false })
	require.NoError(t, err)
	plain, err := ParseArgs([]string{"prog"})
	require.NoError(t, err)
	assert.Equal(t, plain, cfg)
	assert.Equal(t, 1, cfg.Nodes)
	assert.Empty(t, cfg.Job)
}

// nodesPort is the port cellrun's etcd of a Slurm step is served on.
func (c Config) nodesPort(t *testing.T) int {
	_, port, err := net.SplitHostPort(c.EtcdServe)
	require.NoError(t, err)
	n, err := strconv.Atoi(port)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, n, bootstrap.StorePortBase)
	return n
}

// A key file others can read is refused, naming the file; a task whose
// Slurm variables do not fit is a usage error naming them.
func TestParseArgsUnderSlurmErrors(t *testing.T) {
	home := t.TempDir()
	key := filepath.Join(home, ".config", "rdmacell", "secret")
	_, err := bootstrap.LoadSecretFile(key, true)
	require.NoError(t, err)
	require.NoError(t, os.Chmod(key, 0o644))
	_, err = ParseArgsEnv([]string{"prog"}, srunTask(1, 2, home))
	var fe *FlagError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "--join", fe.Flag)
	assert.ErrorContains(t, err, key)
	assert.ErrorContains(t, err, "mode 0644")

	_, err = ParseArgsEnv([]string{"prog"}, func(k string) (string, bool) {
		if k == "SLURM_PROCID" {
			return "5", true
		}
		return srunTask(1, 2, home)(k)
	})
	require.ErrorIs(t, err, ErrUsage)
	assert.ErrorContains(t, err, `SLURM_PROCID="5"`)
}
