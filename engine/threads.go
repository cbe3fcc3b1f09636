package engine

// The worker threads: their start, loop and end, when they pin to an OS
// thread, and how waiters and idle workers spin before they park.

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/skynetml/skynet/cpython"
	"github.com/skynetml/skynet/llm"
	"github.com/skynetml/skynet/skynetmod"
)

// worker scores batches with its own Caller, on a goroutine of its own or,
// for a MainThread engine's first, on the main thread.
type worker struct {
	py      *pyMetric
	caller  *cpython.Caller
	slot    *skynetmod.Slot // the batch's observations, for the skynet module
	retired atomic.Bool     // replaced after a stuck call; exits when it returns
	main    bool            // runs on the main thread (Options.MainThread): never replaced
	pinned  bool            // locked to its OS thread (pin); the main thread's always is
	// procs is the P count to go back to while the main thread's worker
	// runs the process on one P (Options.AdaptProcs), 0 when it does not
	// adapt; soleP says it runs on one now.
	procs int
	soleP bool
	mu    sync.Mutex // guards run against the batch being freed
	run   *batchRun

	// Reused from batch to batch.
	args cpython.BatchArgs
	obs  []*Observation
}

// startWorker starts a scoring worker: on the main thread (through
// cpython.OnMainThread) for the first of a MainThread engine, else on a
// goroutine of its own.
func (e *Engine) startWorker(main bool) error {
	c, err := cpython.NewCaller(e.logsLimit)
	if err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	w := &worker{py: e.py, caller: c, slot: skynetmod.NewSlot(), main: main, pinned: main}
	if main && e.adaptProcs && e.threads == 1 && !e.async { // Options.AdaptProcs
		w.procs = runtime.GOMAXPROCS(0)
	}
	w.slot.SetModel(func(i int, inRun bool, req llm.Request) (string, error) { return e.callModel(w, i, inRun, req) })
	e.poolMu.Lock()
	e.pool = append(e.pool, w)
	e.poolMu.Unlock()
	e.workers.Add(1)
	if !main {
		go e.workerLoop(w)
		return nil
	}
	if !cpython.OnMainThread(func() { e.workerLoop(w) }) {
		e.removeWorker(w)
		e.workers.Done()
		w.slot.Close()
		c.Close()
		return errors.New("engine: MainThread: the main thread already scores for another engine (one per process at a time)")
	}
	return nil
}

// adaptProcs runs the process on one P while the main thread's batches are
// short (groups under oneP), on w.procs again once they are long (over
// manyP). See Options.AdaptProcs.
func (w *worker) adaptProcs(groupTime time.Duration) {
	switch {
	case w.procs <= 1:
	case !w.soleP && groupTime < oneP:
		runtime.GOMAXPROCS(1)
		w.soleP = true
	case w.soleP && groupTime > manyP:
		w.restoreProcs()
	}
}

// restoreProcs gives the process back the Ps adaptProcs took, as the worker ends.
func (w *worker) restoreProcs() {
	if w.soleP {
		runtime.GOMAXPROCS(w.procs)
		w.soleP = false
	}
}

// pin keeps the worker's goroutine on one OS thread while cases are slow:
// Python's thread state, its caches and the CPU's then stay put from batch
// to batch (difflib: with soloBudget, 0.98x the plain script against
// 1.10-1.20x unpinned). Fast metrics run unpinned: a pinned goroutine's
// hand-offs cost a thread switch each.
func (w *worker) pin(on bool) {
	if w.main || on == w.pinned {
		return
	}
	if on {
		runtime.LockOSThread()
	} else {
		runtime.UnlockOSThread()
	}
	w.pinned = on
}

func (s *scheduler) removeWorker(w *worker) {
	s.poolMu.Lock()
	defer s.poolMu.Unlock()
	for i, x := range s.pool {
		if x == w {
			s.pool = append(s.pool[:i], s.pool[i+1:]...)
			return
		}
	}
}

