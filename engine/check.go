package engine

import (
	"context"
	"fmt"
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
	var problems []string
	same := map[string][]string{} // problem without its case -> later cases with it
	for _, c := range samples {
		r := e.Score(ctx, c)
		if r.Err == nil {
			continue
		}
		msg := r.Err.Message
		switch r.Err.Kind {
		case KindException:
			msg = fmt.Sprintf("%s: score raised %s", caseName(c.ID), r.Err.Message)
		case KindTimeout, KindInput, KindCanceled:
			msg = fmt.Sprintf("%s: %s", caseName(c.ID), r.Err.Message)
		}
		if rv.OK {
			rv.OK, rv.Case, rv.Detail = false, c.ID, r.Err.Traceback
		}
		rest := strings.TrimPrefix(msg, caseName(c.ID)+": ")
		if ids, seen := same[rest]; seen {
			same[rest] = append(ids, c.ID)
			continue
		}
		same[rest] = []string{}
		problems = append(problems, msg)
	}
	if rv.OK {
		rv.Message = fmt.Sprintf("%d sample case(s) returned valid (score, side info) pairs", len(samples))
		return append(checks, rv)
	}
	// One line per distinct problem, naming the other cases it recurs on.
	for i, p := range problems {
		for rest, ids := range same {
			if len(ids) > 0 && strings.HasSuffix(p, ": "+rest) {
				problems[i] = fmt.Sprintf("%s (also case %s)", p, strings.Join(ids, ", "))
			}
		}
	}
	rv.Message = strings.Join(problems, "; ")
	return append(checks, rv)
}
