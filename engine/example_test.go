package engine_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"slices"
	"strings"

	"github.com/skynetml/skynet/caseio"
	"github.com/skynetml/skynet/engine"
)

// Score one case with the seed's exact-match metric.
func Example() {
	e, err := engine.Open(engine.Options{Metric: "../testdata/exact_match/metric.py"})
	if err != nil {
		log.Fatal(err) // a *engine.CheckError names the failed check
	}
	defer e.Close()

	r := e.Score(context.Background(), engine.Case{
		ID:       "1",
		Input:    map[string]any{"message": "I was charged twice."},
		Output:   "other",
		Expected: map[string]any{"label": "billing"},
	})
	if r.Err != nil {
		log.Fatal(r.Err)
	}
	fmt.Println(r.Score, r.Feedback)
	// Output: 0 Expected 'billing', got 'other'.
}

// Score calls the metric on one case; a metric that raises or breaks the
// contract gives a Result with Err set, not a Go error.
func ExampleEngine_Score() {
	e, err := engine.Open(engine.Options{Metric: "../testdata/exact_match/metric.py"})
	if err != nil {
		log.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()

	r := e.Score(ctx, engine.Case{
		ID:       "t1",
		Input:    map[string]any{"message": "I was charged twice this month."},
		Output:   "billing",
		Expected: map[string]any{"label": "billing"},
	})
	fmt.Printf("%s: %.1f %q\n", r.ID, r.Score, r.Feedback)

	// Expected is None here, and this metric indexes it: a case error.
	r = e.Score(ctx, engine.Case{ID: "t2", Input: map[string]any{}, Output: "bug"})
	fmt.Printf("%s: %.1f %s: %s\n", r.ID, r.Score, r.Err.Kind, r.Err.Message)
	// Output:
	// t1: 1.0 "Correct."
	// t2: 0.0 exception: TypeError: 'NoneType' object is not subscriptable
}

// ScoreAll scores a stream of cases, here a JSONL case file read line by
// line, and yields the results in input order. A bad line becomes an input
// error in its place (InvalidCase), so no case is lost.
func ExampleEngine_ScoreAll() {
	e, err := engine.Open(engine.Options{Metric: "../testdata/exact_match/metric.py"})
	if err != nil {
		log.Fatal(err)
	}
	defer e.Close()
	f, err := os.Open("../testdata/exact_match/cases.jsonl")
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()

	cr := caseio.NewReader(f)
	cases := func(yield func(engine.Case) bool) {
		for {
			c, err := cr.Next()
			if err == io.EOF {
				return
			}
			var le *caseio.LineError
			if errors.As(err, &le) {
				c = engine.InvalidCase(c.ID, err)
			} else if err != nil {
				log.Fatal(err) // a read error: the rest of the file is not there
			}
			if !yield(c) {
				return
			}
		}
	}
	sum, n := 0.0, 0
	for _, r := range e.ScoreAll(context.Background(), cases, 0) {
		fmt.Printf("%s %.0f %s\n", r.ID, r.Score, r.Feedback)
		sum += r.Score
		n++
	}
	fmt.Printf("mean %.4f over %d cases\n", sum/float64(n), n)
	// Output:
	// t1 1 Correct.
	// t2 0 Expected 'bug', got 'other'.
	// t3 1 Correct.
	// t4 1 Correct.
	// t5 0 Expected 'feature', got 'bug'.
	// t6 1 Correct.
	// mean 0.6667 over 6 cases
}

// Run the contract check on sample cases before a long run.
func ExampleEngine_Check() {
	e, err := engine.Open(engine.Options{Metric: "../testdata/contract/no_feedback.py", Samples: 1})
	if err != nil {
		log.Fatal(err)
	}
	defer e.Close()
	cases := []engine.Case{{ID: "a", Input: map[string]any{}, Output: "x"}}
	for _, c := range e.Check(context.Background(), cases) {
		fmt.Printf("%v %s: %s\n", c.OK, c.Name, c.Message)
	}
	// Output:
	// true metric loads: loaded ../testdata/contract/no_feedback.py
	// true score signature: score(input, output, expected=None): called with (input, output, expected)
	// false metric's return value: side info has no "feedback" string
}

// A metric that returns a bare number fails the check on the case it was
// given, with the line that fixes it.
func ExampleEngine_Check_fix() {
	e, err := engine.Open(engine.Options{Metric: "../testdata/contract/no_side_info.py", Samples: 2})
	if err != nil {
		log.Fatal(err)
	}
	defer e.Close()
	cases := []engine.Case{{ID: "t1", Input: map[string]any{}, Output: "x"}, {ID: "t2", Input: map[string]any{}, Output: "y"}}
	checks := e.Check(context.Background(), cases)
	rv := checks[len(checks)-1]
	fmt.Printf("%s [case %s]: %s\nfix: %s\n", rv.Name, rv.Case, rv.Message, rv.Fix)
	// Output:
	// metric's return value [case t1]: must return a pair (score, side info), got float 0.8: no side info (also case t2)
	// fix: return score, {"feedback": "..."}
}

// Evaluate runs a program on a dataset and scores each output: here the
// keyword classifier of testdata/programs on the CSV tickets, judged by the
// exact-match metric. Result.Output is what run returned.
func ExampleEngine_Evaluate() {
	e, err := engine.Open(engine.Options{
		Metric:  "../testdata/exact_match/metric.py",
		Program: "../testdata/programs/keywords.py",
	})
	if err != nil {
		log.Fatal(err)
	}
	defer e.Close()
	cases, err := caseio.Dataset{Path: "../testdata/dataset/tickets.csv", Inputs: []string{"message"}, Outputs: []string{"label"}}.Cases()
	if err != nil {
		log.Fatal(err)
	}
	artifact, err := os.ReadFile("../testdata/dataset/keywords.txt")
	if err != nil {
		log.Fatal(err)
	}

	for _, r := range e.Evaluate(context.Background(), strings.TrimSpace(string(artifact)), slices.Values(cases)) {
		fmt.Printf("%s run returned %q: %.0f %s\n", r.ID, r.Output, r.Score, r.Feedback)
	}
	// Output:
	// c1 run returned "billing": 1 Correct.
	// c2 run returned "bug": 1 Correct.
	// c3 run returned "account": 1 Correct.
	// c4 run returned "billing": 1 Correct.
	// c5 run returned "other": 0 Expected 'feature', got 'other'.
}
