//go:build !linux

package main

import "time"

// coreRoundTrip is measured on Linux only (it pins threads to CPUs).
func coreRoundTrip() (time.Duration, bool) { return 0, false }
