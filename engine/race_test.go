//go:build race

package engine

// raceEnabled: the race detector's shadow memory makes RSS no measure of leaks.
const raceEnabled = true
