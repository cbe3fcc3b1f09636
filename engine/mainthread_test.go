package engine

import (
	"fmt"
	"iter"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/skynetml/skynet/cpython"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// mainThreadEnv makes the test binary TestMainThread's child: a worker
// process that scores on its main thread (Options.MainThread).
const mainThreadEnv = "SKYNET_TEST_ENGINE_MAIN_THREAD"

func init() {
	if os.Getenv(mainThreadEnv) != "" {
		runtime.LockOSThread() // the main goroutine stays on the main thread, as a worker process's does
	}
}

// alarmMetric times its own work out with SIGALRM, as graders do, and
// reports where it runs.
const alarmMetric = `import multiprocessing, os, signal, threading, time

class Timeout(Exception):
    pass

def _raise(signum, frame):
    raise Timeout()

AT_IMPORT = threading.current_thread() is threading.main_thread()

def with_alarm(fn, seconds):
    old = signal.signal(signal.SIGALRM, _raise)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return fn()
    except Timeout:
        return "timed out"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)

def spin():
    while True:
        pass

def square(x):
    return x * x

def score(input, output, expected=None):
    if output == "main":
        fb = f"import={AT_IMPORT} score={threading.current_thread() is threading.main_thread()}"
    elif output == "spin":
        fb = with_alarm(spin, 0.05)
    elif output == "sleep":
        fb = with_alarm(lambda: time.sleep(5) or "slept", 0.1)
    elif output == "fork":
        pid = os.fork()
        if pid == 0:
            os._exit(3)
        fb = f"exit {os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])}"
    elif output == "pool":
        with multiprocessing.get_context("fork").Pool(2) as pool:
            fb = str(pool.map(square, range(4)))
    elif output == "wrapper":
        first = signal.signal(signal.SIGUSR2, signal.SIG_IGN)
        second = signal.signal(signal.SIGUSR2, first)
        same = []
        for args in [(), (signal.SIGUSR2,), (0, signal.SIG_DFL), (signal.SIGUSR2, 5)]:
            got = []
            for fn in (signal.signal, signal.signal.__wrapped__):
                try:
                    fn(*args)
                    got.append("ok")
                except Exception as exc:
                    got.append(f"{type(exc).__name__}: {exc}")
            same.append(got[0] == got[1] != "ok")
        fb = f"{first!r} {second!r} same errors={all(same)} {signal.signal.__name__}"
    else:
        fb = "?"
    return 1.0, {"feedback": fb}
`

// signalHelper sets a handler for whoever calls it, as a library does.
const signalHelper = `import signal

def install():
    return signal.signal(signal.SIGUSR1, signal.SIG_IGN)
`

// helperMetric sets a handler through signalHelper at import and in score,
// after a pause that lets two cases run at once.
const helperMetric = `import time
import skynet_sig_helper

skynet_sig_helper.install()

def score(input, output, expected=None):
    time.sleep(0.3)
    try:
        skynet_sig_helper.install()
        return 1.0, {"feedback": "set"}
    except ValueError as exc:
        return 0.0, {"feedback": "ValueError: " + str(exc)}
`

// asyncioMetric runs asyncio at import, whose runner sets a SIGINT handler
// on the main thread (3.11+): the standard library checks the thread first,
// so that is no signal use to warn about.
const asyncioMetric = `import asyncio

asyncio.run(asyncio.sleep(0))

def score(input, output, expected=None):
    return 1.0, {"feedback": "ok"}
`

// sleepyMetric blocks past its timeout on the main thread only; elsewhere
// it pauses, so that two cases at once go to both threads.
const sleepyMetric = `import threading, time

def score(input, output, expected=None):
    main = threading.current_thread() is threading.main_thread()
    time.sleep(3 if main else 0.1)
    return 1.0, {"feedback": "main" if main else "other"}
`

// procsMetric is fast, or sleeps 5 ms a case.
const procsMetric = `import time

def score(input, output, expected=None):
    if output == "slow":
        time.sleep(0.005)
    return 1.0, {"feedback": output}
`

// TestMainThread runs engines in a child process that scores on its main
// thread, as a worker process does: a metric's alarm timeouts, os.fork and
// multiprocessing work as under python3; a handler set with several threads
// is named by the threads check; a call stuck on the main thread is
// reported by Wedged while the other thread scores on.
func TestMainThread(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a process")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), mainThreadEnv+"=1", "SKYNET_METRIC_MODEL=", "SKYNET_REFLECTION_MODEL=")
	cmd.WaitDelay = 5 * time.Second
	timer := time.AfterFunc(3*time.Minute, func() { cmd.Process.Kill() })
	defer timer.Stop()
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	got := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if rest, ok := strings.CutPrefix(line, "CHECK "); ok {
			name, value, _ := strings.Cut(rest, ": ")
			got[name] = value
		}
	}
	for name, want := range map[string]string{
		"main":             "import=True score=True",
		"spin":             "timed out",
		"sleep":            "timed out",
		"fork":             "exit 3",
		"pool":             "[0, 1, 4, 9]",
		"checks, 1 thread": "metric loads, score signature, metric's return value",
		"signal use":       "alarm.py:12 main=true",
		"second engine":    "engine: MainThread: the main thread already scores for another engine (one per process at a time)",
		"two at once":      "[ValueError: signal only works in main thread of the main interpreter set]",
		"threads check":    "ok=true metric_b.py:4 (via skynet_sig_helper.py:4) sets a signal handler (signal.signal); only the main thread can: with 2 threads a process, cases scored on the other 1 get ValueError: signal only works in main thread of the main interpreter (a grader that catches it may score them 0). Use 1 thread a process (the default) and more processes instead",
		"stuck":            "[other timeout case s: score timed out after 1s]",
		"wedge":            "s HoldsGIL=false",
		"while stuck":      "ok fast=true",
		"wedge clears":     "true",
		"wrapper":          "<Handlers.SIG_DFL: 0> <Handlers.SIG_IGN: 1> same errors=True signal",
		"asyncio":          "metric loads, score signature, metric's return value false",
		"procs":            "fast=1 slow=true closed=true",
		"procs, 2 threads": "fast=true",
		"served":           "6",
	} {
		assert.Equal(t, want, got[name], "%s\n%s", name, out)
	}
}

