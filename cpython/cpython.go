// Package cpython is Skynet's thin cgo layer over the CPython C API.
//
// The interpreter is started once per process, through PyConfig, by
// Initialize, and never finalised (C extensions such as numpy cannot be
// re-initialised). Python code runs on OS threads that each have their own
// thread state and take the GIL explicitly. In main-thread mode
// (Config.MainThread) the process's main thread is Python's main thread, so
// signal handlers, os.fork and multiprocessing work there as under python3
// (see ServeMainThread). Values cross the boundary in one compact buffer per
// call (see codec.go), so the hot path pays one cgo crossing per call rather
// than one per C-API function.
package cpython

/*
#cgo pkg-config: python3-embed
#cgo CFLAGS: -Wall -Werror=implicit-function-declaration
#include <stdlib.h>
#include "host.h"
*/
import "C"

import (
	_ "embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"unsafe"
)

//go:embed host.py
var hostSource string

// Config chooses which Python installation the interpreter uses.
type Config struct {
	// Executable is the python binary whose installation (or virtualenv) to
	// use, e.g. "/path/venv/bin/python". Empty: $VIRTUAL_ENV/bin/python when
	// VIRTUAL_ENV is set, else the python3.X of the installation libpython
	// belongs to (its sysconfig BINDIR, found from where libpython was
	// loaded). It becomes sys.executable, so
	// subprocess.run([sys.executable, ...]) and multiprocessing's spawn
	// start that Python.
	Executable string
	// Home overrides the standard library location (PYTHONHOME semantics).
	Home string
	// argv becomes sys.argv; empty means [""], CPython's own sys.argv for
	// an embedded interpreter (and for python with no script): no script
	// is running, and sys.argv[0] is where Python code looks for one.
	argv []string
	// MemoryLimit caps the bytes Python code may hold (0: no cap); past it,
	// allocations raise MemoryError. Python's own allocator is replaced by
	// malloc underneath, so it costs some speed: opt-in.
	MemoryLimit int64
	// MainThread starts the interpreter on the calling OS thread, which
	// must be the process's main thread, with the calling goroutine locked
	// to it (runtime.LockOSThread in an init function keeps the main
	// goroutine there; Initialize locks it for good). Python then treats it
	// as python3 treats its main thread: signal.signal works there, Python
	// installs python3's SIGINT, SIGPIPE and SIGXFSZ handlers, and the
	// signals the Go runtime handled but does not need (SIGALRM, SIGTERM,
	// SIGCHLD, SIGUSR1, the real-time ones...) are back to SIG_DFL for
	// Python to take (os/signal.Notify no longer sees them). Code runs
	// there through WithGIL on that goroutine, and through OnMainThread
	// once it calls ServeMainThread.
	MainThread bool
}

var (
	initMu     sync.Mutex
	initDone   bool
	initConfig Config
	initErr    error
)

// errConfigConflict is returned when the interpreter is already running with
// another configuration: there is one per process.
var errConfigConflict = errors.New("cpython: the interpreter is already initialised with a different Python configuration (one per process)")

// Initialize starts the interpreter. Later calls with an equal (resolved)
// config return the first call's result; a different config is an error.
// One asking for MainThread must be made on the main thread, and fails
// after the interpreter started without it; one not asking for it may
// follow one that did (its caller then runs Python on ordinary threads).
func Initialize(cfg Config) error {
	cfg = resolve(cfg)
	if cfg.MainThread {
		if err := onMainThread(); err != nil {
			return err
		}
	}
	initMu.Lock()
	defer initMu.Unlock()
	if initDone {
		if initErr == nil && !sameConfig(cfg, initConfig) {
			return errConfigConflict
		}
		if initErr == nil && cfg.MainThread && !initConfig.MainThread {
			return errors.New("cpython: MainThread: the interpreter is already initialised on another thread")
		}
		return initErr
	}
	initDone, initConfig = true, cfg
	initErr = initialize(cfg)
	return initErr
}

// onMainThread says why the calling thread is not the process's main thread, or nil.
func onMainThread() error {
	if tid, pid := syscall.Gettid(), syscall.Getpid(); tid != pid {
		return fmt.Errorf("cpython: MainThread: call from the process's main thread (thread %d), not thread %d: lock the main goroutine to it with runtime.LockOSThread in an init function", pid, tid)
	}
	return nil
}

// initialized reports whether the interpreter is running.
func initialized() bool {
	initMu.Lock()
	defer initMu.Unlock()
	return initDone && initErr == nil
}

func resolve(cfg Config) Config {
	if cfg.Executable == "" {
		if venv := os.Getenv("VIRTUAL_ENV"); venv != "" {
			cfg.Executable = filepath.Join(venv, "bin", "python")
		} else {
			cfg.Executable = installedPython()
		}
	}
	if len(cfg.argv) == 0 {
		cfg.argv = []string{""}
	}
	return cfg
}

