package cpython

import (
	"errors"
	"sync/atomic"
)

// The main-thread service. In main-thread mode (Config.MainThread) only code
// run on the process's main thread can set signal handlers (signal.alarm
// timeouts), and the main goroutine is the one locked there. It lends the
// thread out: after its own setup it calls ServeMainThread, and whoever
// needs the thread for a long run (the engine's first scoring worker) hands
// it a function with OnMainThread.
var mainThread struct {
	mode  atomic.Bool // Initialize succeeded with MainThread
	taken atomic.Bool // a function was handed over and has not returned
	fn    chan func() // the function handed over, until ServeMainThread takes it
}

func init() { mainThread.fn = make(chan func(), 1) }

// OnMainThread hands fn to the main thread, which runs it once the main
// goroutine serves (ServeMainThread). It reports false, and fn never runs,
// when the process is not in main-thread mode or the main thread is taken:
// one function holds it from OnMainThread until that function returns, so
// it is for one long run, such as a scoring loop, that returns when its
// owner is done.
func OnMainThread(fn func()) bool {
	if !mainThread.mode.Load() || !mainThread.taken.CompareAndSwap(false, true) {
		return false
	}
	mainThread.fn <- fn
	return true
}

// ServeMainThread runs the functions handed to OnMainThread, one at a time,
// on the calling goroutine until stop is closed. Call it from the goroutine
// that initialised the interpreter with MainThread, once that goroutine's
// own setup is done. stop is checked between functions: one running when
// stop closes runs to its end first. It fails at once when the process is
// not in main-thread mode or the caller is not on the main thread.
func ServeMainThread(stop <-chan struct{}) error {
	if !mainThread.mode.Load() {
		return errors.New("cpython: ServeMainThread: the interpreter was not initialised with MainThread")
	}
	if err := onMainThread(); err != nil {
		return err
	}
	for {
		select {
		case <-stop:
			return nil
		default:
		}
		select {
		case <-stop:
			return nil
		case fn := <-mainThread.fn:
			run(fn)
		}
	}
}

func run(fn func()) {
	defer mainThread.taken.Store(false) // even past a panic a caller recovers from
	fn()
}
