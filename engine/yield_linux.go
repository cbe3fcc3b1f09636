package engine

import "syscall"

// osYield gives the CPU to another runnable thread on it, if any
// (sched_yield: no Go scheduler bookkeeping, it does not block).
func osYield() { syscall.RawSyscall(syscall.SYS_SCHED_YIELD, 0, 0, 0) }
