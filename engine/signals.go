package engine

import (
	"fmt"

	"github.com/skynetml/skynet/cpython"
)

// CheckThreads is listed when a MainThread engine scores on several threads
// (Options.Threads > 1) and the metric or program set a signal handler, at
// import or in a sample case: only the main thread can, and cases scored on
// the others get ValueError from signal.signal, which graders often swallow
// into a score of 0. Failing that, when it forked: a child forked while
// other threads run can deadlock. It is a notice, not a failure (OK is true).
const CheckThreads = "threads"

// SignalUse is where a MainThread engine's metric or program first called
// signal.signal. Calls the standard library makes on the main thread
// (asyncio.run's SIGINT handler) are left out: it checks the thread first,
// so they work on every thread.
type SignalUse struct {
	// Where is the innermost line of the metric's or program's file on the
	// call's stack, e.g. "metric.py:12"; the calling line when neither is.
	Where string
	// Via is the line that called signal.signal, when it is another file's,
	// e.g. "math_verify/utils.py:45".
	Via string
	// MainThread says the call ran on the main thread, where it works;
	// elsewhere it raised ValueError.
	MainThread bool
}

// String is where, then via what: "metric.py:12 (via math_verify/utils.py:45)".
func (u SignalUse) String() string {
	if u.Via == "" {
		return u.Where
	}
	return fmt.Sprintf("%s (via %s)", u.Where, u.Via)
}

// SignalWarning is what a user is told, once, of a metric that sets a
// signal handler here while cases run on threads threads a process: the
// CheckThreads notice, and the pool's warning, in one wording.
func (u SignalUse) SignalWarning(threads int) string {
	ran := ""
	if !u.MainThread {
		ran = ", and there it ran on another thread and raised ValueError"
	}
	return fmt.Sprintf("%s sets a signal handler (signal.signal)%s; only the main thread can: with %d threads a process, cases scored on the other %d get ValueError: signal only works in main thread of the main interpreter (a grader that catches it may score them 0). Use 1 thread a process (the default) and more processes instead",
		u, ran, threads, threads-1)
}

// ForkWarning is SignalWarning for a metric that forks here (ForkUse).
func (u SignalUse) ForkWarning(threads int) string {
	return fmt.Sprintf("%s forks (os.fork; multiprocessing's fork start method calls it) while cases run on %d threads a process: a child forked while other threads run can deadlock on a lock one of them held, and its case then times out or scores differently. Use 1 thread a process (the default) and more processes instead",
		u, threads)
}

// SignalUse reports where the metric or program first set a signal handler
// (signal.signal), at import or in a case; only a MainThread engine watches
// for it. It takes the GIL.
func (e *Engine) SignalUse() (SignalUse, bool) { return e.callSite("signal_use") }

// ForkUse reports, in the same form, where the metric or program first
// called os.fork (multiprocessing's fork start method does): a child forked
// while other threads run can deadlock on a lock one of them held, so with
// Threads > 1 such a metric may not score as it does under python3. Only a
// MainThread engine watches for it.
func (e *Engine) ForkUse() (SignalUse, bool) { return e.callSite("fork_use") }

// callSite asks the loader for a watched call's first site.
func (e *Engine) callSite(fn string) (SignalUse, bool) {
	if !e.mainThread || e.py == nil || e.py.loader == nil {
		return SignalUse{}, false
	}
	var v any
	var err error
	if gerr := cpython.WithGIL(func(g *cpython.GIL) {
		v, err = e.loaderCall(g, e.py, fn, e.path, e.programPath)
	}); gerr != nil || err != nil {
		return SignalUse{}, false
	}
	rec, _ := v.([]any)
	if len(rec) != 3 {
		return SignalUse{}, false
	}
	u := SignalUse{}
	u.Where, _ = rec[0].(string)
	u.Via, _ = rec[1].(string)
	u.MainThread, _ = rec[2].(bool)
	return u, true
}

// threadsNotice is the CheckThreads notice, when it applies.
func (e *Engine) threadsNotice() (Check, bool) {
	if !e.mainThread || e.pythonThreads() < 2 {
		return Check{}, false
	}
	u, ok := e.SignalUse()
	if !ok {
		if f, ok := e.ForkUse(); ok {
			return Check{Name: CheckThreads, OK: true, Message: f.ForkWarning(e.threads)}, true
		}
		return Check{}, false
	}
	return Check{Name: CheckThreads, OK: true, Message: u.SignalWarning(e.threads)}, true
}
