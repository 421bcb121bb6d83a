package comm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/bootstrap"
)

// srunEnv is what srun gives task rank of world, all on one node, plus the
// secret file and store address a test needs.
func srunEnv(rank, world int, secretFile, store string) map[string]string {
	env := map[string]string{
		"SLURM_PROCID": strconv.Itoa(rank), "SLURM_NTASKS": strconv.Itoa(world),
		"SLURM_LOCALID": strconv.Itoa(rank), "SLURM_NODEID": "0", "SLURM_NNODES": "1",
		"SLURM_JOB_ID": "77", "SLURM_STEP_ID": "3", "SLURM_STEP_NODELIST": "node[01]",
		"SLURM_STEP_TASKS_PER_NODE": strconv.Itoa(world),
		EnvSecretFile:               secretFile,
	}
	if store != "" {
		env[EnvStore] = store
	}
	return env
}

// secretFileFor makes a user key file for a test.
func secretFileFor(t *testing.T) string {
	path := filepath.Join(t.TempDir(), "secret")
	_, err := bootstrap.LoadSecretFile(path, true)
	require.NoError(t, err)
	return path
}

// Ranks started by srun take their place from Slurm, derive their secret
// from the user's key, and meet at rank 0's store on the step's first node.
func TestOptionsFromSlurm(t *testing.T) {
	key := secretFileFor(t)
	o0, err := optionsFrom(lookupIn(srunEnv(0, 4, key, "")))
	require.NoError(t, err)
	o3, err := optionsFrom(lookupIn(srunEnv(3, 4, key, "")))
	require.NoError(t, err)
	assert.Equal(t, []int{0, 4, 0, 4}, []int{o0.Rank, o0.WorldSize, o0.LocalRank, o0.LocalWorldSize})
	assert.Equal(t, []int{3, 4, 3, 4}, []int{o3.Rank, o3.WorldSize, o3.LocalRank, o3.LocalWorldSize})
	assert.Equal(t, "slurm-77.3", o0.Job)
	host, port, err := net.SplitHostPort(o0.StoreAddr)
	require.NoError(t, err)
	assert.Equal(t, "node01", host)
	assert.Equal(t, o0.StoreAddr, o3.StoreAddr)
	assert.Equal(t, ":"+port, o0.ServeStore, "rank 0 serves on every interface")
	assert.Empty(t, o3.ServeStore, "only rank 0 serves")
	require.Len(t, o0.Secret, bootstrap.SecretSize)
	assert.Equal(t, o0.Secret, o3.Secret)
	assert.Empty(t, o0.Etcd.Endpoints)
	require.NoError(t, o3.resolve())

	// Another step has another secret; RDMACELL_SECRET and RDMACELL_JOB
	// win; an existing etcd replaces rank 0's store.
	env := srunEnv(1, 4, key, "")
	env["SLURM_STEP_ID"] = "4"
	o, err := optionsFrom(lookupIn(env))
	require.NoError(t, err)
	assert.NotEqual(t, o0.Secret, o.Secret)
	env[EnvJob], env[EnvSecret] = "mine", "ab"+fmt.Sprintf("%062x", 1)
	env[EnvEtcdEndpoints] = "10.0.0.9:2379"
	o, err = optionsFrom(lookupIn(env))
	require.NoError(t, err)
	assert.Equal(t, "mine", o.Job)
	assert.Equal(t, []string{"10.0.0.9:2379"}, o.Etcd.Endpoints)
	assert.Empty(t, o.StoreAddr)
	assert.Equal(t, byte(0xab), o.Secret[0])

	// cellrun's contract wins over the srun task it runs in.
	env = srunEnv(1, 4, key, "")
	for k, v := range goodEnv() {
		env[k] = v
	}
	o, err = optionsFrom(lookupIn(env))
	require.NoError(t, err)
	assert.Equal(t, 2, o.Rank)
	assert.Equal(t, "job-1.a_b", o.Job)
	assert.Empty(t, o.StoreAddr)
}

// Open MPI and PMI launchers are recognised the same way; on one host the
// store is on loopback.
func TestOptionsFromMPI(t *testing.T) {
	key := secretFileFor(t)
	o, err := optionsFrom(lookupIn(map[string]string{
		"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_LOCAL_RANK": "0",
		"OMPI_COMM_WORLD_LOCAL_SIZE": "2", "PMIX_NAMESPACE": "861995009", EnvSecretFile: key,
	}))
	require.NoError(t, err)
	assert.Equal(t, "ompi-861995009", o.Job)
	host, port, err := net.SplitHostPort(o.StoreAddr)
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1", host)
	assert.Equal(t, "127.0.0.1:"+port, o.ServeStore)

	// Across hosts, mpirun does not say where rank 0 is.
	_, err = optionsFrom(lookupIn(map[string]string{
		"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "1",
		"OMPI_COMM_WORLD_LOCAL_SIZE": "2", "PMIX_NAMESPACE": "5", EnvSecretFile: key,
	}))
	var ee *EnvError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, EnvStore, ee.Var)
	assert.ErrorContains(t, err, "openmpi does not say where rank 0 runs")

	o, err = optionsFrom(lookupIn(map[string]string{
		"PMI_RANK": "1", "PMI_SIZE": "4", EnvStore: "head:29999", EnvJob: "j", EnvSecretFile: key,
	}))
	require.NoError(t, err)
	assert.Equal(t, []int{1, 4}, []int{o.Rank, o.WorldSize})
	assert.Equal(t, "head:29999", o.StoreAddr)
	assert.Empty(t, o.ServeStore)
}

