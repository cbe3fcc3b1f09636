package engine_test

import (
	"context"
	"fmt"
	"log"

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
