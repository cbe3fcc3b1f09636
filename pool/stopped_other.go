//go:build !linux

package pool

// stopped cannot tell a stopped process here; silentLimit still finds it.
func stopped(pid int) bool { return false }
