package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// The named checks of the contract check.
const (
	CheckLoads       = "metric loads"
	CheckSignature   = "score signature"
	CheckRewardSpec  = "REWARD_SPEC"
	CheckReturnValue = "metric's return value"
)

// Check is the outcome of one named contract check.
type Check struct {
	Name    string `json:"name"`
	OK      bool   `json:"ok"`
	Case    string `json:"case"`    // the case it failed on, if any
	Message string `json:"message"` // what was found
	// Detail is a traceback, when there is one.
	Detail string `json:"detail,omitempty"`
}

// CheckError is returned by Open when a load-time check fails. Checks holds
// every check made, the failed one last.
type CheckError struct {
	Checks []Check
}

func (e *CheckError) Error() string {
	last := e.Checks[len(e.Checks)-1]
	return last.Name + ": " + last.Message
}

// Failed returns the failed check.
func (e *CheckError) Failed() Check { return e.Checks[len(e.Checks)-1] }

// Check runs the contract check: the load-time checks Open made, then score
// on the first Options.Samples cases, each return value validated. It never
// stops at the first failing case of a check; the message names every one.
func (e *Engine) Check(ctx context.Context, cases []Case) []Check {
	checks := e.check(ctx, cases)
	// After the samples: a case may need an import a sub-interpreter refuses.
	if why := e.Fallback(); why != "" {
		checks = slices.Insert(checks, len(checks)-1, Check{Name: CheckInterpreters, OK: true, Message: why})
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
	for _, c := range samples {
		r := e.Score(ctx, c)
		if r.Err == nil {
			continue
		}
		// Messages other than a Python exception's already name the case.
		rest := strings.TrimPrefix(r.Err.Message, caseName(c.ID)+": ")
		if r.Err.Kind == KindException {
			rest = "score raised " + rest
		}
		if rv.OK {
			rv.OK, rv.Case, rv.Detail = false, c.ID, r.Err.Traceback
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
		lines[i] = fmt.Sprintf("%s: %s", caseName(p.first), p.rest)
		if len(p.also) > 0 {
			lines[i] += fmt.Sprintf(" (also case %s)", strings.Join(p.also, ", "))
		}
	}
	rv.Message = strings.Join(lines, "; ")
	return append(checks, rv)
}
