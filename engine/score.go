package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"

	"github.com/skynetml/skynet/cpython"
)

// encodeCase appends the case's call arguments to its group's parcel (see
// parcel.args), checking the shapes the contract promises the metric: input
// a dict, expected a dict or None. Repeated JSON texts are transcoded once
// (ArgCache.JSON). A program case (artifact set) calls run(artifact, input)
// for the output, so its arguments are (artifact, input[, expected]).
// On error nothing of the case is left in the parcel.
func (e *Engine) encodeCase(c *Case, j *scoreJob, artifact *prepared, memo *jsonMemo) error {
	a := &j.g.p.args
	mark, marks := len(a.Buf), len(a.Offsets)
	j.argAt = int32(marks)
	err := e.encodeArgs(c, a, artifact, memo)
	if err != nil {
		a.Truncate(mark, marks)
	}
	return err
}

func (e *Engine) encodeArgs(c *Case, a *cpython.BatchArgs, artifact *prepared, memo *jsonMemo) error {
	if c.Input == nil {
		return fmt.Errorf("input is missing: it must be a dict of the case's input fields")
	}
	if artifact != nil {
		a.Offsets = append(a.Offsets, uint64(len(a.Buf)))
		a.IDs = append(a.IDs, artifact.id)
		a.Buf = append(a.Buf, artifact.args...)
	}
	if err := e.appendArg(a, c.Input, memo, argInput); err != nil {
		return err
	}
	if artifact == nil {
		if err := e.appendArg(a, c.Output, memo, argOutput); err != nil {
			return err
		}
	}
	if e.nargs == 3 {
		return e.appendArg(a, c.Expected, memo, argExpected)
	}
	return nil
}

// The arguments of score, named in errors by argNames.
const (
	argInput = iota
	argOutput
	argExpected
)

var argNames = [...]string{"input", "output", "expected"}

// appendArg appends one argument value with its ArgCache id.
func (e *Engine) appendArg(a *cpython.BatchArgs, v any, memo *jsonMemo, arg int) error {
	start := len(a.Buf)
	id := int32(-1)
	var err error
	if enc, ok := v.(*cpython.Encoded); ok && enc != nil && !enc.IsZero() {
		// Transcoded where the case was read (a worker's case lines).
		if arg == argOutput {
			a.Buf, err = cpython.AppendValue(a.Buf, enc)
		} else {
			e.cache.AppendEncoded(a, enc) // its id comes when the group is submitted
		}
	} else if raw, ok := v.(json.RawMessage); ok && arg == argOutput {
		// Outputs are a model's text, nearly never the same twice: looking
		// one up costs more (hashing it twice, copying it) than decoding it
		// again in C, so it is transcoded straight into the batch.
		a.Buf, err = cpython.AppendJSON(a.Buf, raw)
	} else if ok {
		a.Buf, id, err = memo.appendEncoded(a.Buf, e.cache, raw)
	} else if a.Buf, err = cpython.AppendValue(a.Buf, v); err == nil {
		id = e.cache.ID(a.Buf[start:])
	}
	if err != nil {
		return fmt.Errorf("%s: %w", argNames[arg], err)
	}
	switch t := a.Buf[start]; {
	case arg == argInput && t != 'd':
		return fmt.Errorf("input must be a dict of the case's input fields, got %s", tagName(t))
	case arg == argExpected && t != 'd' && t != 'N':
		return fmt.Errorf("expected must be a dict of output columns or null, got %s", tagName(t))
	}
	a.Offsets = append(a.Offsets, uint64(start))
	a.IDs = append(a.IDs, id)
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
	g := e.newGroup(1)
	e.prepare(ctx, &g.jobs[0], &c, nil, nil)
	if !e.submit(ctx, g) {
		return e.result(&g.jobs[0])
	}
	e.wait(ctx, g)
	return e.result(&g.jobs[0])
}

