//go:build race

package cell_test

// raceEnabled scales the randomized test down under the race detector,
// which slows the single-threaded engine tenfold and finds nothing more
// in it per seed.
const raceEnabled = true
