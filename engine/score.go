package engine

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/skynetml/skynet/cpython"
)

// interruptGrace is how long a timed-out call gets to unwind after the
// interrupt before its worker is given up on and replaced.
const interruptGrace = 500 * time.Millisecond

// Job states.
const (
	jobQueued int32 = iota
	jobRunning
	jobAbandoned // cancelled before it started: the worker skips it
)

// scoreJob is one score call in flight.
type scoreJob struct {
	engine  *Engine
	args    []byte
	obs     *Observation
	token   uint64
	state   atomic.Int32
	started chan *worker // receives the worker that runs it
	done    chan outcome // buffered: a late outcome is dropped, never blocks a worker
}

// outcome is what a worker hands back for a score call.
type outcome struct {
	value    any
	err      error
	logs     string
	cut      bool
	elapsed  time.Duration
	panicked string
}

func (j *scoreJob) finish(o outcome) {
	select {
	case j.done <- o:
	default:
	}
}

func (j *scoreJob) run(w *worker) {
	if !j.state.CompareAndSwap(jobQueued, jobRunning) {
		return
	}
	j.started <- w
	start := time.Now()
	w.slot.Set(j.obs)
	v, err := w.caller.Call(j.engine.score, j.args, j.engine.nargs, j.token, true, w.slot.Handle())
	w.slot.Set(nil)
	o := outcome{value: v, err: err, elapsed: time.Since(start)}
	o.logs, o.cut = w.caller.Logs()
	j.finish(o)
}

// encodeCase builds the argument buffer for score, checking the shapes the
// contract promises the metric: input a dict, expected a dict or None.
func (e *Engine) encodeCase(c Case) ([]byte, error) {
	var enc cpython.Encoder
	if c.Input == nil {
		return nil, fmt.Errorf("input is missing: it must be a dict of the case's input fields")
	}
	if err := enc.Value(c.Input); err != nil {
		return nil, fmt.Errorf("input: %w", err)
	}
	if b := enc.Bytes(); b[0] != 'd' {
		return nil, fmt.Errorf("input must be a dict of the case's input fields, got %s", tagName(b[0]))
	}
	if err := enc.Value(c.Output); err != nil {
		return nil, fmt.Errorf("output: %w", err)
	}
	if e.nargs == 3 {
		mark := len(enc.Bytes())
		if err := enc.Value(c.Expected); err != nil {
			return nil, fmt.Errorf("expected: %w", err)
		}
		if t := enc.Bytes()[mark]; t != 'd' && t != 'N' {
			return nil, fmt.Errorf("expected must be a dict of output columns or null, got %s", tagName(t))
		}
	}
	return enc.Bytes(), nil
}

func tagName(t byte) string {
	switch t {
	case 'N':
		return "null"
	case 'T', 'F':
		return "a bool"
	case 'i', 'I', 'f':
		return "a number"
	case 's':
		return "a string"
	case 'l', 't':
		return "a list"
	case 'd':
		return "a dict"
	}
	return "bytes"
}

// Score calls score on one case. Safe for concurrent use. The timeout runs
// from when a worker starts the call; waiting for a free worker is bounded
// only by ctx.
func (e *Engine) Score(ctx context.Context, c Case) Result {
	if e.closed.Load() {
		return failed(c.ID, KindCanceled, "engine is closed")
	}
	args, err := e.encodeCase(c)
	if err != nil {
		return failed(c.ID, KindInput, fmt.Sprintf("%s: %v", caseName(c.ID), err))
	}
	obs := c.Observation
	j := &scoreJob{engine: e, args: args, obs: &obs, token: cpython.NewToken(),
		started: make(chan *worker, 1), done: make(chan outcome, 1)}
	select {
	case e.jobs <- j:
	case <-ctx.Done():
		return failed(c.ID, KindCanceled, fmt.Sprintf("%s: %v before score was called", caseName(c.ID), ctx.Err()))
	case <-e.quit:
		return failed(c.ID, KindCanceled, "engine is closed")
	}
	var w *worker
	select {
	case w = <-j.started:
	case o := <-j.done: // a panic before start
		return e.result(c, o)
	case <-ctx.Done():
		if j.state.CompareAndSwap(jobQueued, jobAbandoned) {
			return failed(c.ID, KindCanceled, fmt.Sprintf("%s: %v before score was called", caseName(c.ID), ctx.Err()))
		}
		w = <-j.started
	}
	timer := time.NewTimer(e.timeout)
	defer timer.Stop()
	var kind ErrorKind
	var why string
	select {
	case o := <-j.done:
		return e.result(c, o)
	case <-timer.C:
		kind, why = KindTimeout, fmt.Sprintf("score timed out after %s", e.timeout)
	case <-ctx.Done():
		kind, why = KindCanceled, fmt.Sprintf("score cancelled: %v", ctx.Err())
	}
	// Interrupt may wait for the GIL behind C code that never releases it,
	// so it runs on its own goroutine.
	go cpython.Interrupt(j.token)
	r := failed(c.ID, kind, fmt.Sprintf("%s: %s", caseName(c.ID), why))
	r.Duration = e.timeout
	select {
	case o := <-j.done:
		r.Logs = logsOf(o)
	case <-time.After(interruptGrace):
		// Blocked outside Python bytecode (sleep, socket, C code): give up on
		// this worker so capacity holds; it exits once its call returns.
		if !w.retired.Swap(true) && !e.closed.Load() {
			if err := e.startWorker(); err != nil {
				r.Err.Message += fmt.Sprintf(" (and no replacement worker could start: %v)", err)
			}
		}
	}
	return r
}

func logsOf(o outcome) string {
	if o.cut {
		return o.logs + "\n[skynet: output truncated]\n"
	}
	return o.logs
}

// result turns a worker's outcome into a Result.
func (e *Engine) result(c Case, o outcome) Result {
	if o.panicked != "" {
		return failed(c.ID, KindException, fmt.Sprintf("%s: internal error: %s", caseName(c.ID), o.panicked))
	}
	r := Result{ID: c.ID, Logs: logsOf(o), Duration: o.elapsed}
	if o.err != nil {
		pe, ok := cpython.AsError(o.err)
		if !ok {
			r.Err = &CaseError{Kind: KindException, Message: o.err.Error()}
			r.Feedback = r.Err.Message
			return r
		}
		// The optimizer sees type and message only; the traceback is the user's.
		r.Err = &CaseError{Kind: KindException, Message: pe.Error(), Traceback: pe.Traceback}
		r.Feedback = pe.Error()
		return r
	}
	rv, err := validateReturn(o.value)
	if err != nil {
		msg := fmt.Sprintf("%s: %s: %v", caseName(c.ID), CheckReturnValue, err)
		r.Err = &CaseError{Kind: KindContract, Message: msg}
		r.Feedback = msg
		return r
	}
	r.Score, r.Feedback, r.Scores, r.Extra, r.Warnings = rv.score, rv.feedback, rv.scores, rv.extra, rv.warnings
	return r
}
