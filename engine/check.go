package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// The named checks of the contract check: the values of Check.Name.
const (
	CheckLoads       = "metric loads"
	CheckSignature   = "score signature"
	CheckRewardSpec  = "REWARD_SPEC"
	CheckReturnValue = "metric's return value"
)

// Check is the outcome of one named contract check.
type Check struct {
	Name string `json:"name"` // which check: CheckLoads, CheckSignature, ...
	OK   bool   `json:"ok"`   // passed; a notice such as CheckThreads is OK too
	Case string `json:"case"` // the (first) case it failed on, if any
	// Message is what was found. It does not repeat Name or Case, so a
	// report can print them side by side: "name [case c]: message".
	Message string `json:"message"`
	// Fix shows the change to the metric that makes it pass, when the
	// failure has one (a bare number instead of a (score, side info) pair).
	Fix string `json:"fix,omitempty"`
	// Detail is a traceback, when there is one.
	Detail string `json:"detail,omitempty"`
}

// CheckError is returned by Open when a load-time check fails. Checks holds
// every check made, the failed one last. A metric or program file that does
// not exist fails CheckLoads (CheckProgramLoads), and the error then
// matches fs.ErrNotExist, so a caller can tell a wrong path from a broken metric.
type CheckError struct {
	Checks []Check // every check made, the failed one last
	Err    error   // the file error under a failed load, for Unwrap; else nil
}

// Error is the failed check's name and message.
func (e *CheckError) Error() string {
	last := e.Checks[len(e.Checks)-1]
	return last.Name + ": " + last.Message
}

// Unwrap is the file error when the metric or program file could not be
// opened, else nil.
func (e *CheckError) Unwrap() error { return e.Err }

// Failed returns the failed check.
func (e *CheckError) Failed() Check { return e.Checks[len(e.Checks)-1] }

// Check runs the contract check: the load-time checks Open made, then score
// on the first Options.Samples cases, each return value validated. It never
// stops at the first failing case of a check: Case is the first, and the
// message names the others ("(also case t2)", "; case t3: ...").
func (e *Engine) Check(ctx context.Context, cases []Case) []Check {
	checks := e.check(ctx, cases)
	// After the samples: a case may set a signal handler too.
	if c, ok := e.threadsNotice(); ok {
		checks = slices.Insert(checks, len(checks)-1, c)
	}
	return checks
}

func (e *Engine) check(ctx context.Context, cases []Case) []Check {
	checks := append([]Check(nil), e.loadChecks...)
	samples := cases
	if len(samples) > e.samples {
		samples = samples[:e.samples]
	}
	rv := Check{Name: CheckReturnValue, OK: true}
	if e.closed.Load() {
		rv.OK, rv.Message = false, "not run: "+ErrClosed.Error()
		return append(checks, rv)
	}
	if len(samples) == 0 {
		rv.OK = false
		rv.Message = "no sample cases to call score on"
		return append(checks, rv)
	}
	// One entry per distinct problem, in order, with the cases it recurs on.
	type problem struct {
		first, rest string
		also        []string
	}
	var problems []*problem
	var fixes []string
	for _, c := range samples {
		r := e.Score(ctx, c)
		if r.Err == nil {
			continue
		}
		// The result's message names the case and the rule; the check has
		// both as Case and Name, so the message keeps what was found.
		rest := strings.TrimPrefix(r.Err.Message, caseName(c.ID)+": ")
		rest = strings.TrimPrefix(rest, CheckReturnValue+": ")
		if r.Err.Kind == KindException {
			rest = "score raised " + rest
		}
		if rv.OK {
			rv.OK, rv.Case, rv.Detail = false, c.ID, r.Err.Traceback
		}
		if f := r.Err.fix; f != "" && !slices.Contains(fixes, f) {
			fixes = append(fixes, f)
		}
		i := slices.IndexFunc(problems, func(p *problem) bool { return p.rest == rest })
		if i >= 0 {
			problems[i].also = append(problems[i].also, c.ID)
			continue
		}
		problems = append(problems, &problem{first: c.ID, rest: rest})
	}
	if rv.OK {
		rv.Message = fmt.Sprintf("%d sample case(s) returned valid (score, side info) pairs", len(samples))
		return append(checks, rv)
	}
	lines := make([]string, len(problems))
	for i, p := range problems {
		lines[i] = p.rest // the first problem's case is rv.Case
		if i > 0 {
			lines[i] = fmt.Sprintf("%s: %s", caseName(p.first), p.rest)
		}
		if len(p.also) > 0 {
			lines[i] += fmt.Sprintf(" (also case %s)", strings.Join(p.also, ", "))
		}
	}
	rv.Message = strings.Join(lines, "; ")
	rv.Fix = strings.Join(fixes, " or ")
	return append(checks, rv)
}
