package engine

import (
	"encoding/json"
	"fmt"
	"iter"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/skynetml/skynet/cpython"
	"github.com/skynetml/skynet/llm"
	"github.com/stretchr/testify/require"
)

const exactMatch = "../testdata/exact_match/metric.py"

var benchCase = Case{ID: "b", Input: json.RawMessage(`{"message": "I was charged twice this month."}`),
	Output: "billing", Expected: json.RawMessage(`{"label": "billing"}`)}

// BenchmarkScore is the engine API on the trivial exact-match metric.
func BenchmarkScore(b *testing.B) {
	e, err := Open(Options{Metric: exactMatch})
	require.NoError(b, err)
	defer e.Close()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if r := e.Score(ctx, benchCase); r.Err != nil {
			b.Fatal(r.Err)
		}
	}
}

// BenchmarkPythonLoop is the bar of SPEC §6: a pure-Python loop calling the
// same score on the same prepared objects in the same interpreter.
func BenchmarkPythonLoop(b *testing.B) {
	e, err := Open(Options{Metric: exactMatch})
	require.NoError(b, err)
	defer e.Close()
	b.ResetTimer()
	ns := pythonLoopNS(b, e, b.N)
	b.ReportMetric(ns, "py-ns/op")
}

func pythonLoopNS(b *testing.B, e *Engine, n int) float64 {
	var ns float64
	var ferr error
	cpython.WithGIL(func(th *cpython.GIL) {
		mod, err := th.ExecModule(fmt.Sprintf("_bench_%d", n), "<bench>", fmt.Sprintf(`
import sys, time
score = sys.modules[%q].score
def loop(n):
    input, output, expected = {"message": "I was charged twice this month."}, "billing", {"label": "billing"}
    start = time.perf_counter_ns()
    for _ in range(n):
        score(input, output, expected)
    return (time.perf_counter_ns() - start) / n
`, e.module))
		if err != nil {
			ferr = err
			return
		}
		fn, _ := th.Attr(mod, "loop")
		v, err := th.CallValue(fn, n)
		ferr = err
		if f, ok := v.(float64); ok {
			ns = f
		}
		th.Release(fn)
		th.Release(mod)
	})
	require.NoError(b, ferr)
	return ns
}

// BenchmarkRatio runs both in one benchmark and reports engine/python.
func BenchmarkRatio(b *testing.B) {
	e, err := Open(Options{Metric: exactMatch})
	require.NoError(b, err)
	defer e.Close()
	b.ResetTimer()
	start := testingNow()
	for i := 0; i < b.N; i++ {
		e.Score(ctx, benchCase)
	}
	engineNS := float64(testingSince(start).Nanoseconds()) / float64(b.N)
	py := pythonLoopNS(b, e, b.N)
	b.ReportMetric(engineNS, "engine-ns/case")
	b.ReportMetric(py, "python-ns/case")
	b.ReportMetric(engineNS/py, "ratio")
}

var (
	testingNow   = time.Now
	testingSince = time.Since
)

// BenchmarkScoreAllRatio streams b.N cases through ScoreAll (batched) and
// reports the per-case time next to the Python loop's, in one run.
func BenchmarkScoreAllRatio(b *testing.B) {
	e, err := Open(Options{Metric: exactMatch})
	require.NoError(b, err)
	defer e.Close()
	b.ResetTimer()
	start := testingNow()
	n := 0
	for _, r := range e.ScoreAll(ctx, repeatCase(benchCase, b.N), 0) {
		if r.Err != nil {
			b.Fatal(r.Err)
		}
		n++
	}
	engineNS := float64(testingSince(start).Nanoseconds()) / float64(b.N)
	require.Equal(b, b.N, n)
	py := pythonLoopNS(b, e, b.N)
	b.ReportMetric(engineNS, "engine-ns/case")
	b.ReportMetric(py, "python-ns/case")
	b.ReportMetric(engineNS/py, "ratio")
}

// BenchmarkWorkers shows the worker-count rule: for a CPU-bound metric more
// workers only contend for the GIL; for one that waits outside the GIL (here
// a 2 ms sleep, as a model call would) throughput grows with workers.
func BenchmarkWorkers(b *testing.B) {
	metrics := map[string]string{
		"cpu":   "def score(i, o, e=None):\n    return 1.0, {'feedback': 'ok'}\n",
		"sleep": "import time\ndef score(i, o, e=None):\n    time.sleep(0.002)\n    return 1.0, {'feedback': 'ok'}\n",
	}
	for _, kind := range []string{"cpu", "sleep"} {
		path := filepath.Join(b.TempDir(), "metric.py")
		require.NoError(b, os.WriteFile(path, []byte(metrics[kind]), 0o644))
		for _, workers := range []int{1, 2, 4, 8} {
			b.Run(fmt.Sprintf("%s/workers=%d", kind, workers), func(b *testing.B) {
				e, err := Open(Options{Metric: path, Threads: workers})
				require.NoError(b, err)
				defer e.Close()
				b.ResetTimer()
				for _, r := range e.ScoreAll(ctx, repeatCase(benchCase, b.N), 0) {
					if r.Err != nil {
						b.Fatal(r.Err)
					}
				}
			})
		}
	}
}

