package cpython

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// mainThreadEnv makes the test binary TestMainThread's child: a process in
// main-thread mode, as a scoring worker process is. Its value is the folder
// holding mainThreadModule.
const mainThreadEnv = "SKYNET_TEST_MAIN_THREAD"

func init() {
	if os.Getenv(mainThreadEnv) != "" {
		runtime.LockOSThread() // the main goroutine stays on the main thread, as a worker process's does
	}
}

// mainThreadModule is what the child checks, one function each. It is a
// file on sys.path so that multiprocessing's spawn children can import it.
const mainThreadModule = `
import ctypes, json, multiprocessing, os, signal, subprocess, sys, threading, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

class Timeout(Exception):
    pass

def _raise(signum, frame):
    raise Timeout()

def square(x):
    return x * x

def main_thread():
    return str(threading.current_thread() is threading.main_thread())

def _until(deadline):
    while time.monotonic() < deadline:
        pass

def signal_handler_runs():
    old = signal.signal(signal.SIGUSR1, _raise)
    try:
        os.kill(os.getpid(), signal.SIGUSR1)
        _until(time.monotonic() + 5)
        return "not run"
    except Timeout:
        return "ran"
    finally:
        signal.signal(signal.SIGUSR1, old)

def sigint_raises_keyboard_interrupt():
    try:
        os.kill(os.getpid(), signal.SIGINT)
        _until(time.monotonic() + 5)
        return "not raised"
    except KeyboardInterrupt:
        return "KeyboardInterrupt"

def itimer_stops_busy_loop():
    old = signal.signal(signal.SIGALRM, _raise)
    stopped = 0
    try:
        for _ in range(20):
            signal.setitimer(signal.ITIMER_REAL, 0.01)
            deadline = time.monotonic() + 5
            try:
                while True:
                    if time.monotonic() > deadline:
                        break
            except Timeout:
                stopped += 1
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    return f"{stopped}/20"

def alarm_stops_sleep():
    old = signal.signal(signal.SIGALRM, _raise)
    t0 = time.monotonic()
    try:
        signal.alarm(1)
        time.sleep(5)
        return "slept 5s"
    except Timeout:
        return f"stopped after {round(time.monotonic() - t0)}s"
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)

def signal_elsewhere():
    out = []
    def other():
        try:
            signal.signal(signal.SIGUSR2, _raise)
            out.append("set")
        except ValueError as exc:
            out.append("ValueError: " + str(exc))
    t = threading.Thread(target=other)
    t.start()
    t.join()
    return out[0]

# The signals package cpython resets to SIG_DFL, and those Python sets.
RESET = ["SIGHUP", "SIGINT", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGTERM", "SIGCHLD",
         "SIGCONT", "SIGTSTP", "SIGTTIN", "SIGTTOU", "SIGXCPU", "SIGVTALRM", "SIGPROF", "SIGWINCH",
         "SIGIO", "SIGPWR", "SIGPIPE", "SIGXFSZ"]

def dispositions():
    def show(h):
        if h is None:
            return "None"
        if h is signal.default_int_handler:
            return "default_int_handler"
        if h in (signal.SIG_DFL, signal.SIG_IGN):
            return signal.Handlers(h).name
        return "handler " + repr(h)
    sigs = [getattr(signal, n) for n in RESET] + list(range(signal.SIGRTMIN, signal.SIGRTMAX + 1))
    return {signal.Signals(s).name if s in signal.Signals._value2member_map_ else str(s): show(signal.getsignal(s))
            for s in sigs}

def getsignal_as_python3():
    ours = dispositions()
    src = "import json, sys; sys.path.insert(0, sys.argv[1]); import skynet_mt_checks as c; print(json.dumps(c.dispositions()))"
    p = subprocess.run([sys.executable, "-c", src, os.path.dirname(os.path.abspath(__file__))],
                       capture_output=True, text=True, check=True)
    theirs = json.loads(p.stdout)
    diff = {k: (ours.get(k), theirs.get(k)) for k in set(ours) | set(theirs) if ours.get(k) != theirs.get(k)}
    return json.dumps(diff, sort_keys=True) if diff else f"same for {len(ours)} signals"

def fork_pool():
    with multiprocessing.get_context("fork").Pool(2) as pool:
        return str(pool.map(square, range(5)))

def spawn_pool():
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        return str(pool.map(square, range(5)))

def os_fork():
    pid = os.fork()
    if pid == 0:
        os._exit(7)
    _, status = os.waitpid(pid, 0)
    return f"child exit {os.waitstatus_to_exitcode(status)}"

def ctypes_callback():
    libc = ctypes.CDLL(None)
    CMP = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int))
    calls = []
    def cmp(a, b):
        calls.append(threading.current_thread() is threading.main_thread())
        return a[0] - b[0]
    arr = (ctypes.c_int * 5)(5, 1, 4, 2, 3)
    libc.qsort(arr, len(arr), ctypes.sizeof(ctypes.c_int), CMP(cmp))
    return f"{list(arr)} main={all(calls)}"
`

