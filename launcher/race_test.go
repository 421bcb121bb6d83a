//go:build race

package launcher

// raceEnabled builds the binaries under test with the race detector when
// the tests run with it, so that cellrun itself is checked too.
const raceEnabled = true
