package pool

import (
	"context"
	"os"
	"strconv"
	"syscall"
	"testing"

	"github.com/skynetml/skynet/engine"
	"github.com/stretchr/testify/require"
)

// With Options.Batch, the workers' threads, the metric's own and this
// process's run under SCHED_BATCH.
func TestBatchSchedule(t *testing.T) {
	metric := writeFile(t, t.TempDir(), "metric.py", `
import os, threading

def score(input, output, expected=None):
    seen = []
    t = threading.Thread(target=lambda: seen.append(os.sched_getscheduler(0)))
    t.start()
    t.join()
    main = os.sched_getscheduler(0)
    return float(main == seen[0] == os.SCHED_BATCH), {"feedback": f"main thread {main}, a thread of the metric's {seen[0]}"}
`)
	p := openPool(t, Options{Options: engine.Options{Metric: metric}, Processes: 1, Batch: true})
	r := p.Score(context.Background(), engine.Case{ID: "a", Input: map[string]any{}, Output: ""})
	require.Nil(t, r.Err)
	require.Equal(t, 1.0, r.Score, r.Feedback)

	tasks, err := os.ReadDir("/proc/self/task")
	require.NoError(t, err)
	for _, task := range tasks {
		tid, err := strconv.Atoi(task.Name())
		require.NoError(t, err)
		policy, _, errno := syscall.RawSyscall(syscall.SYS_SCHED_GETSCHEDULER, uintptr(tid), 0, 0)
		if errno == syscall.ESRCH {
			continue // the thread ended
		}
		require.Zero(t, errno)
		require.Equal(t, uintptr(schedBatch), policy, "thread %d of this process", tid)
	}
}
