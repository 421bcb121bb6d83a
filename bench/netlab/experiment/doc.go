// Package experiment runs RDMACell jobs on a netlab fabric and measures
// them: cellrun on every lab host, one node per host, etcd served by host
// 0 over the fabric, faults injected while the collectives run.
package experiment
