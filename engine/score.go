package engine

import (
	"context"
	"fmt"
	"iter"

	"github.com/skynetml/skynet/cpython"
)

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
	j, r, ok := e.submit(ctx, c)
	if !ok {
		return r
	}
	return e.wait(ctx, c, j)
}

// submit encodes and queues a case; without ok, r is its result already.
func (e *Engine) submit(ctx context.Context, c Case) (*scoreJob, Result, bool) {
	if c.invalid != nil {
		return nil, failed(c.ID, KindInput, c.invalid.Error()), false
	}
	if e.closed.Load() {
		return nil, failed(c.ID, KindCanceled, "engine is closed"), false
	}
	args, err := e.encodeCase(c)
	if err != nil {
		return nil, failed(c.ID, KindInput, fmt.Sprintf("%s: %v", caseName(c.ID), err)), false
	}
	obs := c.Observation
	j := newJob(args, &obs)
	select {
	case e.jobs <- j:
		return j, Result{}, true
	case <-ctx.Done():
		return nil, failed(c.ID, KindCanceled, fmt.Sprintf("%s: %v before score was called", caseName(c.ID), ctx.Err())), false
	case <-e.quit:
		return nil, failed(c.ID, KindCanceled, "engine is closed"), false
	}
}

// wait returns the job's result; a cancelled ctx or a closing engine ends the
// wait at once with a canceled result.
func (e *Engine) wait(ctx context.Context, c Case, j *scoreJob) Result {
	select {
	case o := <-j.done:
		return e.result(c, o)
	case <-ctx.Done():
		e.cancel(j, outcome{kind: KindCanceled, why: fmt.Sprintf("score cancelled: %v", ctx.Err())})
	case <-e.quit:
		e.cancel(j, outcome{kind: KindCanceled, why: "engine is closed"})
	}
	return e.result(c, <-j.done)
}

// ScoreAll scores a stream of cases with up to window cases in flight
// (0: a default that keeps every worker's batches full) and yields each
// result with its case's index, in input order. Stopping the iteration early
// cancels the cases still in flight.
func (e *Engine) ScoreAll(ctx context.Context, cases iter.Seq[Case], window int) iter.Seq2[int, Result] {
	if window <= 0 {
		window = 4 * maxBatch * max(1, len(e.pool))
	}
	return func(yield func(int, Result) bool) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		type pending struct {
			c Case
			j *scoreJob
			r Result
		}
		order := make(chan pending, window)
		go func() {
			defer close(order)
			for c := range cases {
				j, r, ok := e.submit(ctx, c)
				if !ok {
					j = nil
				}
				select {
				case order <- pending{c: c, j: j, r: r}:
				case <-ctx.Done():
					if j != nil {
						e.cancel(j, outcome{kind: KindCanceled, why: "stopped"})
					}
					return
				}
			}
		}()
		i := 0
		for p := range order {
			r := p.r
			if p.j != nil {
				r = e.wait(ctx, p.c, p.j)
			}
			if !yield(i, r) {
				cancel()
				for p := range order { // stop what is still queued
					if p.j != nil {
						e.cancel(p.j, outcome{kind: KindCanceled, why: "stopped"})
					}
				}
				return
			}
			i++
		}
	}
}

func logsOf(o outcome) string {
	if o.cut {
		return o.logs + "\n[skynet: output truncated]\n"
	}
	return o.logs
}

// result turns a job's outcome into a Result.
func (e *Engine) result(c Case, o outcome) Result {
	if o.kind != "" {
		r := failed(c.ID, o.kind, fmt.Sprintf("%s: %s", caseName(c.ID), o.why))
		r.Duration = o.elapsed
		return r
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
