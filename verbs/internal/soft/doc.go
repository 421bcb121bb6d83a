// Package soft holds the pieces of an RNIC that the software providers
// (shm and tcp) emulate the same way: completion queues, the table of
// registered regions with its access checks, and receive queues.
package soft
