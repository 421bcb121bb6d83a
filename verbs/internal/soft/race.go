//go:build race

package soft

import "sync/atomic"

// raceSeq orders, for the race detector, what a provider does on behalf
// of posts with the posts themselves.
var raceSeq atomic.Uint64

// RaceSync is a synchronisation point the race detector sees, in builds
// with -race only. A peer writes into memory that a program registered
// from its own heap (verbs.Adopt) because of a post of this process (a
// grant written to the peer, say), but the path from that post to the
// provider goroutine that writes the bytes runs through the network,
// which the detector cannot follow: it would report the program's use of
// the memory before the post and the provider's write after it as a
// race. Providers call RaceSync when a post begins and before they write
// a peer's bytes into registered memory; the calls are totally ordered,
// and the detector then sees the post happen before the write.
func RaceSync() { raceSeq.Add(1) }