func (e *Engine) workerLoop(w *worker) {
	defer e.workers.Done()
	defer e.removeWorker(w)
	defer w.caller.Close()
	defer w.slot.Close()
	defer w.pin(false)
	defer w.restoreProcs()
	jobs := make([]*scoreJob, 0, maxBatch)
	for {
		first := e.popFront()
		if first == nil {
			idle := time.Now()
			first = e.poll()
			for first == nil {
				select {
				case first = <-e.jobs:
				case <-e.frontReady:
					first = e.popFront()
				case <-e.quit:
					return
				}
			}
			e.noteIdle(time.Since(idle))
		}
		w.pin(e.slowCases())
		if first.group != nil && len(first.jobs) <= e.batchSize() {
			e.runParcel(w, first)
		} else if jobs = e.take(first, jobs[:0]); len(jobs) > 0 {
			e.runJobs(w, jobs)
		}
		if w.retired.Load() {
			return
		}
		group := e.groupTime()
		w.adaptProcs(group)
		if w.pinned && (!w.main || (group > mainYieldOver && !w.soleP)) {
			// The batch readied the stream's goroutine onto this P. Let it
			// run elsewhere before the next long cgo call: with work left in
			// the P's queue, sysmon takes the P from the call and then polls
			// every 20 us for the next millisecond. Not on the main thread
			// between short batches, nor on one P: its goroutine is locked
			// there, so the yield hands the P to another thread and back
			// (see mainYieldOver).
			runtime.Gosched()
		}
	}
}

// spin polls ready for a while before the waiter parks (see poll), unless
// the engine does not spin (Options.NoSpin).
func (e *Engine) spin(done func() bool) bool {
	if e.noSpin {
		return done()
	}
	return spinUntil(done)
}

// spinUntil polls done for up to spinFor, yielding the processor now and
// then; it reports whether done came true.
//
// Past yieldAfter it also yields the CPU to the kernel: a stream's two
// threads that the kernel put on one vCPU then take turns instead of each
// spinning out its time slice while the other waits (1.9 µs per case
// pinned to one CPU without this, 0.7 µs with it).
func spinUntil(done func() bool) bool {
	start := time.Now()
	deadline := start.Add(spinFor)
	for i := 0; !done(); i++ {
		if i%64 == 63 {
			now := time.Now()
			if now.After(deadline) {
				return false
			}
			runtime.Gosched()
			if now.Sub(start) > yieldAfter {
				osYield()
			}
		}
	}
	return true
}

// slowCases reports that cases take long enough (model calls, a metric doing
// real work) that nothing waiting for them should spin: a spinning waiter
// takes CPU from the threads scoring them, and a wake-up is cheap
// beside a case.
//
// A group whose cases take longer than spinFor in all counts: waiting on it
// by spinning would burn most of a core for nothing (a wake-up costs µs), and
// in a pool of worker processes that core is another worker's.
func (s *scheduler) slowCases() bool { return s.groupTime() > spinFor }

// groupTime is how long a full group of cases takes, at the average case's pace.
func (s *scheduler) groupTime() time.Duration { return time.Duration(s.avgCase.Load()) * maxBatch }

// verySlowCases reports cases slow enough (a model call, a few ms of real
// work) that their results are worth handing on one by one.
func (s *scheduler) verySlowCases() bool { return time.Duration(s.avgCase.Load()) > spinFor }

// noteIdle adds how long a worker waited for work to the moving average
// poll consults. A wait longer than spinFor is a pause between streams, not
// the pace of one, and is left out.
func (s *scheduler) noteIdle(d time.Duration) {
	if d > spinFor {
		return
	}
	if old := time.Duration(s.avgIdle.Load()); old > 0 {
		d = (old*7 + d) / 8
	}
	s.avgIdle.Store(int64(d)) // racing workers may drop an update; it is only a hint
}

// startCwd is the working directory when the engine package started. The
// working directory belongs to the whole process, Go host included; a
// metric's os.chdir is undone after its batch so the host's relative paths
// keep their meaning. Python's chdir calls are seen by the audit hook, so
// the common batch costs no system call here.
var startCwd, _ = syscall.Getwd()

func restoreCwd() {
	if startCwd == "" || !cpython.CwdMoved() {
		return
	}
	if cwd, err := syscall.Getwd(); err == nil && cwd != startCwd {
		syscall.Chdir(startCwd)
	}
}
