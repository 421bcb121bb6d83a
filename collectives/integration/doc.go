// Package integration tests the collectives over the real communicator:
// every rank is its own process, started by the launcher with the
// environment contract, rendezvousing through an embedded etcd and
// talking over the shm or tcp transport. The package holds only tests.
package integration
