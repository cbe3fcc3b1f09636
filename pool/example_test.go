package pool_test

import (
	"context"
	"fmt"
	"log"

	"github.com/skynetml/skynet/engine"
	"github.com/skynetml/skynet/pool"
)

// Score one case in a worker process with the seed's exact-match metric.
// The workers are this test binary, started again: pool's init serves them.
func Example() {
	p, err := pool.Open(pool.Options{Options: engine.Options{Metric: "../testdata/exact_match/metric.py"}})
	if err != nil {
		log.Fatal(err) // a *engine.CheckError names the failed check
	}
	defer p.Close()

	r := p.Score(context.Background(), engine.Case{
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
