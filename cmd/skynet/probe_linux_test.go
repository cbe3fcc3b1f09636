package main

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCoreRoundTrip(t *testing.T) {
	cpus, err := allowedCPUs()
	if runtime.GOOS != "linux" || err != nil || len(cpus) < 2 || runtime.GOMAXPROCS(0) < 2 {
		_, ok := coreRoundTrip()
		require.False(t, ok, "no two CPUs to measure on")
		t.Skip("needs two CPUs")
	}
	rt, ok := coreRoundTrip()
	require.True(t, ok)
	// A cache line's round trip between two cores takes tens of ns on
	// bare metal and well under 100 µs anywhere (a descheduled vCPU).
	require.Greater(t, rt.Nanoseconds(), int64(10))
	require.Less(t, rt.Microseconds(), int64(100))
}