// mainThreadChecks is what each check returns in the child: python3's behaviour.
var mainThreadChecks = map[string]string{
	"main_thread":                      "True",
	"signal_handler_runs":              "ran",
	"sigint_raises_keyboard_interrupt": "KeyboardInterrupt",
	"itimer_stops_busy_loop":           "20/20",
	"alarm_stops_sleep":                "stopped after 1s",
	"signal_elsewhere":                 "ValueError: signal only works in main thread of the main interpreter",
	"getsignal_as_python3":             "same for 51 signals",
	"fork_pool":                        "[0, 1, 4, 9, 16]",
	"spawn_pool":                       "[0, 1, 4, 9, 16]",
	"os_fork":                          "child exit 7",
	"ctypes_callback":                  "[1, 2, 3, 4, 5] main=True",
}

// TestMainThread runs the checks in a child process initialised in
// main-thread mode, once on the main goroutine before it serves and once
// through OnMainThread: each behaves as under python3. A goroutine's own
// thread is not the main one there.
func TestMainThread(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a process and waits for signals")
	}
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "skynet_mt_checks.py"), []byte(mainThreadModule), 0o644))
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), mainThreadEnv+"="+dir)
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
	for _, via := range []string{"main goroutine", "OnMainThread"} {
		for name, want := range mainThreadChecks {
			assert.Equal(t, want, got[via+" "+name], "%s %s\n%s", via, name, out)
		}
	}
	for name, want := range map[string]string{
		"second OnMainThread while taken": "false",
		"OnMainThread once returned":      "true",
		"goroutine main_thread":           "False",
		"goroutine ServeMainThread":       "cpython: MainThread: call from the process's main thread",
		"served":                          "true",
	} {
		assert.True(t, strings.HasPrefix(got[name], want), "%s: got %q, want %q\n%s", name, got[name], want, out)
	}
}

// mainThreadChild is TestMainThread's child process: TestMain runs it on
// the main goroutine, locked to the main thread by init.
func mainThreadChild(dir string) int {
	if err := Initialize(Config{MainThread: true, argv: []string{"metric.py"}}); err != nil {
		fmt.Println("CHECK init:", err)
		return 1
	}
	path := filepath.Join(dir, "skynet_mt_checks.py")
	src, err := os.ReadFile(path)
	if err != nil {
		fmt.Println("CHECK read:", err)
		return 1
	}
	fns := map[string]*Object{}
	var loadErr error
	if err := WithGIL(func(g *GIL) {
		mod, err := g.ExecModule("skynet_mt_checks", path, string(src))
		if err != nil {
			loadErr = err
			return
		}
		defer g.Release(mod)
		for name := range mainThreadChecks {
			if fns[name], err = g.Attr(mod, name); err != nil {
				loadErr = err
				return
			}
		}
	}); err != nil || loadErr != nil {
		fmt.Println("CHECK load:", err, loadErr)
		return 1
	}
	c, err := NewCaller(1 << 20)
	if err != nil {
		fmt.Println("CHECK caller:", err)
		return 1
	}
	defer c.Close()
	check := func(via, name string) {
		v, err := c.Call(fns[name], nil, 0, 0, true, 0)
		if err != nil {
			v = err.Error()
		}
		if logs, _ := c.logs(); logs != "" {
			fmt.Printf("%s %s logged: %s\n", via, name, logs)
		}
		fmt.Printf("CHECK %s %s: %v\n", via, name, v)
	}
	for name := range mainThreadChecks {
		check("main goroutine", name)
	}

	stop := make(chan struct{})
	go func() {
		defer close(stop)
		tried := make(chan struct{})
		done := make(chan struct{})
		ok := OnMainThread(func() {
			<-tried // hold the main thread until the second hand-over was refused
			for name := range mainThreadChecks {
				check("OnMainThread", name)
			}
			close(done)
		})
		fmt.Printf("CHECK OnMainThread: %v\n", ok)
		fmt.Printf("CHECK second OnMainThread while taken: %v\n", OnMainThread(func() {}))
		close(tried)
		<-done
		again := make(chan struct{})
		// The first function has returned or is about to: the thread is free then.
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
			if OnMainThread(func() { close(again) }) {
				<-again
				fmt.Printf("CHECK OnMainThread once returned: true\n")
				break
			}
			if time.Now().After(deadline) {
				fmt.Printf("CHECK OnMainThread once returned: false\n")
				break
			}
		}
		gc, err := NewCaller(0)
		if err != nil {
			fmt.Println("CHECK goroutine caller:", err)
			return
		}
		defer gc.Close()
		runtime.LockOSThread() // not the main thread, which the main goroutine holds
		defer runtime.UnlockOSThread()
		v, err := gc.Call(fns["main_thread"], nil, 0, 0, false, 0)
		fmt.Printf("CHECK goroutine main_thread: %v %v\n", v, err)
		fmt.Printf("CHECK goroutine ServeMainThread: %v\n", ServeMainThread(make(chan struct{})))
	}()
	if err := ServeMainThread(stop); err != nil {
		fmt.Println("CHECK serve:", err)
		return 1
	}
	fmt.Println("CHECK served: true")
	return 0
}
