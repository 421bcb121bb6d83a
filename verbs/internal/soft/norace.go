//go:build !race

package soft

// RaceSync does nothing without the race detector (see race.go).
func RaceSync() {}