// The secret is never on a command line nor readable by others: a key
// file others can read is refused, naming it; a bad store address too.
func TestOptionsFromSlurmErrors(t *testing.T) {
	key := secretFileFor(t)
	require.NoError(t, os.Chmod(key, 0o640))
	_, err := optionsFrom(lookupIn(srunEnv(0, 2, key, "")))
	var ee *EnvError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, EnvSecretFile, ee.Var)
	assert.ErrorContains(t, err, "mode 0640")
	require.NoError(t, os.Chmod(key, 0o600))

	for _, bad := range []string{"nohost", ":1", "h:0", "h:70000", "h:x"} {
		_, err = optionsFrom(lookupIn(srunEnv(0, 2, key, bad)))
		require.ErrorAs(t, err, &ee, bad)
		assert.Equal(t, EnvStore, ee.Var, bad)
	}
	env := srunEnv(2, 2, key, "")
	_, err = optionsFrom(lookupIn(env))
	assert.ErrorContains(t, err, `SLURM_PROCID="2": want an integer in 0..1`)

	// Explicit options: a store address needs the secret.
	_, err = Init(bounded(t), Options{Rank: 0, WorldSize: 1, Job: "j", StoreAddr: "127.0.0.1:1"})
	var oe *OptionError
	require.ErrorAs(t, err, &oe)
	assert.Equal(t, "Secret", oe.Field)
}

// Ranks started as srun starts them, each with its own environment, meet
// at the store rank 0 serves, exchange messages and close.
func TestInitFromSlurmEnvironment(t *testing.T) {
	const world = 3
	key := secretFileFor(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	store := ln.Addr().String()
	require.NoError(t, ln.Close()) // a free port, for rank 0 to listen on

	comms := initAll(t, world, func(r int) Options {
		o, err := optionsFrom(lookupIn(srunEnv(r, world, key, store)))
		require.NoError(t, err)
		o.Logger, o.LeaseTTL = quietLogger(), steadyTTL
		return o
	}, nil)
	ctx := bounded(t)
	onEach(t, comms, func(c *Comm) error {
		next, prev := (c.Rank()+1)%world, (c.Rank()+world-1)%world
		out := pattern(4096, uint64(c.Rank()))
		in := make([]byte, len(out))
		h, err := c.Isend(next, 1, out)
		if err != nil {
			return err
		}
		if _, err := c.Recv(ctx, prev, 1, in); err != nil {
			return err
		}
		if _, err := h.Wait(ctx); err != nil {
			return err
		}
		if d := firstDiff(in, pattern(4096, uint64(prev))); d >= 0 {
			return fmt.Errorf("rank %d: byte %d from rank %d differs", c.Rank(), d, prev)
		}
		return nil
	})
}

// A rank that cannot reach rank 0's store fails Init within its bound,
// naming the store; one with another key is refused at once.
func TestInitFromSlurmNoStore(t *testing.T) {
	key := secretFileFor(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	store := ln.Addr().String()
	require.NoError(t, ln.Close())
	o, err := optionsFrom(lookupIn(srunEnv(1, 2, key, store)))
	require.NoError(t, err)
	o.Logger = quietLogger()
	ctx, cancel := context.WithTimeout(bounded(t), 2*time.Second)
	defer cancel()
	_, err = Init(ctx, o)
	require.ErrorIs(t, err, bootstrap.ErrUnreachable)
	assert.ErrorContains(t, err, store)

	// Rank 0 with this key, rank 1 with another.
	o0, err := optionsFrom(lookupIn(srunEnv(0, 2, key, store)))
	require.NoError(t, err)
	o0.Logger = quietLogger()
	other := secretFileFor(t)
	o1, err := optionsFrom(lookupIn(srunEnv(1, 2, other, store)))
	require.NoError(t, err)
	o1.Logger = quietLogger()
	c0 := make(chan error, 1)
	ctx0, cancel0 := context.WithCancel(bounded(t))
	defer cancel0()
	go func() {
		c, err := Init(ctx0, o0)
		if err == nil {
			err = c.Close()
		}
		c0 <- err
	}()
	_, err = Init(bounded(t), o1)
	require.ErrorIs(t, err, bootstrap.ErrStoreAuth)
	cancel0()
	err = <-c0
	require.True(t, errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded), "%v", err)
}
