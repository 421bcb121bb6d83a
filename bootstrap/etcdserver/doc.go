// Package etcdserver runs an embedded single-node etcd, the store that the
// ranks of a job meet in when cellrun starts them (see package bootstrap):
// on a unix socket for the ranks of one machine, or on an address the
// other nodes reach, over TLS with client certificates.
//
// It is a package of its own because etcd's server brings raft, bbolt,
// grpc's server side and OpenTelemetry with it: only the launcher and the
// tests that need a real etcd import it, so that a program that only uses
// the library (comm, collectives, bootstrap's client and stores) does not
// link any of that. It imports nothing of this module; a client reaches
// the server with bootstrap.ClientConfig{Endpoints: srv.Endpoints()}.
//
// The server is tuned for a job's rendezvous, not for durable data: it
// starts in tens of milliseconds, does not fsync, and keeps its data in a
// private temporary directory that Close removes, or that the next server
// of the same user removes after a crash.
package etcdserver
