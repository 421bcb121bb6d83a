// Package launcher is cellrun: it starts the ranks of an RDMACell job on one
// node, or on each node of a multi-node job, and supervises them.
//
// On each node cellrun
//
//   - serves an embedded etcd (one node, or node 0 with --etcd-serve), or
//     uses an existing cluster given with --etcd;
//   - starts --nproc-per-node ranks of PROGRAM, each in its own process
//     group and with the environment contract below;
//   - copies every line the ranks print to its own stdout or stderr (the
//     stream the rank used), prefixed with the rank, one whole line at a
//     time, and, with --log-dir, to one log file per rank;
//   - forwards SIGINT and SIGTERM to the ranks and kills them if they have
//     not exited after a grace period;
//   - when a rank fails, stops the others and exits with that rank's code
//     (128+N for a rank killed by signal N) after one line on stderr that
//     names the rank and says how it failed; or, with --max-restarts,
//     starts the whole job again as a new generation, with a rendezvous
//     and a secret of its own (restart.go), until the restarts run out.
//
// The cellrun processes of a multi-node job join the job's rendezvous as
// members of their own ("launcher") group, one per node. A node whose rank
// fails, or whose cellrun is interrupted, tells the others through etcd, so
// that every node stops its ranks and exits with the same line and code; a
// node whose cellrun dies is noticed when its lease expires (--node-timeout).
//
// # Environment contract
//
// Always set, per rank:
//
//	RDMACELL_RANK               global rank, node_rank*nproc_per_node + local rank
//	RDMACELL_WORLD_SIZE         nnodes*nproc_per_node
//	RDMACELL_LOCAL_RANK         rank on this node, 0..nproc_per_node-1
//	RDMACELL_LOCAL_WORLD_SIZE   nproc_per_node
//	RDMACELL_JOB                job id (letters, digits, '.', '_', '-')
//	RDMACELL_ETCD_ENDPOINTS     comma-separated etcd client URLs or host:port
//	RDMACELL_SECRET             the job secret, 64 hex digits (see below)
//	RDMACELL_RESTART_COUNT      the generation, 0 before any restart (--max-restarts)
//
// Set only when the corresponding flag is given (otherwise a value inherited
// from cellrun's own environment passes through unchanged):
//
//	RDMACELL_TRANSPORT            --transport: auto, shm, tcp or ibv
//	RDMACELL_PATHS                --paths: QPs per peer, a positive integer
//	RDMACELL_CELL_SIZE            --cell-size: flowcell size in bytes, 4KiB to 2GiB
//	RDMACELL_POLICY               --policy: adaptive, ecmp or spray
//	RDMACELL_DEBUG                --debug: "1", or a comma-separated list of components
//	RDMACELL_RENDEZVOUS_TIMEOUT   --rendezvous-timeout: a Go duration such as "2m0s"
//	RDMACELL_ETCD_CA              --etcd-ca: PEM file of the CA that signed etcd's certificate
//	RDMACELL_ETCD_CERT            --etcd-cert: PEM client certificate for etcd
//	RDMACELL_ETCD_KEY             --etcd-key: PEM key of that certificate
//	RDMACELL_ETCD_USER            --etcd-user: etcd user name
//	RDMACELL_ETCD_PASSWORD        --etcd-password: etcd password
//
// With several ranks per node, --transport tcp or ibv (every message over
// network cell connections) and no GOMAXPROCS in its own environment,
// cellrun also sets GOMAXPROCS to the node's processors divided among its
// ranks, at least 1 (see Config.CPUs).
//
// The etcd variables and the secret are never inherited: they belong to
// the etcd that cellrun chose for the job. With a join token (--join) and
// no --etcd-ca/--etcd-cert, the RDMACELL_ETCD_CA/CERT/KEY files are those
// cellrun derived from the token, in a private temporary directory.
//
// # Secrets
//
// The job secret authenticates the ranks' tcp connections, so it never
// enters etcd, where anyone who reads the store would find it: cellrun
// draws a fresh one per run (one node) or derives it from the join token
// every node is given (see token.go), and passes it in RDMACELL_SECRET.
// One node's embedded etcd listens on a unix socket in a private
// directory; node 0's --etcd-serve serves TLS with client certificates of
// a certificate authority derived from the token. The README's threat
// model says who can read what.
//
// # Edges
//
// Everything that can be checked before a rank starts is: the flags'
// ranges, -n against the machine's process, pids-cgroup and descriptor
// limits (limits.go), an external etcd's reachability (a bounded probe).
// What fails later fails in one line that names the rank, or the rank the
// others declared dead (blame.go).
package launcher
