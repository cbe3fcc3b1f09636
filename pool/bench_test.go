package pool_test

import (
	"context"
	"testing"

	"github.com/skynetml/skynet/engine"
	"github.com/skynetml/skynet/pool"
)

// BenchmarkScoreOne is one case at a time through the pool: the latency a
// lone request sees, without HTTP (make bench-serve compares serve's with it).
func BenchmarkScoreOne(b *testing.B) {
	p, err := pool.Open(pool.Options{Options: engine.Options{Metric: "../testdata/exact_match/metric.py"}, Processes: 2})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	c := engine.Case{ID: "1", Input: map[string]any{"message": "I was charged twice."}, Output: "other",
		Expected: map[string]any{"label": "billing"}}
	ctx := context.Background()
	p.Score(ctx, c)
	b.ResetTimer()
	for range b.N {
		if r := p.Score(ctx, c); r.Err != nil {
			b.Fatal(r.Err)
		}
	}
}
