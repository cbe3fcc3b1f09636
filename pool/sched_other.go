//go:build !linux

package pool

// batchSchedule is Linux's alone; elsewhere the scheduler stays as it is.
func batchSchedule() {}