// prepare encodes a case into j; a case that cannot be encoded gets its
// input error delivered at once.
func (e *Engine) prepare(ctx context.Context, j *scoreJob, c *Case, artifact *prepared, memo *jsonMemo) {
	j.id, j.ctx, j.obs = c.ID, ctx, c.Observation // an input error's result carries it back too
	if c.invalid != nil {
		r := failed(c.ID, KindInput, c.invalid.Error())
		j.deliver(outcome{final: &r})
		return
	}
	if err := e.encodeCase(c, j, artifact, memo); err != nil {
		r := failed(c.ID, KindInput, fmt.Sprintf("%s: %v", caseName(c.ID), err))
		j.deliver(outcome{final: &r})
		return
	}
	if artifact != nil {
		// The observation of a program case comes from measuring run, not
		// from the caller.
		j.program = true
		zero, none := 0.0, int64(0)
		in, out := none, none
		j.obs = Observation{CostUSD: &zero, ModelCalls: &none, InputTokens: &in, OutputTokens: &out}
	}
}

// ScoreAll scores a stream of cases and yields each result with its case's
// index, in input order. Cases travel in groups of up to 64, with up to
// window cases in flight (0: a default that keeps every worker busy), so it
// reads up to 64 cases ahead of the results yielded even with a small window.
// Stopping the iteration early, or cancelling ctx, cancels the cases still
// in flight; after a cancellation no further cases are read.
func (e *Engine) ScoreAll(ctx context.Context, cases iter.Seq[Case], window int) iter.Seq2[int, Result] {
	return e.stream(ctx, cases, window, nil, nil)
}

// stream is ScoreAll and, with an artifact, Evaluate. It runs on the
// caller's goroutine: it encodes a group, queues it, and yields the results
// of the oldest group once it is done, so the Go side of a stream stays on
// one thread while workers score the groups queued ahead.
func (e *Engine) stream(ctx context.Context, cases iter.Seq[Case], window int, artifact *prepared, artErr error) iter.Seq2[int, Result] {
	if window <= 0 {
		window = 16 * maxBatch * max(1, e.workerCount())
		if e.async {
			window = max(window, 4*e.threads+maxBatch) // the loop's cases in flight, and three times as many queued
		}
	}
	maxGroups := max(1, window/maxBatch)
	return func(yield func(int, Result) bool) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		var inflight []*group // oldest first
		memo := e.getMemo()
		defer e.putMemo(memo)
		next := 0
		// emit yields the oldest group's results; false when the caller stopped.
		emit := func() bool {
			g := inflight[0]
			k := 0
			perJob := e.verySlowCases()
			if !perJob && !e.slowCases() && !e.noSpin {
				perJob = !spinUntil(g.ready) // fast cases: the group is due within µs
			} else if !perJob && ctx.Err() == nil {
				// Cases between (tens of µs to a few ms), or an engine that
				// does not spin, wait for the group: a wake-up a case would
				// cost a context switch each (1.8 a case, 5% of a 200 µs
				// metric). Unless it takes long (a slow case in it): its
				// finished cases then go out first.
				perJob = !e.waitWhole(ctx, g, harvestEvery)
			}
			if !perJob && !e.finishHandedOver(g) {
				// A batch handed over part of g (its budget spent, the
				// rest requeued): what it finished goes out now, not
				// behind a slow case of the rest.
				perJob = true
			}
			if perJob {
				// Each result as it comes, in order: a slow case's group
				// takes long to finish whole.
				pace := newHarvestPace()
				defer pace.stop()
				for ; k < len(g.jobs) && e.waitJob(ctx, g, k, pace); k++ {
					if !yield(next, e.result(&g.jobs[k])) {
						return false // g is still in inflight: the deferred cancel waits for it
					}
					next++
				}
			}
			inflight = inflight[1:]
			e.wait(ctx, g)
			for ; k < len(g.jobs); k++ {
				if !yield(next, e.result(&g.jobs[k])) {
					return false
				}
				next++
			}
			e.recycle(g)
			return true
		}
		defer func() { // stopped early: cancel what is in flight, yielding nothing more
			cancel()
			for _, g := range inflight {
				e.wait(ctx, g)
			}
		}()
		var g *group
		n := 0
		// flush queues the group being built and yields what is done; false
		// when the caller stopped.
		flush := func() bool {
			if n < len(g.jobs) {
				g.shrink(n)
			}
			e.submit(ctx, g)
			inflight = append(inflight, g)
			g, n = nil, 0
			for len(inflight) >= maxGroups || (len(inflight) > 0 && inflight[0].ready()) {
				if !emit() {
					return false
				}
			}
			return true
		}
		for c := range cases {
			if g == nil {
				g = e.newGroup(maxBatch)
			}
			j := &g.jobs[n]
			n++
			if artErr != nil {
				r := failed(c.ID, KindInput, fmt.Sprintf("artifact: %v", artErr))
				j.deliver(outcome{final: &r})
			} else {
				e.prepare(ctx, j, &c, artifact, memo)
			}
			if n == maxBatch && !flush() {
				return
			}
			if ctx.Err() != nil {
				break // cancelled: read no more cases; those read get their results
			}
		}
		if g != nil && !flush() {
			return
		}
		for len(inflight) > 0 {
			if !emit() {
				return
			}
		}
	}
}

