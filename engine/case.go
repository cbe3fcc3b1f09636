package engine

import (
	"fmt"
	"time"

	"github.com/skynetml/skynet/skynetmod"
)

// Case is one call of score: score(Input, Output, Expected).
type Case struct {
	// ID names the case in results and messages; ParseCase takes the case
	// file's "id", or the line number when there is none.
	ID string
	// Input is a dict: map[string]any, a json.RawMessage holding a JSON object
	// (key order kept), or a *cpython.Dict. Any of the three may also be a
	// *cpython.Encoded (caseio.Transcoder's: JSON transcoded as it was read).
	Input any
	// Output is any value: whatever run(artifact, input) returned.
	Output any
	// Expected is a dict of the dataset's output columns, or nil.
	Expected any
	// Observation is what the caller measured for this case.
	Observation Observation

	invalid error // set by InvalidCase
}

// InvalidCase stands for an input that could not be read as a case (a bad
// line of a case file), so that it still gets its one Result: an input error
// whose message is err's.
func InvalidCase(id string, err error) Case { return Case{ID: id, invalid: err} }

// Invalid is why the case could not be read (InvalidCase's error), or nil:
// scoring it gives a KindInput result with this message.
func (c Case) Invalid() error { return c.invalid }

// Observation is what was measured for a case; nil fields were not
// measured. Its fields are RunMS and CostUSD (*float64: milliseconds, US
// dollars), and ModelCalls, InputTokens and OutputTokens (*int64); see go doc
// skynetmod.Observation. skynet.observation(), skynet.service_cost() and
// skynet.reward() read it; Python cannot change it.
type Observation = skynetmod.Observation

// Result is the outcome of one case. Exactly one Result comes out of every
// Case that goes in.
type Result struct {
	// ID is the Case's ID, so results can be matched to cases.
	ID string
	// Score is the metric's score; 0 when Err is set, so an optimizer that
	// averages scores counts a failed case as a failure.
	Score float64
	// Feedback is the metric's feedback. For a failed case it is the error's
	// type and message only: it may reach a reflection model, so it never
	// holds a traceback or metric source.
	Feedback string
	// Scores are the named scores of the side info ("scores"), if any.
	Scores map[string]float64
	// ScoreNames are Scores' names in the order the metric returned them
	// (the results line keeps it); nil where it is not known, as in a
	// Result built by hand: the line then sorts them.
	ScoreNames []string
	// Extra holds the other JSON-serialisable side-info keys, passed through.
	Extra map[string]any
	// Warnings report side-info keys that were dropped, and why.
	Warnings []string
	// Err is set when the case did not produce a valid score. It is a
	// *CaseError, not an error: test it against nil before handing it on
	// as an error, since a nil *CaseError in an error is not a nil error.
	Err *CaseError
	// Logs is what score wrote to sys.stdout and sys.stderr (bounded).
	Logs string
	// Duration is the wall time of the score call.
	Duration time.Duration
	// Observation is what the case was scored with: the caller's, or when a
	// program ran (Evaluate), what Skynet measured.
	Observation Observation
	// Output is what run returned (Evaluate only), as JSON-able Go values;
	// a value JSON cannot hold is a short description string: its type,
	// and its repr when short ("set {1, 2}", "bytes of length 2").
	Output any
}

// ErrorKind classifies a failed case.
type ErrorKind string

const (
	// KindException: score raised (any exception, SystemExit included).
	KindException ErrorKind = "exception"
	// KindTimeout: score overran the timeout. The Result comes at the
	// timeout and the call is interrupted; a call blocked outside Python
	// bytecode (time.sleep, a socket read without its own timeout, C code)
	// runs on until it returns, and its worker is replaced after 0.5 s.
	KindTimeout ErrorKind = "timeout"
	// KindContract: score returned a value that breaks the contract.
	KindContract ErrorKind = "contract"
	// KindInput: the case itself is malformed (bad line, input not a dict).
	KindInput ErrorKind = "input"
	// KindCanceled: the context ended or the engine closed; errors.Is
	// with context.DeadlineExceeded, context.Canceled or ErrClosed says which.
	KindCanceled ErrorKind = "canceled"
	// KindRun: the program's run raised or overran its time limit.
	KindRun ErrorKind = "run"
	// KindCrash: the case took the Python process down (a segfault,
	// os._exit, abort) even when scored alone. Only package pool gives
	// it, since it runs the engine in worker processes; an Engine's own
	// process dies with its metric.
	KindCrash ErrorKind = "crash"
)

// CaseError says why a case has no score.
type CaseError struct {
	// Kind classifies the failure, for callers that count or retry by it.
	Kind ErrorKind
	// Message says what went wrong. The engine's name the case first, e.g.
	// "case 2: metric's return value: score must be a number, got str
	// '0.8'", except an exception's: Python's "Type: message", the same as
	// the Result's Feedback, which an optimizer sees.
	Message string
	// Traceback is the Python traceback, for the user's results file only.
	Traceback string

	// Cause is why a canceled case was cancelled: ctx.Err() (joined with
	// its context.Cause), or ErrClosed; nil for the other kinds.
	Cause error

	fix string // how to change the metric, for Check.Fix
}

// Error is the kind and the message: "contract: case 2: ...".
func (e *CaseError) Error() string { return fmt.Sprintf("%s: %s", e.Kind, e.Message) }

// Unwrap is why a canceled case was cancelled, so errors.Is(r.Err,
// context.DeadlineExceeded), context.Canceled or ErrClosed tells a deadline
// from a cancellation from a closed engine; nil for the other kinds.
func (e *CaseError) Unwrap() error { return e.Cause }

// Failed is c's result when it fails before or instead of a score: an
// error of kind with msg, which is also its feedback, and c's observation.
// Every place that decides a result without Python (a bad line, a crash,
// a cancel) makes it here, so they agree.
func (c Case) Failed(kind ErrorKind, msg string) Result {
	return Result{ID: c.ID, Feedback: msg, Err: &CaseError{Kind: kind, Message: msg}, Observation: c.Observation}
}

// failed is the failed result of the case named id.
func failed(id string, kind ErrorKind, msg string) Result { return Case{ID: id}.Failed(kind, msg) }

// caseName is how messages name a case.
func caseName(id string) string {
	if id == "" {
		return "case ?"
	}
	return "case " + id
}