// installedPython is the python executable of the installation the loaded
// libpython belongs to, its sysconfig BINDIR/python3.X: e.g.
// /usr/bin/python3.11 for Debian's libpython3.11 in /usr/lib/<triplet>,
// <prefix>/bin/python3.12 for a pyenv or /usr/local build. It is found as
// CPython's getpath finds a prefix, from the library's own location: the
// nearest directory above it that holds bin/python3.X and the standard
// library's landmark lib/python3.X/os.py. "" when libpython is linked into
// the executable or no such directory exists; the interpreter then searches
// PATH for python3.X itself.
//
// Without it, PyConfig.program_name defaults to argv[0], so sys.executable
// was the metric's path; and the bare default, "python3", would be whatever
// PATH holds (a pyenv shim, another version).
func installedPython() string {
	lib := Version().Library
	if lib == "" {
		if exe := buildPython(); exe != "" {
			if st, err := os.Stat(exe); err == nil && st.Mode().IsRegular() {
				return exe
			}
		}
		return ""
	}
	if real, err := filepath.EvalSymlinks(lib); err == nil {
		lib = real // /lib/x86_64-linux-gnu -> /usr/lib/x86_64-linux-gnu on merged-/usr systems
	}
	name := "python" + PythonVersion()
	for dir := filepath.Dir(lib); ; {
		exe := filepath.Join(dir, "bin", name)
		if st, err := os.Stat(exe); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			if _, err := os.Stat(filepath.Join(dir, "lib", name, "os.py")); err == nil {
				return exe
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

func sameConfig(a, b Config) bool {
	if a.Executable != b.Executable || a.Home != b.Home || a.MemoryLimit != b.MemoryLimit {
		return false
	}
	return true // sys.argv differences are harmless; Initialize checks MainThread
}

func initialize(cfg Config) error {
	if cfg.Executable != "" {
		if _, err := os.Stat(cfg.Executable); err != nil {
			return fmt.Errorf("cpython: python executable: %w", err)
		}
	}
	if e := CheckVenv(cfg.Executable); e != nil && e.Fatal() {
		return e // its lib/python3.X would not even be looked in: every import of its packages would fail
	}
	if cfg.MainThread {
		// For good: the main thread state is this thread's (sky_initialize),
		// and only this goroutine may run Python on it.
		runtime.LockOSThread()
		err := initializeLocked(cfg)
		if err == nil {
			mainThread.mode.Store(true)
		}
		return err
	}
	// The initialising OS thread keeps the main thread state as its PyGILState
	// state, so no other goroutine may ever run on it: a worker landing there
	// would deadlock in PyGILState_Ensure. It stays parked for the process's life.
	done := make(chan error)
	go func() {
		runtime.LockOSThread()
		done <- initializeLocked(cfg)
		select {}
	}()
	return <-done
}

func initializeLocked(cfg Config) error {

	cstrs := make([]*C.char, 0, len(cfg.argv)+3)
	defer func() {
		for _, s := range cstrs {
			C.free(unsafe.Pointer(s))
		}
	}()
	cstr := func(s string) *C.char {
		c := C.CString(s)
		cstrs = append(cstrs, c)
		return c
	}
	argv := (**C.char)(C.malloc(C.size_t(len(cfg.argv)) * C.size_t(unsafe.Sizeof((*C.char)(nil)))))
	defer C.free(unsafe.Pointer(argv))
	args := unsafe.Slice(argv, len(cfg.argv))
	for i, a := range cfg.argv {
		args[i] = cstr(a)
	}
	var errBuf C.sky_buf
	defer C.sky_buf_free(&errBuf)
	if cfg.MemoryLimit < 0 {
		return errors.New("cpython: MemoryLimit must not be negative")
	}
	program := cfg.Executable
	if program == "" {
		// Not argv[0] (CPython's default), which is no python; a bare name
		// is looked up on PATH.
		program = "python" + PythonVersion()
	}
	if C.sky_initialize(cstr(program), cstr(cfg.Home), C.int(len(cfg.argv)), argv,
		cstr(hostSource), C.size_t(cfg.MemoryLimit), cbool(cfg.MainThread), &errBuf) != 0 {
		if errBuf.len == 0 { // failed before Python could say why
			return errors.New("cpython: starting the interpreter failed")
		}
		return fmt.Errorf("cpython: starting the interpreter: %w", decodeError(bufBytes(&errBuf)))
	}
	return nil
}

// bufBytes views a C buffer without copying; valid until C reuses it.
func bufBytes(b *C.sky_buf) []byte {
	if b.len == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(b.data)), int(b.len))
}
