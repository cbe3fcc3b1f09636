package cpython

import (
	"math"
	"testing"
	"time"
)

// benchMetric is the seed's exact-match metric, as in testdata/exact_match.
const benchMetric = `
def score(input, output, expected=None):
    want = expected["label"]
    if output == want:
        return 1.0, {"feedback": "Correct."}
    return 0.0, {"feedback": f"Expected {want!r}, got {output!r}."}

import time
def loop(cases, n):
    prepared = [cases[i % len(cases)] for i in range(n)]
    start = time.perf_counter_ns()
    for args in prepared:
        score(*args)
    return (time.perf_counter_ns() - start) / n
`

var benchCases = []struct{ in, out, exp string }{
	{"I was charged twice this month.", "billing", "billing"},
	{"The app crashes when I open settings.", "other", "bug"},
	{"How do I change my password?", "account", "account"},
	{"Refund please", "billing", "billing"},
	{"Where is the export button?", "bug", "other"},
	{"Login fails", "account", "account"},
}

// BenchmarkScoreBatchC times the C batch loop alone: the cost per case of
// one GIL hold over 64 cases with cached input and expected, as ScoreAll
// runs them, next to a Python loop over the same objects.
func BenchmarkScoreBatchC(b *testing.B) {
	fn := function(b, "score", benchMetric)
	loop := function(b, "loop", benchMetric)
	cache, err := NewArgCache(1 << 20)
	if err != nil {
		b.Fatal(err)
	}
	c, err := NewCaller(64 << 10)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	const n = 64
	var args BatchArgs
	for i := 0; i < n; i++ {
		bc := benchCases[i%len(benchCases)]
		for _, v := range []any{map[string]any{"message": bc.in}, bc.out, map[string]any{"label": bc.exp}} {
			var enc Encoder
			enc.Value(v)
			args.Offsets = append(args.Offsets, uint64(len(args.Buf)))
			args.Buf = append(args.Buf, enc.Bytes()...)
			id := int32(-1)
			if true {
				cache.ID(enc.Bytes())
				id = cache.ID(enc.Bytes())
			}
			args.IDs = append(args.IDs, id)
		}
	}
	// Alternate the two in short rounds and keep each one's fastest round:
	// on a shared machine the minimum is the figure least bent by others.
	const round = 64 * n
	var tuples []any
	for _, bc := range benchCases {
		tuples = append(tuples, Tuple{map[string]any{"message": bc.in}, bc.out, map[string]any{"label": bc.exp}})
	}
	bestC, bestPy := math.Inf(1), math.Inf(1)
	b.ResetTimer()
	for r := 0; r*round < b.N; r++ {
		t0 := time.Now()
		for i := 0; i < round; i += n {
			bt, _ := NewBatch(n)
			if got := c.ScoreBatch(bt, fn, nil, 3, &args, cache, NewTokens(n), Capture, 0, 0); got != n {
				b.Fatalf("finished %d", got)
			}
			bt.Free()
		}
		bestC = min(bestC, float64(time.Since(t0).Nanoseconds())/round)
		WithGIL(func(g *GIL) {
			v, err := g.CallValue(loop, tuples, round)
			if err != nil {
				b.Fatal(err)
			}
			bestPy = min(bestPy, v.(float64))
		})
	}
	b.StopTimer()
	b.ReportMetric(bestC, "c-ns/case")
	b.ReportMetric(bestPy, "py-ns/case")
	b.ReportMetric(bestC/bestPy, "ratio")
}

// BenchmarkAppendJSON transcodes a case line as a worker does: a question,
// a model's multi-line answer (newline escapes), a reference.
func BenchmarkAppendJSON(b *testing.B) {
	line := []byte(`{"expected": {"answer": "56088"}, "id": "c17", "input": {"question": "What is 123 times 456?"}, "output": "First we multiply 123 by 456. the model answer of to prompt reason metric engine python value result case with a few more words of reasoning.\nThe answer is 56088.\n#### 56088"}`)
	var out []byte
	b.SetBytes(int64(len(line)))
	for b.Loop() {
		var err error
		if out, err = AppendJSON(out[:0], line); err != nil {
			b.Fatal(err)
		}
	}
}
