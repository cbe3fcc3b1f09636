package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"

	"github.com/skynetml/skynet/cpython"
)

// encodeCase encodes score's arguments, checking the shapes the contract
// promises the metric: input a dict, expected a dict or None. Repeated JSON
// texts are transcoded once (ArgCache.JSON).
// A program case (program) has no caller output to encode: run makes it.
func (e *Engine) encodeCase(c Case, j *scoreJob, program bool) error {
	if c.Input == nil {
		return fmt.Errorf("input is missing: it must be a dict of the case's input fields")
	}
	values := [3]any{c.Input, c.Output, c.Expected}
	names := [3]string{"input", "output", "expected"}
	for k := 0; k < e.nargs; k++ {
		var err error
		if k == 1 && program {
			continue
		}
		if k == 1 {
			// Outputs differ from candidate to candidate: caching them would
			// only fill the cache, so they are always built afresh.
			var enc cpython.Encoder
			err = enc.Value(values[k])
			j.args[k], j.ids[k] = enc.Bytes(), -1
		} else if raw, ok := values[k].(json.RawMessage); ok {
			j.args[k], j.ids[k], err = e.cache.JSON(raw)
		} else {
			var enc cpython.Encoder
			if err = enc.Value(values[k]); err == nil {
				j.args[k] = enc.Bytes()
				j.ids[k] = e.cache.ID(j.args[k])
			}
		}
		if err != nil {
			return fmt.Errorf("%s: %w", names[k], err)
		}
	}
	if t := j.args[0][0]; t != 'd' {
		return fmt.Errorf("input must be a dict of the case's input fields, got %s", tagName(t))
	}
	if e.nargs == 3 {
		if t := j.args[2][0]; t != 'd' && t != 'N' {
			return fmt.Errorf("expected must be a dict of output columns or null, got %s", tagName(t))
		}
	}
	return nil
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
	g := newGroup(1)
	e.prepare(ctx, &g.jobs[0], c, nil)
	if !e.submit(ctx, g) {
		return e.result(&g.jobs[0])
	}
	e.wait(ctx, g)
	return e.result(&g.jobs[0])
}

// prepare encodes a case into j; a case that cannot be encoded gets its
// input error delivered at once.
func (e *Engine) prepare(ctx context.Context, j *scoreJob, c Case, artifact *prepared) {
	j.id, j.ctx = c.ID, ctx
	if c.invalid != nil {
		r := failed(c.ID, KindInput, c.invalid.Error())
		j.deliver(outcome{final: &r})
		return
	}
	if err := e.encodeCase(c, j, artifact != nil); err != nil {
		r := failed(c.ID, KindInput, fmt.Sprintf("%s: %v", caseName(c.ID), err))
		j.deliver(outcome{final: &r})
		return
	}
	j.obs = c.Observation
	if artifact != nil {
		// A program case: (artifact, input[, expected]); the output comes
		// from run, and the observation from measuring it, not the caller.
		j.program = true
		j.args = [3][]byte{artifact.args, j.args[0], j.args[2]}
		j.ids = [3]int32{artifact.id, j.ids[0], j.ids[2]}
		zero, none := 0.0, int64(0)
		in, out := none, none
		j.obs = Observation{CostUSD: &zero, ModelCalls: &none, InputTokens: &in, OutputTokens: &out}
	}
}

// submit queues a group's undelivered jobs; without ok, each already has
// its outcome (an input error, or canceled).
func (e *Engine) submit(ctx context.Context, g *group) bool {
	parcel := make([]*scoreJob, 0, len(g.jobs))
	for i := range g.jobs {
		if !g.jobs[i].delivered.Load() {
			parcel = append(parcel, &g.jobs[i])
		}
	}
	if len(parcel) == 0 {
		return false
	}
	stop := func(why string) bool {
		for _, j := range parcel {
			j.deliver(outcome{kind: KindCanceled, why: why})
		}
		return false
	}
	if e.closed.Load() {
		return stop("engine is closed")
	}
	select {
	case e.jobs <- parcel:
		return true
	case <-ctx.Done():
		return stop(fmt.Sprintf("%v before score was called", ctx.Err()))
	case <-e.quit:
		return stop("engine is closed")
	}
}

// wait returns once every job of the group has its outcome; a cancelled ctx
// or a closing engine ends the wait at once with canceled outcomes.
func (e *Engine) wait(ctx context.Context, g *group) {
	var o outcome
	select {
	case <-g.done:
		return
	case <-ctx.Done():
		o = outcome{kind: KindCanceled, why: fmt.Sprintf("score cancelled: %v", ctx.Err())}
	case <-e.quit:
		o = outcome{kind: KindCanceled, why: "engine is closed"}
	}
	for i := range g.jobs {
		e.cancel(&g.jobs[i], o)
	}
	<-g.done
}

