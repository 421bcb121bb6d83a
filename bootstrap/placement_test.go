package bootstrap

import (
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseHostlist(t *testing.T) {
	for in, want := range map[string][]string{
		"node[01-03,7],gpu1":  {"node01", "node02", "node03", "node7", "gpu1"},
		"n1":                  {"n1"},
		"r[1-2]n[1-2]":        {"r1n1", "r1n2", "r2n1", "r2n2"},
		"a[8-10].example,b":   {"a8.example", "a9.example", "a10.example", "b"},
		"x[007-009]":          {"x007", "x008", "x009"},
		"host-a,host-b,c[3]d": {"host-a", "host-b", "c3d"},
	} {
		got, err := ParseHostlist(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, in := range []string{"", ",", "a,,b", "n[1-", "n1]", "n[[1]]", "n[a-b]", "n[3-1]", "n[]", "n[1-2-3]", "n[0-999999999]", "n[0-9999]m[0-9999]"} {
		_, err := ParseHostlist(in)
		assert.Error(t, err, "%q", in)
	}
}

func TestParseTasksPerNode(t *testing.T) {
	got, err := ParseTasksPerNode("2(x3),1")
	require.NoError(t, err)
	assert.Equal(t, []int{2, 2, 2, 1}, got)
	for _, in := range []string{"", "0", "2(x0)", "2(3)", "2(x3", "a", "-1"} {
		_, err := ParseTasksPerNode(in)
		assert.Error(t, err, "%q", in)
	}
}

// slurmEnv is the environment srun gives task 5 of 8, on the second of
// three nodes.
func slurmEnv() map[string]string {
	return map[string]string{
		"SLURM_PROCID": "5", "SLURM_NTASKS": "8", "SLURM_LOCALID": "1", "SLURM_NODEID": "1",
		"SLURM_NNODES": "3", "SLURM_JOB_ID": "4242", "SLURM_STEP_ID": "0",
		"SLURM_STEP_NODELIST": "node[07-08],gpu1", "SLURM_STEP_TASKS_PER_NODE": "4,2(x2)",
	}
}

func lookupMap(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

func TestPlacementFromEnv(t *testing.T) {
	p, ok, err := PlacementFromEnv(lookupMap(slurmEnv()))
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "slurm", p.Source)
	assert.Equal(t, []int{5, 8, 1, 2, 1, 3}, []int{p.Rank, p.WorldSize, p.LocalRank, p.LocalWorldSize, p.Node, p.Nodes})
	assert.Equal(t, "slurm-4242.0", p.Job)
	assert.Equal(t, "node07", p.StoreHost)
	assert.Equal(t, storePort("slurm-4242.0"), p.StorePort)
	assert.GreaterOrEqual(t, p.StorePort, StorePortBase)
	assert.Less(t, p.StorePort, StorePortBase+StorePortRange)

	// Another step of the job meets at another port.
	env := slurmEnv()
	env["SLURM_STEP_ID"] = "1"
	p1, _, err := PlacementFromEnv(lookupMap(env))
	require.NoError(t, err)
	assert.NotEqual(t, p.StorePort, p1.StorePort)

	// srun --mpi=pmi2 also sets PMI_RANK: still Slurm.
	env = slurmEnv()
	env["PMI_RANK"], env["PMI_SIZE"] = "5", "8"
	p, _, err = PlacementFromEnv(lookupMap(env))
	require.NoError(t, err)
	assert.Equal(t, "slurm", p.Source)

	// mpirun inside an allocation: the allocation's SLURM_* are not the
	// ranks'.
	env = slurmEnv()
	for k, v := range map[string]string{
		"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "3",
		"OMPI_COMM_WORLD_LOCAL_SIZE": "4", "PMIX_NAMESPACE": "prterun-host-77@1",
	} {
		env[k] = v
	}
	p, _, err = PlacementFromEnv(lookupMap(env))
	require.NoError(t, err)
	assert.Equal(t, Placement{Source: "openmpi", Rank: 3, WorldSize: 4, LocalRank: 3, LocalWorldSize: 4,
		Job: "ompi-prterun-host-77-1", StoreHost: "127.0.0.1", StorePort: storePort("ompi-prterun-host-77-1")}, p)

	// Open MPI across hosts: no address for the store.
	env["OMPI_COMM_WORLD_SIZE"] = "8"
	p, _, err = PlacementFromEnv(lookupMap(env))
	require.NoError(t, err)
	assert.Empty(t, p.StoreHost)

	// Hydra on one host, no namespace: the job is named by the parent.
	p, ok, err = PlacementFromEnv(lookupMap(map[string]string{
		"PMI_RANK": "1", "PMI_SIZE": "2", "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "2",
	}))
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "pmi", p.Source)
	assert.Equal(t, "pmi-ppid"+strconv.Itoa(os.Getppid()), p.Job)
	assert.Equal(t, "127.0.0.1", p.StoreHost)

	// What sbatch gives its script: no step.
	env = slurmEnv()
	delete(env, "SLURM_STEP_ID")
	delete(env, "SLURM_STEP_NODELIST")
	delete(env, "SLURM_STEP_TASKS_PER_NODE")
	_, ok, err = PlacementFromEnv(lookupMap(env))
	require.NoError(t, err)
	assert.False(t, ok, "an sbatch script, not a step: no placement")
}

// Values that do not fit are errors naming the variables.
func TestPlacementFromEnvErrors(t *testing.T) {
	for name, c := range map[string]struct {
		set  map[string]string
		want string
	}{
		"rank beyond":    {map[string]string{"SLURM_PROCID": "8"}, `SLURM_PROCID="8": want an integer in 0..7`},
		"no tasks":       {map[string]string{"SLURM_NTASKS": ""}, "SLURM_NTASKS is not set"},
		"node beyond":    {map[string]string{"SLURM_NODEID": "3"}, `SLURM_NODEID="3"`},
		"nodelist":       {map[string]string{"SLURM_STEP_NODELIST": "node[1-"}, "SLURM_STEP_NODELIST"},
		"nodelist count": {map[string]string{"SLURM_STEP_NODELIST": "node1"}, "names 1 nodes, SLURM_NNODES 3"},
		"job id":         {map[string]string{"SLURM_JOB_ID": "x/y"}, `SLURM_JOB_ID="x/y"`},
		"tasks per node": {map[string]string{"SLURM_STEP_TASKS_PER_NODE": "4"}, "names 1 nodes"},
		"local beyond":   {map[string]string{"SLURM_LOCALID": "2"}, "SLURM_LOCALID 2"},
	} {
		env := slurmEnv()
		for k, v := range c.set {
			env[k] = v
		}
		_, ok, err := PlacementFromEnv(lookupMap(env))
		assert.True(t, ok, name)
		assert.ErrorContains(t, err, c.want, name)
		assert.ErrorContains(t, err, "started by slurm", name)
	}
	_, _, err := PlacementFromEnv(lookupMap(map[string]string{"OMPI_COMM_WORLD_RANK": "4", "OMPI_COMM_WORLD_SIZE": "4"}))
	assert.ErrorContains(t, err, `OMPI_COMM_WORLD_RANK="4": want an integer in 0..3`)
}

func TestSecretFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "conf", "rdmacell")
	path := filepath.Join(dir, "secret")
	_, err := LoadSecretFile(path, false)
	require.ErrorIs(t, err, os.ErrNotExist)

	// Racing creators all read the one key that won.
	keys := make([][]byte, 8)
	var wg sync.WaitGroup
	for i := range keys {
		wg.Go(func() {
			k, err := LoadSecretFile(path, true)
			assert.NoError(t, err)
			keys[i] = k
		})
	}
	wg.Wait()
	for _, k := range keys {
		assert.Equal(t, keys[0], k)
	}
	require.Len(t, keys[0], SecretSize)
	st, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	st, err = os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), st.Mode().Perm())
	left, err := filepath.Glob(filepath.Join(dir, ".secret-*"))
	require.NoError(t, err)
	assert.Empty(t, left, "temporary files left behind")

	require.NoError(t, os.Chmod(path, 0o644))
	_, err = LoadSecretFile(path, true)
	assert.ErrorContains(t, err, "has mode 0644: others can read it")
	require.NoError(t, os.Chmod(path, 0o600))
	require.NoError(t, os.WriteFile(path, []byte("not hex\n"), 0o600))
	_, err = LoadSecretFile(path, false)
	assert.ErrorContains(t, err, "want 64 hexadecimal digits")
	_, err = LoadSecretFile(dir, false)
	assert.ErrorContains(t, err, "want a regular file")

	a, err := DeriveJobSecret(keys[0], "slurm-1.0")
	require.NoError(t, err)
	b, err := DeriveJobSecret(keys[0], "slurm-1.1")
	require.NoError(t, err)
	again, err := DeriveJobSecret(keys[0], "slurm-1.0")
	require.NoError(t, err)
	assert.Len(t, a, SecretSize)
	assert.Equal(t, a, again)
	assert.NotEqual(t, a, b)
	assert.NotEqual(t, keys[0], a)
}
