//go:build !race

package launcher

// raceEnabled: see race_test.go.
const raceEnabled = false
