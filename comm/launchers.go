package comm

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"github.com/rdmacell/rdmacell/bootstrap"
)

// Ranks started without cellrun, by srun, mpirun or another PMI launcher,
// find their place in the job in the launcher's own variables (see
// bootstrap.PlacementFromEnv), and meet in a store that rank 0 serves
// inside its own process: with Slurm at the first node of the step, with
// mpirun on one host at 127.0.0.1, on a port made from the launcher's job
// id. These variables change that:
const (
	// EnvStore is the host:port of rank 0's store, for launchers that do
	// not say where rank 0 runs (mpirun across hosts) or when the port
	// made from the job id is taken. Rank 0 listens on its port.
	EnvStore = "RDMACELL_STORE"
	// EnvSecretFile names the file holding the user's key, from which
	// each job's secret is derived when RDMACELL_SECRET is not set
	// (default: rdmacell/secret in the user's configuration directory,
	// ~/.config/rdmacell/secret). It is made on first use; it must be
	// readable by its owner only.
	EnvSecretFile = "RDMACELL_SECRET_FILE"
)

// placement fills o from what the launcher that started the rank says.
// RDMACELL_JOB, RDMACELL_ETCD_ENDPOINTS (an existing etcd instead of rank
// 0's store) and RDMACELL_STORE override it.
func (r *envReader) placement(o *Options, p bootstrap.Placement) {
	o.Rank, o.WorldSize = p.Rank, p.WorldSize
	o.LocalRank, o.LocalWorldSize = p.LocalRank, p.LocalWorldSize

	o.Job = p.Job
	if v := r.get(EnvJob); v != "" {
		o.Job = v
	}
	switch {
	case o.Job == "":
		r.fail(EnvJob, "", fmt.Sprintf("the job id, the same for every rank: %s gives none to tell this job from another", p.Source), true)
	case !jobPattern.MatchString(o.Job):
		r.fail(EnvJob, o.Job, "the job id: letters, digits, '.', '_' or '-'", false)
	}

	if v := r.get(EnvEtcdEndpoints); v != "" {
		eps, err := bootstrap.ParseEndpoints(v)
		if err != nil {
			r.fail(EnvEtcdEndpoints, v, "etcd endpoints, host:port[,host:port...]", false)
		}
		o.Etcd.Endpoints = eps
		r.etcdSecurity(o)
		return
	}
	addr := r.get(EnvStore)
	if addr == "" {
		if p.StoreHost == "" || p.StorePort == 0 {
			r.fail(EnvStore, "", fmt.Sprintf("host:port of the store rank 0 serves, reachable by every rank: %s does not say where rank 0 runs", p.Source), true)
			return
		}
		addr = net.JoinHostPort(p.StoreHost, strconv.Itoa(p.StorePort))
	}
	host, port, err := net.SplitHostPort(addr)
	if n, perr := strconv.Atoi(port); err != nil || perr != nil || n < 1 || n > 65535 || host == "" {
		r.fail(EnvStore, addr, "host:port of the store rank 0 serves, such as node01:29400", false)
		return
	}
	o.StoreAddr = addr
	if o.Rank == 0 {
		// Every interface, unless the store is on loopback only.
		listen := ""
		if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
			listen = host
		}
		o.ServeStore = net.JoinHostPort(listen, port)
	}
}

// secretFile derives the job secret from the user's key file, for ranks
// that no launcher of ours handed a secret.
func (r *envReader) secretFile(o *Options) {
	path := r.get(EnvSecretFile)
	if path == "" {
		dir, err := os.UserConfigDir()
		if err != nil {
			r.fail(EnvSecretFile, "", "the file of the key job secrets are derived from: there is no configuration directory ("+err.Error()+")", true)
			return
		}
		path = filepath.Join(dir, "rdmacell", "secret")
	}
	key, err := bootstrap.LoadSecretFile(path, true)
	if err != nil {
		r.fail(EnvSecretFile, path, "a file of 64 hexadecimal digits readable by its owner only (or set "+EnvSecret+"): "+err.Error(), false)
		return
	}
	secret, err := bootstrap.DeriveJobSecret(key, o.Job)
	if err != nil {
		r.fail(EnvSecretFile, path, err.Error(), false)
		return
	}
	o.Secret = secret
}
