package launcher

import (
	"crypto/hkdf"
	"crypto/sha256"
	"fmt"
	"net"
	"path/filepath"
	"strconv"

	"github.com/rdmacell/rdmacell/bootstrap"
)

// cellrun under srun, torchrun's pattern: srun starts one cellrun per node
// (srun --ntasks-per-node 1 cellrun -n 4 ./train), and each takes from its
// Slurm task what it was not told on the command line:
//
//   - --nnodes and --node-rank: the step's task count and this task's
//     number (SLURM_NTASKS, SLURM_PROCID), so one cellrun per task, which
//     is one per node with --ntasks-per-node 1;
//   - --job: slurm-<job id>.<step id>, the same in every task of the step;
//   - with more than one node and neither --etcd nor --etcd-serve: node 0
//     serves the embedded etcd on every interface, and the others reach it
//     at the step's first node (SLURM_STEP_NODELIST), on a port made from
//     the job id (bootstrap.Placement.StorePort);
//   - without --join: a join token derived from the user's key file
//     (RDMACELL_SECRET_FILE, default ~/.config/rdmacell/secret, made on
//     first use with mode 0600), so that nothing secret is on a command
//     line and every node that sees the file derives the same token.
//
// Environment of cellrun itself for that.
const (
	// EnvSecretFile names the user's key file (as the communicator reads it).
	EnvSecretFile = "RDMACELL_SECRET_FILE"
)

// fromSlurm fills in what the Slurm task cellrun runs in says and the
// command line did not (changed reports the flags given).
func (c *Config) fromSlurm(changed func(string) bool, lookup func(string) (string, bool)) error {
	p, ok, err := bootstrap.PlacementFromEnv(lookup)
	if err != nil {
		return usageError{err}
	}
	if !ok || p.Source != "slurm" {
		return nil
	}
	if !changed("nnodes") {
		c.Nodes = p.WorldSize
	}
	if !changed("node-rank") {
		c.NodeRank = p.Rank
	}
	if !changed("job") {
		c.Job = p.Job
	}
	if c.Nodes == 1 || len(c.EtcdEndpoints) > 0 || c.EtcdServe != "" {
		// One node, or told where etcd is.
		return nil
	}
	if p.StoreHost == "" {
		return &FlagError{Flag: "--etcd", Value: "",
			Want: "node 0's address: SLURM_STEP_NODELIST is not set, so give --etcd-serve on node 0 and --etcd to the others"}
	}
	if c.RdzvEndpoint == "" {
		c.RdzvEndpoint = net.JoinHostPort(p.StoreHost, strconv.Itoa(p.StorePort))
	}
	if c.JoinToken != "" {
		return nil
	}
	path := ""
	if v, ok := lookup(EnvSecretFile); ok && v != "" {
		path = v
	} else if home, ok := lookup("HOME"); ok && home != "" {
		// As os.UserConfigDir, but through lookup.
		base := filepath.Join(home, ".config")
		if x, ok := lookup("XDG_CONFIG_HOME"); ok && filepath.IsAbs(x) {
			base = x
		}
		path = filepath.Join(base, "rdmacell", "secret")
	} else {
		return &FlagError{Flag: "--join", Value: "", Want: "the job's token, or " + EnvSecretFile + " (HOME is not set)"}
	}
	key, err := bootstrap.LoadSecretFile(path, true)
	if err != nil {
		return &FlagError{Flag: "--join", Value: "", Want: "the job's token, or a key file readable by its owner only: " + err.Error()}
	}
	t, err := tokenFromKey(key, c.Job)
	if err != nil {
		return usageError{err}
	}
	c.JoinToken = t.String()
	return nil
}

// tokenFromKey derives the join token of job from a user's key.
func tokenFromKey(key []byte, job string) (jobToken, error) {
	var t jobToken
	b, err := hkdf.Key(sha256.New, key, nil, "rdmacell cellrun join token v1 "+job, tokenSize)
	if err != nil {
		return t, fmt.Errorf("join token of job %q: %w", job, err)
	}
	copy(t[:], b)
	return t, nil
}
