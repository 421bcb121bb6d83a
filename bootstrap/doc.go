// Package bootstrap is how the ranks of an RDMACell job find each other.
//
// The ranks meet in a [Store]: a small key-value interface (leases, put,
// create-if-absent, list, one ordered watch) that etcd implements
// ([NewEtcdStore], the default, which cellrun serves) and so does a store
// inside this process ([NewLocalStore]), with which a Go test runs the
// ranks of a job as goroutines, with no server. A job started by a
// scheduler rather than cellrun (srun, mpirun: see [PlacementFromEnv])
// meets in a store that one of its ranks serves over TCP inside its own
// process ([ServeStore], [DialStore], Config.StoreAddr): a local store
// behind a mutual HMAC handshake on the job secret, so that such a job
// needs no server started beside it. A job lives under one key
// prefix named by its job id. Each rank joins the job with [Join]: it
// registers itself (rank, host, pid, endpoints, transport capabilities,
// provider info) under a lease, takes the job's shared secret (from the
// launcher, or created by whichever rank gets there first), and from then
// on follows everything that happens in the job through one ordered watch.
// On top of that it offers:
//
//   - [Job.WaitWorld]: wait until every rank has registered;
//   - [Job.Put] and [Job.Get]: per-peer connection info (QP endpoints, one key
//     per path), where Get waits until the peer has published the value;
//   - [Job.Barrier]: a named, reusable barrier;
//   - [Job.Departures]: liveness. The lease is the signal: a rank whose lease
//     ends is reported as a [*RankDeadError], one that called [Job.Close] as a
//     [*RankExitedError];
//   - [Job.Note], [Job.Notes], [Job.WaitNotes], [Job.GatherNotes]: a value per
//     rank and name that every rank sees (stall reports, Shrink's arrivals),
//     which a launcher follows with [WatchNotes] and writes with [PutNote];
//   - [Job.Decide]: the first proposal for a name stands, for every rank.
//
// Nothing on the data path needs the store: once the connection info is
// exchanged the job keeps running if etcd goes away; only failure detection
// degrades, and that is logged once.
//
// [ClientConfig] points at an etcd cluster, with TLS client certificates
// and username/password. The embedded single-node etcd that cellrun serves
// for jobs on one machine (or that node 0 of a job serves to the others)
// is package bootstrap/etcdserver, kept apart so that a program that uses
// only this package, comm or collectives does not link etcd's server.
//
// # Key layout
//
// Under the job prefix (KeyPrefix + job id + "/"):
//
//	secret                       the job secret, unless the launcher gave it (no lease)
//	member/<rank>/info           the rank's registration (its lease)
//	member/<rank>/exit           clean-exit marker: the lease id it ends (no lease)
//	barrier/<rank>/<gen>/<name>  arrival of a rank at a barrier generation (its lease)
//	p2p/<to>/<from>/<key>        a value published by rank from for rank to (its lease)
//	note/<rank>/<name>           a rank's note, -1 the launcher's (its lease; the launcher's none)
//	decision/<name>              a decision of the job (no lease)
//
// Everything a rank owns lives under its lease, so a dead rank leaves nothing
// behind but its slot; the last rank to exit cleanly deletes the whole prefix.
package bootstrap
