package pool

import (
	"os"
	"strconv"
	"syscall"
	"unsafe"
)

const schedBatch = 3 // SCHED_BATCH, linux/sched.h

// batchSchedule puts every thread of this process under SCHED_BATCH, which
// any process may choose for itself (its priority is unchanged): a thread
// that wakes then waits for the running one's time slice instead of
// preempting it. Threads made later inherit it from the thread that makes
// them, and processes from the thread that starts them. Best effort: a
// thread that ends meanwhile, or a sandbox that refuses, changes nothing.
func batchSchedule() {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return
	}
	var param struct{ priority int32 } // sched_param: 0 for SCHED_BATCH
	for _, t := range tasks {
		if tid, err := strconv.Atoi(t.Name()); err == nil {
			syscall.RawSyscall(syscall.SYS_SCHED_SETSCHEDULER, uintptr(tid), schedBatch, uintptr(unsafe.Pointer(&param)))
		}
	}
}