// value decodes what the call returned, or its Python error.
func (o *outcome) value() (any, error) {
	if o.err != nil {
		return nil, o.err
	}
	if o.raw == nil {
		return nil, fmt.Errorf("internal error: no outcome")
	}
	return cpython.DecodeOutcome(o.ok, o.raw)
}

func logsOf(o *outcome) string {
	if o.cut {
		return o.logs + "\n[skynet: output truncated]\n"
	}
	return o.logs
}

// result turns a finished job's outcome into a Result.
func (e *Engine) result(j *scoreJob) Result {
	if j.out.scored && !j.program { // the common shape, built in place
		return scoredResult(j)
	}
	r := e.outcomeResult(j)
	r.Observation = j.obs
	if j.program && j.out.runTime >= 0 && (j.out.raw != nil || j.out.scored) { // read from a batch, so run was timed
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

// scoredResult is the Result of a job whose outcome is the common score
// record (outcome.scored).
func scoredResult(j *scoreJob) Result {
	o := &j.out
	return Result{ID: j.id, Score: o.pair.Score, Feedback: o.pair.Feedback, Scores: o.pair.Scores, ScoreNames: o.pair.Names,
		Logs: logsOf(o), Duration: o.elapsed, Observation: j.obs}
}

func (e *Engine) outcomeResult(j *scoreJob) Result {
	o, id := &j.out, j.id
	if o.scored { // a program case's score pair; result builds the others itself
		return scoredResult(j)
	}
	if o.final != nil {
		return *o.final
	}
	if o.kind != "" {
		r := failed(id, o.kind, fmt.Sprintf("%s: %s", caseName(id), o.why))
		r.Duration = o.elapsed
		if o.kind == KindCanceled {
			r.Err.Cause = o.err // what the caller can match with errors.Is
		}
		return r
	}
	r := Result{ID: id, Logs: logsOf(o), Duration: o.elapsed}
	if o.runErr {
		pe := cpython.AsErrorValue(o.raw)
		r.Err = &CaseError{Kind: KindRun, Message: fmt.Sprintf("%s: run raised %s", caseName(id), pe.Error()), Traceback: pe.Traceback}
		r.Feedback = "run raised " + pe.Error()
		return r
	}
	value, err := o.value() // o.err first, when the outcome was decided without a value
	if err != nil {
		pe, ok := cpython.AsError(err)
		if !ok {
			r.Err = &CaseError{Kind: KindException, Message: err.Error()}
			r.Feedback = r.Err.Message
			return r
		}
		// The optimizer sees type and message only; the traceback is the user's.
		r.Err = &CaseError{Kind: KindException, Message: pe.Error(), Traceback: pe.Traceback}
		r.Feedback = pe.Error()
		return r
	}
	rv, err := validateReturn(value)
	if err != nil {
		msg := fmt.Sprintf("%s: %s: %v", caseName(id), CheckReturnValue, err)
		r.Err = &CaseError{Kind: KindContract, Message: msg}
		if ce, ok := err.(*contractError); ok {
			r.Err.fix = ce.fix
		}
		r.Feedback = msg
		return r
	}
	r.Score, r.Feedback, r.Scores, r.ScoreNames, r.Extra, r.Warnings = rv.score, rv.feedback, rv.scores, rv.names, rv.extra, rv.warnings
	return r
}