// TestMainThreadOffMainThread: Open refuses MainThread away from the main thread.
func TestMainThreadOffMainThread(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if syscall.Gettid() == syscall.Getpid() {
		// This goroutine holds the main thread now: another cannot run there.
		done := make(chan struct{})
		go func() {
			defer close(done)
			TestMainThreadOffMainThread(t)
		}()
		<-done
		return
	}
	_, err := Open(Options{Metric: exactMatch, MainThread: true})
	assert.ErrorContains(t, err, "MainThread: call from the process's main thread") // assert: maybe not the test's goroutine
}

// mainThreadChild is TestMainThread's child process, run by TestMain on the
// main goroutine, which init locked to the main thread.
func mainThreadChild() int {
	dir, err := os.MkdirTemp("", "skynet-main-thread")
	if err != nil {
		fmt.Println("CHECK setup:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	for name, src := range map[string]string{"alarm.py": alarmMetric, "metric_b.py": helperMetric,
		"skynet_sig_helper.py": signalHelper, "sleepy.py": sleepyMetric, "asyncio_metric.py": asyncioMetric, "procs.py": procsMetric} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			fmt.Println("CHECK setup:", err)
			return 1
		}
	}
	served := 0
	// serve scores with e on the main thread while checks runs; then closes e.
	serve := func(e *Engine, checks func(e *Engine)) {
		stop := make(chan struct{})
		go func() {
			defer close(stop)
			defer e.Close()
			checks(e)
		}()
		if err := cpython.ServeMainThread(stop); err != nil {
			fmt.Println("CHECK serve:", err)
			return
		}
		served++
	}
	say := func(name string, v ...any) {
		fmt.Printf("CHECK %s: %s\n", name, strings.TrimSuffix(fmt.Sprintln(v...), "\n"))
	}

	e, err := Open(Options{Metric: filepath.Join(dir, "alarm.py"), MainThread: true})
	if err != nil {
		fmt.Println("CHECK open:", err)
		return 1
	}
	_, err = Open(Options{Metric: filepath.Join(dir, "alarm.py"), MainThread: true})
	say("second engine", err)
	serve(e, func(e *Engine) {
		for _, what := range []string{"main", "spin", "sleep", "fork", "pool", "wrapper"} {
			r := e.Score(ctx, Case{ID: what, Input: map[string]any{}, Output: what})
			if r.Err != nil {
				say(what, r.Err.Kind, r.Err.Message, r.Err.Traceback)
				continue
			}
			say(what, r.Feedback)
		}
		var names []string
		for _, c := range e.Check(ctx, []Case{{ID: "c", Input: map[string]any{}, Output: "spin"}}) {
			names = append(names, c.Name)
		}
		say("checks, 1 thread", strings.Join(names, ", "))
		if u, ok := e.SignalUse(); ok {
			say("signal use", fmt.Sprintf("%s main=%v", u, u.MainThread))
		}
	})

	e, err = Open(Options{Metric: filepath.Join(dir, "metric_b.py"), MainThread: true, Threads: 2})
	if err != nil {
		fmt.Println("CHECK open:", err)
		return 1
	}
	serve(e, func(e *Engine) {
		var mu sync.Mutex
		var fbs []string
		var wg sync.WaitGroup
		for i := 0; i < 2; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := e.Score(ctx, Case{ID: fmt.Sprint(i), Input: map[string]any{}})
				mu.Lock()
				fbs = append(fbs, r.Feedback)
				mu.Unlock()
			}()
		}
		wg.Wait()
		slices.Sort(fbs)
		say("two at once", fbs)
		checks := e.Check(ctx, []Case{{ID: "c", Input: map[string]any{}}})
		for _, c := range checks {
			if c.Name == CheckThreads {
				say("threads check", fmt.Sprintf("ok=%v %s", c.OK, c.Message))
			}
		}
	})

	e, err = Open(Options{Metric: filepath.Join(dir, "asyncio_metric.py"), MainThread: true, Threads: 2})
	if err != nil {
		fmt.Println("CHECK open:", err)
		return 1
	}
	serve(e, func(e *Engine) {
		var names []string
		for _, c := range e.Check(ctx, []Case{{ID: "c", Input: map[string]any{}}}) {
			names = append(names, c.Name)
		}
		_, ok := e.SignalUse()
		say("asyncio", strings.Join(names, ", "), ok)
	})

	e, err = Open(Options{Metric: filepath.Join(dir, "sleepy.py"), MainThread: true, Threads: 2, Timeout: time.Second})
	if err != nil {
		fmt.Println("CHECK open:", err)
		return 1
	}
	serve(e, func(e *Engine) {
		// Two cases at once, one per thread: the main thread's sleeps past its timeout.
		var mu sync.Mutex
		var outcomes []string
		var wg sync.WaitGroup
		for i := 0; i < 2; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := e.Score(ctx, Case{ID: "s", Input: map[string]any{}})
				o := r.Feedback
				if r.Err != nil {
					o = fmt.Sprint(r.Err.Kind, " ", r.Err.Message)
				}
				mu.Lock()
				outcomes = append(outcomes, o)
				mu.Unlock()
			}()
		}
		wg.Wait()
		slices.Sort(outcomes)
		say("stuck", outcomes)
		var w Wedge
		ok := false
		for wait := time.Now().Add(3 * time.Second); !ok && time.Now().Before(wait); time.Sleep(20 * time.Millisecond) {
			w, ok = e.Wedged()
		}
		say("wedge", w.CaseID, fmt.Sprintf("HoldsGIL=%v", w.HoldsGIL))
		start := time.Now()
		r := e.Score(ctx, Case{ID: "n", Input: map[string]any{}})
		if r.Err != nil {
			say("while stuck", r.Err.Message)
		} else {
			say("while stuck", "ok", fmt.Sprintf("fast=%v", time.Since(start) < time.Second))
		}
		for wait := time.Now().Add(10 * time.Second); ok && time.Now().Before(wait); time.Sleep(20 * time.Millisecond) {
			_, ok = e.Wedged()
		}
		say("wedge clears", !ok)
	})
	// AdaptProcs: one P while a cheap metric's batches are short, all again
	// while they are long and once the engine closes; with two threads, all.
	procs := runtime.GOMAXPROCS(0)
	cases := func(n int, output string) iter.Seq[Case] {
		return func(yield func(Case) bool) {
			for i := 0; i < n && yield(Case{ID: fmt.Sprint(i), Input: map[string]any{}, Output: output}); i++ {
			}
		}
	}
	back := func() bool { // the worker sets it after its batch's results are out
		for wait := time.Now().Add(2 * time.Second); runtime.GOMAXPROCS(0) != procs && time.Now().Before(wait); {
			time.Sleep(5 * time.Millisecond)
		}
		return runtime.GOMAXPROCS(0) == procs
	}
	for _, threads := range []int{1, 2} {
		e, err = Open(Options{Metric: filepath.Join(dir, "procs.py"), MainThread: true, AdaptProcs: true, Threads: threads})
		if err != nil {
			fmt.Println("CHECK open:", err)
			return 1
		}
		fast, slow := 0, false
		serve(e, func(e *Engine) {
			for range e.ScoreAll(ctx, cases(5000, "fast"), 0) {
			}
			fast = runtime.GOMAXPROCS(0)
			if threads == 1 {
				for range e.ScoreAll(ctx, cases(3, "slow"), 0) {
				}
				slow = back()
			}
		})
		if threads == 1 {
			say("procs", fmt.Sprintf("fast=%d slow=%v closed=%v", fast, slow, back()))
		} else {
			say("procs, 2 threads", fmt.Sprintf("fast=%v", fast == procs))
		}
	}
	say("served", served)
	return 0
}
