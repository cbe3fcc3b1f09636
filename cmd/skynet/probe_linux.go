package main

import (
	"runtime"
	"slices"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// coreRoundTrip measures how long a cache line takes to travel from one
// CPU to another and back: two threads, each pinned to one of the first two
// CPUs the process may use, take turns flipping a shared word. It is the
// cost the engine pays at every hand-off between the thread that reads
// cases and the thread that runs Python, and on a VM it moves with where
// the host puts the vCPUs (110 ns to 580 ns on the 2-vCPU machine the
// README's figures come from, minute to minute). ok is false with fewer
// than two CPUs (or Ps) to measure on.
func coreRoundTrip() (rt time.Duration, ok bool) {
	cpus, err := allowedCPUs()
	if err != nil || len(cpus) < 2 || runtime.GOMAXPROCS(0) < 2 {
		return 0, false
	}
	const spansOf, rounds = 11, 2000
	var line struct {
		_    [64]byte
		turn atomic.Int32 // 0: the first thread's turn, 1: the second's; -1: stop
		_    [64]byte
	}
	ready := make(chan bool)
	done := make(chan struct{})
	go func() { // never unlocks: the pinned thread exits with the goroutine
		runtime.LockOSThread()
		ready <- pin(cpus[1]) == nil
		for {
			switch line.turn.Load() {
			case 1:
				line.turn.Store(0)
			case -1:
				close(done)
				return
			}
		}
	}()
	if !<-ready {
		line.turn.Store(-1)
		<-done
		return 0, false
	}
	result := make(chan time.Duration)
	go func() {
		runtime.LockOSThread()
		if pin(cpus[0]) != nil {
			result <- 0
			return
		}
		// The median of several short spans: a span that the other
		// vCPU's waking up or another thread's burst lands in is left out.
		spans := make([]time.Duration, spansOf)
		for k := range spans {
			start := time.Now()
			for i := 0; i < rounds; i++ {
				line.turn.Store(1)
				for line.turn.Load() != 0 {
				}
			}
			spans[k] = time.Since(start) / rounds
		}
		slices.Sort(spans)
		result <- spans[len(spans)/2]
	}()
	rt = <-result
	line.turn.Store(-1)
	<-done
	return rt, rt > 0
}

// allowedCPUs lists the CPUs this process may run on, in order.
func allowedCPUs() ([]int, error) {
	var mask [1024 / 64]uint64
	if _, _, errno := syscall.RawSyscall(syscall.SYS_SCHED_GETAFFINITY, 0, unsafe.Sizeof(mask), uintptr(unsafe.Pointer(&mask))); errno != 0 {
		return nil, errno
	}
	var cpus []int
	for i := range len(mask) * 64 {
		if mask[i/64]&(1<<(i%64)) != 0 {
			cpus = append(cpus, i)
		}
	}
	return cpus, nil
}

// pin keeps the calling thread on one CPU.
func pin(cpu int) error {
	var mask [1024 / 64]uint64
	mask[cpu/64] = 1 << (cpu % 64)
	if _, _, errno := syscall.RawSyscall(syscall.SYS_SCHED_SETAFFINITY, 0, unsafe.Sizeof(mask), uintptr(unsafe.Pointer(&mask))); errno != 0 {
		return errno
	}
	return nil
}