// ScoreAll scores a stream of cases and yields each result with its case's
// index, in input order. Cases travel in groups of up to 64, with up to
// window cases in flight (0: a default that keeps every worker busy).
// Stopping the iteration early cancels the cases still in flight.
func (e *Engine) ScoreAll(ctx context.Context, cases iter.Seq[Case], window int) iter.Seq2[int, Result] {
	return e.stream(ctx, cases, window, nil, nil)
}

// stream is ScoreAll and, with an artifact, Evaluate.
func (e *Engine) stream(ctx context.Context, cases iter.Seq[Case], window int, artifact *prepared, artErr error) iter.Seq2[int, Result] {
	if window <= 0 {
		window = 16 * maxBatch * max(1, e.workerCount())
	}
	return func(yield func(int, Result) bool) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		order := make(chan *group, max(1, window/maxBatch))
		go func() {
			defer close(order)
			var buf []Case
			flush := func() bool {
				g := newGroup(len(buf))
				for i, c := range buf {
					if artErr != nil {
						r := failed(c.ID, KindInput, fmt.Sprintf("artifact: %v", artErr))
						g.jobs[i].deliver(outcome{final: &r})
						continue
					}
					e.prepare(ctx, &g.jobs[i], c, artifact)
				}
				buf = buf[:0]
				e.submit(ctx, g)
				select {
				case order <- g:
					return true
				case <-ctx.Done():
					for i := range g.jobs {
						e.cancel(&g.jobs[i], outcome{kind: KindCanceled, why: "stopped"})
					}
					return false
				}
			}
			for c := range cases {
				buf = append(buf, c)
				if len(buf) == maxBatch && !flush() {
					return
				}
			}
			if len(buf) > 0 {
				flush()
			}
		}()
		i := 0
		for g := range order {
			e.wait(ctx, g)
			for k := range g.jobs {
				if !yield(i, e.result(&g.jobs[k])) {
					cancel()
					for g := range order { // stop what is still queued
						e.wait(ctx, g)
					}
					return
				}
				i++
			}
		}
	}
}

// value decodes what the call returned, or its Python error.
func (o outcome) value() (any, error) {
	if o.err != nil {
		return nil, o.err
	}
	if o.raw == nil {
		return nil, fmt.Errorf("internal error: no outcome")
	}
	return cpython.DecodeOutcome(o.ok, o.raw)
}

func logsOf(o outcome) string {
	if o.cut {
		return o.logs + "\n[skynet: output truncated]\n"
	}
	return o.logs
}

// result turns a finished job's outcome into a Result.
func (e *Engine) result(j *scoreJob) Result {
	r := e.outcomeResult(j)
	r.Observation = j.obs
	if j.program && j.out.runTime >= 0 && j.out.raw != nil {
		ms := float64(j.out.runTime) / 1e6
		r.Observation.RunMS = &ms
	}
	if j.out.output != nil {
		if v, err := cpython.Decode(j.out.output); err == nil {
			if jv, why := jsonValue(v, 0); why == "" {
				r.Output = jv
			} else {
				r.Output = describe(v)
			}
		}
	}
	return r
}

func (e *Engine) outcomeResult(j *scoreJob) Result {
	o := j.out
	if o.final != nil {
		return *o.final
	}
	id := j.id
	if o.kind != "" {
		r := failed(id, o.kind, fmt.Sprintf("%s: %s", caseName(id), o.why))
		r.Duration = o.elapsed
		return r
	}
	r := Result{ID: id, Logs: logsOf(o), Duration: o.elapsed}
	if o.runErr {
		pe := cpython.AsErrorValue(o.raw)
		r.Err = &CaseError{Kind: KindRun, Message: fmt.Sprintf("%s: run raised %s", caseName(id), pe.Error()), Traceback: pe.Traceback}
		r.Feedback = "run raised " + pe.Error()
		return r
	}
	value, err := o.value()
	if err != nil {
		o.err = err
	}
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
	if p, ok := value.(*cpython.ScorePair); ok { // the common shape, already checked in C
		r.Score, r.Feedback, r.Scores = p.Score, p.Feedback, p.Scores
		return r
	}
	rv, err := validateReturn(value)
	if err != nil {
		msg := fmt.Sprintf("%s: %s: %v", caseName(id), CheckReturnValue, err)
		r.Err = &CaseError{Kind: KindContract, Message: msg}
		r.Feedback = msg
		return r
	}
	r.Score, r.Feedback, r.Scores, r.Extra, r.Warnings = rv.score, rv.feedback, rv.scores, rv.extra, rv.warnings
	return r
}
