//go:build race

package collectives

const raceEnabled = true
