package engine

// An `async def score` runs on one event loop per engine (aio.py): the
// engine's one worker runs the loop on its thread (the main thread, with
// Options.MainThread) and Threads is how many cases are in flight on it.
// The loop asks for work when a wake-up byte arrives on a pipe or a case
// ends (Poll); a model call from skynet.allm() runs on a goroutine and its
// reply is queued for the loop the same way. Each case's time limit is the
// loop's (the task is cancelled); a loop that stops turning (a coroutine
// that blocks) is the watchdog's, as a stuck batch is.

import (
	"context"
	_ "embed"
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

//go:embed aio.py
var aioSource string

var aioModule = &embeddedModule{name: "_skynet_aio", file: "<skynet aio>", source: aioSource, what: "the event loop driver"}

// aioDriverOf returns the driver's serve function. Runs with the GIL.
func aioDriverOf(g *cpython.GIL) (*cpython.Object, error) {
	mod, err := aioModule.get(g)
	if err != nil {
		return nil, err
	}
	return g.Attr(mod, "serve")
}

// aioLoop is the engine's side of the event loop.
type aioLoop struct {
	e      *Engine
	w      *worker
	driver *cpython.Object
	wakeR  int // the pipe's ends: the loop reads wakeR
	wakeW  int
	token  uint64 // the loop call's, for Interrupt
	woken  atomic.Bool

	mu      sync.Mutex
	cases   map[uint64]*aioCase // in flight, by token
	replies []aioReply          // allm() replies the loop has not taken
	stop    bool
	next    uint64
	turned  chan struct{} // closed (and replaced) each time the loop polls or ends a case
}

type aioCase struct {
	j           *scoreJob
	start       time.Time
	interrupted bool
}

type aioReply struct {
	id      uint64
	text    string
	failed  bool
	noModel bool
}

// startAio starts the engine's one worker, which runs the event loop.
func (e *Engine) startAio(driver *cpython.Object) error {
	var fds [2]int
	if err := syscall.Pipe2(fds[:], syscall.O_NONBLOCK|syscall.O_CLOEXEC); err != nil {
		return fmt.Errorf("engine: event loop wake-up pipe: %w", err)
	}
	c, err := cpython.NewCaller(e.logsLimit)
	if err != nil {
		syscall.Close(fds[0])
		syscall.Close(fds[1])
		return fmt.Errorf("engine: %w", err)
	}
	a := &aioLoop{e: e, driver: driver, wakeR: fds[0], wakeW: fds[1], token: cpython.NewTokens(1),
		cases: map[uint64]*aioCase{}, turned: make(chan struct{})}
	w := &worker{py: e.py, caller: c, main: e.mainThread, pinned: e.mainThread}
	w.slot = skynetmod.NewSlot()
	w.slot.SetModel(a.model)
	w.slot.SetStart(a.startCall)
	w.slot.SetLookup(a.observation)
	a.w = w
	e.aio = a
	e.workers.Add(1)
	if !e.mainThread {
		go a.run()
		return nil
	}
	if !cpython.OnMainThread(a.run) {
		e.workers.Done()
		a.close()
		return errors.New("engine: MainThread: the main thread already scores for another engine (one per process at a time)")
	}
	return nil
}

// run serves the loop until the engine closes; a loop that ends on its own
// (an error escaped the driver) fails its cases and starts again.
func (a *aioLoop) run() {
	defer a.e.workers.Done()
	defer a.close()
	if !a.w.main {
		runtime.LockOSThread() // the loop's Python thread state is this thread's
		defer runtime.UnlockOSThread()
	}
	for {
		err := a.w.caller.ServeAsync(cpython.AsyncOptions{Driver: a.driver, Score: a.w.py.score, Run: a.w.py.run,
			Wake: a.wakeR, Limit: a.e.threads, Timeout: a.e.timeout, RunTimeout: a.e.runTimeout, Token: a.token,
			Context: a.w.slot.Handle()}, a)
		restoreCwd()
		a.mu.Lock()
		stopped := a.stop
		left := a.cases
		a.cases = map[uint64]*aioCase{}
		a.mu.Unlock()
		o := closedOutcome
		if !stopped {
			msg := "the event loop stopped"
			if err != nil {
				msg += ": " + err.Error()
			}
			o = outcome{err: errors.New(msg)}
		}
		for _, c := range left {
			if c.j.deliver(o) {
				a.e.scoreCalls.Add(1)
			}
		}
		if stopped {
			return
		}
	}
}

func (a *aioLoop) close() {
	a.w.slot.Close()
	a.w.caller.Close()
	syscall.Close(a.wakeR)
	syscall.Close(a.wakeW)
}

// wake tells the loop there is something to poll; one byte is enough
// until it polls.
func (a *aioLoop) wake() {
	if a.woken.CompareAndSwap(false, true) {
		syscall.Write(a.wakeW, []byte{1}) // EAGAIN: the pipe is full of wake-ups already
	}
}

// shutdown makes the loop stop at its next poll.
func (a *aioLoop) shutdown() {
	a.mu.Lock()
	a.stop = true
	a.mu.Unlock()
	a.woken.Store(false)
	a.wake()
}

// Poll hands the loop the replies that came in and up to room queued cases.
func (a *aioLoop) Poll(room int, f *cpython.AsyncFeed) bool {
	a.woken.Store(false)
	a.mu.Lock()
	replies, stop := a.replies, a.stop
	a.replies = nil
	a.noteTurn()
	a.mu.Unlock()
	for _, r := range replies {
		f.Reply(r.id, r.text, r.failed, r.noModel)
	}
	if stop {
		return true
	}
	e := a.e
	for f.Cases() < room {
		p := e.popFront()
		if p == nil {
			select {
			case p = <-e.jobs:
			default:
			}
		}
		if p == nil {
			break
		}
		for i, j := range p.jobs {
			if f.Cases() == room {
				e.requeue(p.jobs[i:])
				break
			}
			if !j.state.CompareAndSwap(jobQueued, jobBatched) || j.delivered.Load() {
				continue
			}
			a.add(j, f)
		}
	}
	return false
}

// add puts job j in the feed with its arguments as its submitter encoded them.
func (a *aioLoop) add(j *scoreJob, f *cpython.AsyncFeed) {
	from := &j.g.p.args
	var args [3][]byte
	n := a.e.nargs
	for k := 0; k < n; k++ {
		at := int(j.argAt) + k
		end := len(from.Buf)
		if at+1 < len(from.Offsets) {
			end = int(from.Offsets[at+1])
		}
		args[k] = from.Buf[from.Offsets[at]:end]
	}
	a.mu.Lock()
	a.next++
	token := a.next
	a.cases[token] = &aioCase{j: j, start: time.Now()}
	a.mu.Unlock()
	f.Case(token, args[:n]...)
}

// noteTurn wakes whoever waits for the loop to make progress. With a.mu.
func (a *aioLoop) noteTurn() {
	close(a.turned)
	a.turned = make(chan struct{})
}

// Done delivers a case's result.
func (a *aioLoop) Done(token uint64, v cpython.SlotView, timedOut bool) {
	a.mu.Lock()
	c := a.cases[token]
	delete(a.cases, token)
	a.noteTurn()
	a.mu.Unlock()
	if c == nil {
		return
	}
	j := c.j
	if !v.RunFailed {
		a.e.scoreCalls.Add(1)
	}
	// A case's time on the loop, awaits included, is how long the stream
	// waits for it: a judge's 50 ms must not have the reader spin.
	per := v.Elapsed
	if old := time.Duration(a.e.avgCase.Load()); old > 0 {
		per = (old*63 + per) / 64
	}
	a.e.avgCase.Store(int64(per))
	if timedOut {
		j.deliver(outcome{kind: KindTimeout, why: fmt.Sprintf("score timed out after %s", a.e.timeout),
			elapsed: v.Elapsed, runTime: v.RunTime, logs: string(v.Logs), cut: v.Cut})
		return
	}
	if j.deliverSlot(v, a.e.str) {
		j.ready.Store(true)
		j.g.settle(1, true)
	}
}

// caseOf is the case in flight with this token, or nil.
func (a *aioLoop) caseOf(token int) *aioCase {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cases[uint64(token)]
}

func (a *aioLoop) observation(token int) *Observation {
	if c := a.caseOf(token); c != nil {
		return &c.j.obs
	}
	return nil
}

// model makes a model call for the case with this token, bounded by its
// caller's context and its remaining time, as callModel does for a batch.
func (a *aioLoop) model(token int, inRun bool, req llm.Request) (string, error) {
	e := a.e
	ctx, remaining, role := context.Background(), e.timeout, llm.RoleMetric
	if inRun {
		remaining, role = e.runTimeout, llm.RoleTask
	}
	c := a.caseOf(token)
	if c != nil {
		if c.j.ctx != nil {
			ctx = c.j.ctx
		}
		remaining -= time.Since(c.start)
	}
	ctx, cancel := context.WithTimeout(ctx, remaining+modelCallSlack)
	defer cancel()
	reply, err := e.llm.Call(ctx, role, req)
	if inRun && c != nil {
		a.mu.Lock() // the loop's thread may read the observation meanwhile
		c.j.account(reply, err)
		a.mu.Unlock()
	}
	return reply.Text, err
}

// startCall makes an allm() call on a goroutine and queues its reply.
func (a *aioLoop) startCall(call uint64, token int, inRun bool, req llm.Request) {
	go func() {
		text, err := a.model(token, inRun, req)
		r := aioReply{id: call, text: text}
		if err != nil {
			var nm *llm.NoModelError
			r.failed, r.noModel, r.text = true, errors.As(err, &nm), "skynet.allm: "+err.Error()
		}
		a.mu.Lock()
		a.replies = append(a.replies, r)
		a.mu.Unlock()
		a.wake()
	}()
}

// watch times out cases the loop has not ended well past their time limit:
// the loop has stopped turning (a coroutine blocked it). The cases get their
// timeout now; the loop is interrupted, and when that does not free it, the
// engine reports a Wedge (a pool then replaces the process). It says how long
// until a case may next be due. Watchdog only.
func (a *aioLoop) watch() time.Duration {
	e := a.e
	limit := e.timeout + e.runTimeout + interruptGrace
	now := time.Now()
	next := notDue
	a.mu.Lock()
	var late []*aioCase
	for _, c := range a.cases {
		if ran := now.Sub(c.start); ran > limit {
			late = append(late, c)
		} else {
			next = min(next, limit-ran)
		}
	}
	turned := a.turned
	a.mu.Unlock()
	for _, c := range late {
		c.j.deliver(outcome{kind: KindTimeout, why: fmt.Sprintf("score timed out after %s", e.timeout), elapsed: now.Sub(c.start)})
		if !c.interrupted {
			c.interrupted = true
			go cpython.Interrupt(a.token)
			next = min(next, interruptGrace)
			continue
		}
		if ran := now.Sub(c.start); ran > limit+interruptGrace {
			e.noteWedge(&wedge{Wedge: Wedge{CaseID: c.j.id, Since: c.start.Add(e.timeout), HoldsGIL: true}, released: turned})
		} else {
			next = min(next, limit+interruptGrace-ran)
		}
	}
	return next
}