// repeatCase yields c n times.
func repeatCase(c Case, n int) iter.Seq[Case] {
	return func(yield func(Case) bool) {
		for i := 0; i < n; i++ {
			if !yield(c) {
				return
			}
		}
	}
}

// BenchmarkScoreAllFile is ScoreAll on the example case file's cases, cycled
// with fresh ids, as `skynet bench` runs it (JSON texts for every value).
func BenchmarkScoreAllFile(b *testing.B) {
	e, err := Open(Options{Metric: exactMatch})
	require.NoError(b, err)
	defer e.Close()
	base := readCases(b, "../testdata/exact_match/cases.jsonl")
	// 50,000 cases, as make bench-cli's skynet bench, streamed again and
	// again (the heap stays the size of one pass).
	cases := make([]Case, 50_000)
	for i := range cases {
		cases[i] = base[i%len(base)]
		cases[i].ID = fmt.Sprint(i)
	}
	b.ResetTimer()
	for n := 0; n < b.N; n += len(cases) {
		pass := cases[:min(len(cases), b.N-n)]
		for _, r := range e.ScoreAll(ctx, slices.Values(pass), 0) {
			if r.Err != nil {
				b.Fatal(r.Err)
			}
		}
	}
}

// BenchmarkJudgeWorkers: a judge metric whose model answers in 50 ms, for
// 1 to 256 workers; cases/s should approach workers / 50 ms. The model
// answers in memory (the engine and llm client alone, as with a remote
// model) or over loopback HTTP from a server in this process, whose
// network stack and handlers share the host's cores with the engine.
func BenchmarkJudgeWorkers(b *testing.B) {
	const latency = 50 * time.Millisecond
	for _, model := range []string{"memory", "http"} {
		for _, workers := range []int{1, 8, 64, 256} {
			b.Run(fmt.Sprintf("model=%s/workers=%d", model, workers), func(b *testing.B) {
				j := newJudge(b, latency)
				cfg := llm.Config{ReflectionModel: "openai/m", BaseURL: j.URL + "/v1", MaxInFlight: 256}
				if model == "memory" {
					cfg.HTTPClient = &http.Client{Transport: judgeTransport(latency)}
				}
				c, err := llm.New(cfg)
				require.NoError(b, err)
				e, err := Open(Options{Metric: "../testdata/judge/metric.py", LLM: c, Threads: workers})
				require.NoError(b, err)
				defer e.Close()
				judged := Case{ID: "j", Input: map[string]any{"question": "2+2?"}, Output: "4"}
				b.ResetTimer()
				start := time.Now()
				for _, r := range e.ScoreAll(ctx, repeatCase(judged, b.N), 0) {
					if r.Err != nil {
						b.Fatal(r.Err)
					}
					if r.Score != 1 {
						b.Fatalf("judged %v: %s", r.Score, r.Feedback)
					}
				}
				rate := float64(b.N) / time.Since(start).Seconds()
				b.ReportMetric(rate, "cases/s")
				b.ReportMetric(rate/(float64(workers)/latency.Seconds()), "of-ideal")
			})
		}
	}
}

// BenchmarkAsyncJudge: the judge as `async def score` on one event loop,
// with 1, 64 and 1,000 cases in flight (Threads) and a model answering in
// 50 ms in memory; cases/s should approach in-flight / 50 ms (of-ideal).
func BenchmarkAsyncJudge(b *testing.B) {
	const latency = 50 * time.Millisecond
	for _, inflight := range []int{1, 64, 1000} {
		b.Run(fmt.Sprintf("inflight=%d", inflight), func(b *testing.B) {
			c, err := llm.New(llm.Config{ReflectionModel: "openai/m", BaseURL: "http://judge.invalid/v1", MaxInFlight: 4096,
				HTTPClient: &http.Client{Transport: judgeTransport(latency)}})
			require.NoError(b, err)
			e, err := Open(Options{Metric: "../testdata/async_judge/metric.py", LLM: c, Threads: inflight})
			require.NoError(b, err)
			defer e.Close()
			judged := Case{ID: "j", Input: map[string]any{"question": "2+2?"}, Output: "4"}
			n := max(b.N, 2*inflight)
			b.ResetTimer()
			start := time.Now()
			for _, r := range e.ScoreAll(ctx, repeatCase(judged, n), 0) {
				if r.Err != nil {
					b.Fatal(r.Err)
				}
				if r.Score != 1 {
					b.Fatalf("judged %v: %s", r.Score, r.Feedback)
				}
			}
			rate := float64(n) / time.Since(start).Seconds()
			b.ReportMetric(rate, "cases/s")
			b.ReportMetric(rate/(float64(inflight)/latency.Seconds()), "of-ideal")
		})
	}
}
