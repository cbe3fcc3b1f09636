package pool

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"testing"

	"github.com/skynetml/skynet/engine"
	"github.com/stretchr/testify/require"
)

const schedIdle = 5 // SCHED_IDLE, linux/sched.h: what chrt --idle sets

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
		policy, errno := threadPolicy(tid)
		if errno == syscall.ESRCH {
			continue // the thread ended
		}
		require.Zero(t, errno)
		require.Equal(t, schedBatch, policy, "thread %d of this process", tid)
	}
}

// A policy the user chose is left alone: a run started under chrt --idle
// (a background job) stays idle, its workers too.
func TestBatchScheduleKeepsChosenPolicy(t *testing.T) {
	metric := writeFile(t, t.TempDir(), "metric.py", `
import os

def score(input, output, expected=None):
    return float(os.sched_getscheduler(0)), {"feedback": "policy"}
`)
	// The pool starts from a locked thread set idle, as a parent run under
	// chrt --idle would be; the thread ends with the goroutine, and its
	// policy with it.
	type outcome struct {
		self   int
		worker engine.Result
	}
	done := make(chan outcome, 1)
	go func() {
		runtime.LockOSThread()
		if errno := setThreadPolicy(0, schedIdle); errno != 0 {
			t.Errorf("chrt --idle: %v", errno)
			done <- outcome{}
			return
		}
		p, err := Open(Options{Options: engine.Options{Metric: metric}, Processes: 1, Batch: true})
		if err != nil {
			t.Errorf("Open: %v", err)
			done <- outcome{}
			return
		}
		defer p.Close()
		self, _ := threadPolicy(0)
		done <- outcome{self, p.Score(context.Background(), engine.Case{ID: "a", Input: map[string]any{}, Output: ""})}
	}()
	o := <-done
	require.Equal(t, schedIdle, o.self, "Open changed the idle thread")
	require.Nil(t, o.worker.Err)
	require.Equal(t, float64(schedIdle), o.worker.Score, "the worker's main thread")
}
