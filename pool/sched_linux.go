package pool

import (
	"os"
	"strconv"
	"syscall"
	"unsafe"
)

// Scheduling policies, linux/sched.h.
const (
	schedOther = 0
	schedBatch = 3
)

// batchSchedule puts every thread of this process that runs under the
// default policy (SCHED_OTHER) under SCHED_BATCH, which any process may
// choose for itself (its nice value is kept): a thread that wakes then waits
// for the running one's time slice instead of preempting it. A policy the
// user chose (chrt --idle for a background run, a real-time one) is left
// as it is. Threads made later inherit the policy from the thread that
// makes them, and processes from the thread that starts them. Best effort:
// a thread that ends meanwhile, or a sandbox that refuses, changes nothing.
func batchSchedule() {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if policy, errno := threadPolicy(tid); errno != 0 || policy != schedOther {
			continue
		}
		setThreadPolicy(tid, schedBatch)
	}
}

// threadPolicy is thread tid's scheduling policy (0: the calling thread).
func threadPolicy(tid int) (int, syscall.Errno) {
	policy, _, errno := syscall.RawSyscall(syscall.SYS_SCHED_GETSCHEDULER, uintptr(tid), 0, 0)
	return int(policy), errno
}

// setThreadPolicy puts thread tid (0: the calling thread) under a policy
// that takes priority 0 (SCHED_OTHER, SCHED_BATCH, SCHED_IDLE).
func setThreadPolicy(tid, policy int) syscall.Errno {
	var param struct{ priority int32 } // sched_param
	_, _, errno := syscall.RawSyscall(syscall.SYS_SCHED_SETSCHEDULER, uintptr(tid), uintptr(policy), uintptr(unsafe.Pointer(&param)))
	return errno
}
