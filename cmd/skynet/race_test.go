//go:build race

package main

// raceEnabled: the tests that run the skynet binary skip under -race, since
// the binary they build and run is not a race build; the plain run covers them.
const raceEnabled = true
