//go:build !race

package cell_test

const raceEnabled = false
