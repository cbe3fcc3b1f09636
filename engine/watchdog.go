package engine

// The watchdog: a case's time limit in each running batch, and a wedged
// case that only ending the process can undo.

import (
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/skynetml/skynet/cpython"
)

// watchdog times out the running case of each worker's batch: it delivers the
// timeout at once, interrupts the call, and if the call does not unwind within
// interruptGrace (blocked in sleep, I/O or C code) it hands the batch's
// unstarted cases to other workers and retires the worker for a replacement;
// the main thread's worker, which nothing in the process can replace, is
// reported stuck instead (Wedged).
func (e *Engine) watchdog() {
	// It wakes when something may be due, not on a fixed tick: an idle
	// wake-up of a worker's Go threads costs a process whose metric runs long
	// (a judge waiting on a model, a grader that forks) context switches, and
	// a fork it lands beside costs TLB shoot-downs and copied pages.
	t := time.NewTimer(watchdogTick)
	defer t.Stop()
	for {
		select {
		case <-e.quit:
			return
		case <-t.C:
		}
		start := time.Now()
		// A case, or a phase of one, that starts after this pass is due no
		// sooner than the shortest limit from now.
		next := min(e.timeout, e.runTimeout)
		e.poolMu.Lock()
		pool := append([]*worker(nil), e.pool...)
		e.poolMu.Unlock()
		for _, w := range pool {
			next = min(next, e.watch(w))
		}
		if e.aio != nil {
			next = min(next, e.aio.watch())
		}
		if e.reviewWedge() {
			next = watchdogTick // a reported wedge is looked at until it clears
		}
		t.Reset(max(watchdogTick, next-time.Since(start)))
		if hook := testHookWatchdog.Load(); hook != nil {
			(*hook)(e)
		}
	}
}

// testHookWatchdog, when set by a test, runs after each of an engine's
// watchdog passes.
var testHookWatchdog atomic.Pointer[func(*Engine)]

// notDue is what watch reports for a worker with nothing of its own coming
// due: the watchdog's shortest-limit bound covers a case that starts later.
const notDue = time.Duration(math.MaxInt64)

// watch times out w's running case if it is past its limit, and says how
// long until it next needs looking at.
func (e *Engine) watch(w *worker) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	br := w.run
	if br == nil || w.retired.Load() {
		return notDue
	}
	cur, running := br.b.Current()
	limit, kind, what := e.timeout, KindTimeout, "score"
	if cur >= 0 && br.jobs[cur].program && br.b.Running() {
		limit, kind, what = e.runTimeout, KindRun, "run"
	}
	if cur < 0 || br.stuck == cur+1 {
		return notDue
	}
	if running < limit {
		return limit - running
	}
	now := time.Now()
	if br.interrupted == nil {
		br.interrupted = make([]time.Time, len(br.jobs))
		br.intDone = make([]chan struct{}, len(br.jobs))
	}
	if br.interrupted[cur].IsZero() {
		br.interrupted[cur] = now
		br.jobs[cur].deliver(outcome{kind: kind, why: fmt.Sprintf("%s timed out after %s", what, limit), elapsed: running})
		done := make(chan struct{})
		br.intDone[cur] = done
		go func() {
			cpython.Interrupt(br.tokenBase + uint64(cur))
			close(done)
		}()
		return interruptGrace
	}
	if since := now.Sub(br.interrupted[cur]); since < interruptGrace {
		return interruptGrace - since
	}
	holdsGIL := false
	select {
	case <-br.intDone[cur]:
	default:
		holdsGIL = true // the interrupt is still waiting for the GIL: C code holds it
	}
	// Stuck outside Python bytecode: its other cases go to other workers.
	for i, j := range br.jobs[:cur] {
		if br.b.State(i) == cpython.SlotDone {
			j.deliver(slotOutcome(br.b, i, j.program, e.str))
		}
	}
	e.requeue(br.takeBackUnstarted())
	if w.main {
		br.stuck = cur + 1
		e.noteWedge(&wedge{Wedge: Wedge{CaseID: br.jobs[cur].id, Since: br.interrupted[cur], HoldsGIL: holdsGIL},
			w: w, br: br, cur: cur, released: br.intDone[cur]})
		return notDue // the wedge is watched until it clears
	}
	if holdsGIL {
		e.noteWedge(&wedge{Wedge: Wedge{CaseID: br.jobs[cur].id, Since: br.interrupted[cur], HoldsGIL: true},
			released: br.intDone[cur]})
	}
	w.retired.Store(true)
	if !e.closed.Load() {
		e.startWorker(false)
	}
	return notDue
}

// Wedge says which case's call is stuck past its timeout in a way only
// ending the process can undo. Either C code holds the GIL (a catastrophic
// regex, a C extension's loop), so no Python runs anywhere until it returns,
// and it cannot be interrupted; or, with Options.MainThread, the call holds
// the main thread, blocked outside Python bytecode (a sleep, a socket read,
// C code that released the GIL), and the main thread's worker cannot be
// replaced within the process: other threads (Threads > 1) go on scoring,
// but nothing can use the main thread until it returns.
type Wedge struct {
	CaseID string    // the case whose score (or run) call is stuck
	Since  time.Time // when the case timed out
	// HoldsGIL says C code holds the GIL; false: the call is blocked
	// outside Python bytecode on the main thread.
	HoldsGIL bool
}

// Why says what holds what, for a message about the case.
func (w Wedge) Why() string {
	if w.HoldsGIL {
		return "its call is stuck in C code that holds the GIL (no Python runs until it returns)"
	}
	return "its call is blocked outside Python bytecode (a sleep, I/O or C code) on the main thread, whose worker cannot be replaced in this process"
}

// wedge is a reported Wedge and what clears it: released closing (the
// interrupt got the GIL) for another thread's worker, whose replacement
// already scores; the case ending for the main thread's worker w.
type wedge struct {
	Wedge
	w        *worker // the main thread's worker, or nil
	br       *batchRun
	cur      int
	released <-chan struct{}
}

func (s *scheduler) noteWedge(w *wedge) {
	s.wedge.CompareAndSwap(nil, w)
}

// reviewWedge clears the reported wedge once it is over, or notes that the
// main thread's stuck call let go of the GIL; it reports whether one is
// still reported. Watchdog only.
func (s *scheduler) reviewWedge() bool {
	wg := s.wedge.Load()
	if wg == nil {
		return false
	}
	released := false
	select {
	case <-wg.released:
		released = true
	default:
	}
	if wg.w == nil {
		if released {
			s.wedge.CompareAndSwap(wg, nil)
		}
		return s.wedge.Load() != nil
	}
	wg.w.mu.Lock()
	over := wg.w.run != wg.br // the batch ended (and may be freed): so did the case
	if !over {
		cur, _ := wg.br.b.Current()
		over = cur != wg.cur
	}
	wg.w.mu.Unlock()
	switch {
	case over:
		s.wedge.CompareAndSwap(wg, nil)
	case released && wg.HoldsGIL:
		next := *wg
		next.HoldsGIL = false
		s.wedge.CompareAndSwap(wg, &next)
	}
	return s.wedge.Load() != nil
}

// Wedged reports the case whose stuck call only ending the process can
// undo, if there is one (see Wedge): the caller can then only give up on
// the process (package pool restarts such a worker).
func (e *Engine) Wedged() (Wedge, bool) {
	if w := e.wedge.Load(); w != nil {
		return w.Wedge, true
	}
	return Wedge{}, false
}
