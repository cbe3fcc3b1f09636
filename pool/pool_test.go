package pool

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skynetml/skynet/caseio"
	"github.com/skynetml/skynet/engine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readCases reads a case file as the pool's callers would.
func readCases(t *testing.T, path string) []engine.Case {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var cases []engine.Case
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for n := 1; sc.Scan(); n++ {
		c, err := caseio.ParseCase(bytes.Clone(sc.Bytes()), n) // the case points into its line; the scanner reuses its buffer
		require.NoError(t, err)
		cases = append(cases, c)
	}
	return cases
}

func seq(cases []engine.Case) func(func(engine.Case) bool) {
	return func(yield func(engine.Case) bool) {
		for _, c := range cases {
			if !yield(c) {
				return
			}
		}
	}
}

// writeFile writes a file (a metric, a program) into dir and returns its path.
func writeFile(t *testing.T, dir, name, src string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(path, []byte(src), 0o644))
	return path
}

// collect drains a result stream, checking that its indices count 0, 1, 2...
func collect(t *testing.T, results iter.Seq2[int, engine.Result]) []engine.Result {
	t.Helper()
	var out []engine.Result
	for i, r := range results {
		if i != len(out) {
			t.Fatalf("result index %d after %d results: want %d", i, len(out), len(out))
		}
		out = append(out, r)
	}
	return out
}

// errText is a case error as compared in messages.
func errText(e *engine.CaseError) string {
	if e == nil {
		return "no error"
	}
	return fmt.Sprintf("%s: %q", e.Kind, e.Message)
}

// jsonOf is v as JSON.
func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// openPool opens a pool and closes it when the test ends.
func openPool(t *testing.T, opts Options) *Pool {
	t.Helper()
	p, err := Open(opts)
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	return p
}

// lengthMetric scores len(output)/100; its feedback is the input's id, so
// a result that went to the wrong case shows.
const lengthMetric = `
def score(input, output, expected=None):
    return len(output) / 100, {"feedback": "id=" + input["id"]}
`

// lengthCases are n cases for lengthMetric: case i's output is i%101 long.
func lengthCases(prefix string, n int) []engine.Case {
	cases := make([]engine.Case, n)
	for i := range cases {
		id := fmt.Sprintf("%s%d", prefix, i)
		cases[i] = engine.Case{ID: id, Input: map[string]any{"id": id}, Output: strings.Repeat("x", i%101)}
	}
	return cases
}

// checkLength checks lengthMetric's results for cases: one each, in order,
// each the right case's.
func checkLength(t *testing.T, cases []engine.Case, results []engine.Result) {
	t.Helper()
	require.Len(t, results, len(cases), "one result per case")
	bad := 0
	for i, r := range results {
		c := cases[i]
		want := float64(len(c.Output.(string))) / 100
		if r.ID != c.ID || r.Err != nil || r.Score != want || r.Feedback != "id="+c.ID {
			bad++
			if bad <= 5 {
				t.Errorf("result %d: want case %s score %v feedback %q; got case %s score %v feedback %q, %s",
					i, c.ID, want, "id="+c.ID, r.ID, r.Score, r.Feedback, errText(r.Err))
			}
		}
	}
	if bad > 5 {
		t.Errorf("... %d results wrong in all", bad)
	}
}

func TestScoreAllExactMatch(t *testing.T) {
	dir := "../testdata/exact_match"
	p, err := Open(Options{Options: engine.Options{Metric: filepath.Join(dir, "metric.py")}, Processes: 2})
	require.NoError(t, err)
	defer p.Close()
	cases := readCases(t, filepath.Join(dir, "cases.jsonl"))
	n := 0
	for i, r := range p.ScoreAll(context.Background(), seq(cases), 0) {
		assert.Equal(t, cases[i].ID, r.ID)
		n++
	}
	assert.Equal(t, len(cases), n)
}

// TestScoreAllOrder scores 3000 cases in 2 processes (1 and 3 threads
// each) and two streams at once on one pool: every case gets exactly one
// result, in input order, with its own score and feedback.
func TestScoreAllOrder(t *testing.T) {
	metric := writeFile(t, t.TempDir(), "metric.py", lengthMetric)
	for _, threads := range []int{1, 3} {
		t.Run(fmt.Sprintf("threads=%d", threads), func(t *testing.T) {
			p := openPool(t, Options{Options: engine.Options{Metric: metric, Threads: threads}, Processes: 2})
			cases := lengthCases("c", 3000)
			checkLength(t, cases, collect(t, p.ScoreAll(context.Background(), seq(cases), 0)))
			// Score, one case at a time, on the same pool.
			r := p.Score(context.Background(), cases[77])
			assert.Equal(t, "c77", r.ID)
			assert.Equal(t, 0.77, r.Score)
			assert.Equal(t, "id=c77", r.Feedback)
			assert.Nil(t, r.Err)
		})
	}
	t.Run("concurrent streams", func(t *testing.T) {
		p := openPool(t, Options{Options: engine.Options{Metric: metric}, Processes: 2})
		var wg sync.WaitGroup
		for _, prefix := range []string{"a", "b", "c"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cases := lengthCases(prefix, 1500)
				checkLength(t, cases, collect(t, p.ScoreAll(context.Background(), seq(cases), 0)))
			}()
		}
		wg.Wait()
	})
}

// TestScoreAllCancel cancels the context while cases are being scored:
// every case still gets exactly one result, in order; those not scored are
// canceled results whose error is context.Canceled, and none is anything
// else.
func TestScoreAllCancel(t *testing.T) {
	dir := t.TempDir()
	t.Run("slow metric", func(t *testing.T) {
		metric := writeFile(t, dir, "slow.py", `
import time

def score(input, output, expected=None):
    time.sleep(0.005)
    return len(output) / 100, {"feedback": "id=" + input["id"]}
`)
		p := openPool(t, Options{Options: engine.Options{Metric: metric}, Processes: 2})
		cases := lengthCases("s", 400)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var results []engine.Result
		for i, r := range p.ScoreAll(ctx, seq(cases), 0) {
			require.Equal(t, len(results), i)
			results = append(results, r)
			if i == 20 {
				cancel()
			}
		}
		checkCanceled(t, cases, results, 21, true)
		// The pool still scores after a stream was canceled.
		checkLength(t, cases[:50], collect(t, p.ScoreAll(context.Background(), seq(cases[:50]), 0)))
	})
	t.Run("input still coming", func(t *testing.T) {
		// A fast metric and an input that is still being read when the
		// context ends: cases keep entering the stream as it is canceled.
		metric := writeFile(t, dir, "fast.py", lengthMetric)
		p := openPool(t, Options{Options: engine.Options{Metric: metric}, Processes: 2})
		for round := range 5 {
			cases := lengthCases(fmt.Sprintf("r%d-", round), 60000)
			ctx, cancel := context.WithCancel(context.Background())
			var results []engine.Result
			for i, r := range p.ScoreAll(ctx, seq(cases), 0) {
				require.Equal(t, len(results), i)
				results = append(results, r)
				if i == 6000+round*997 {
					cancel()
				}
			}
			cancel()
			// Cases the stream never read get no result: ScoreAll stops
			// reading its input when ctx ends. Those it had read may all be
			// scored by then (a slow reader here, under -race or ASan, takes
			// results the workers finished long before), so none need be
			// canceled.
			require.Less(t, len(results), len(cases), "the stream stopped reading its input")
			require.Greater(t, len(results), 6000+round*997)
			if !checkCanceled(t, cases[:len(results)], results, 6001+round*997, false) {
				break
			}
		}
	})
	t.Run("slow input", func(t *testing.T) {
		// Cases come slower than they are scored (read from a slow
		// source): the stream waits on its input when the context ends,
		// and a case may still come in after that.
		metric := writeFile(t, dir, "fast2.py", lengthMetric)
		p := openPool(t, Options{Options: engine.Options{Metric: metric}, Processes: 2})
		for round := range 10 {
			cases := lengthCases(fmt.Sprintf("r%d-", round), 400)
			ctx, cancel := context.WithCancel(context.Background())
			slow := func(yield func(engine.Case) bool) {
				for _, c := range cases {
					time.Sleep(100 * time.Microsecond)
					if !yield(c) {
						return
					}
				}
			}
			var results []engine.Result
			for i, r := range p.ScoreAll(ctx, slow, 0) {
				require.Equal(t, len(results), i)
				results = append(results, r)
				if i == 100 {
					cancel()
				}
			}
			cancel()
			require.Greater(t, len(results), 100)
			if len(results) == 101 {
				continue // nothing came in after the cancel
			}
			if !checkCanceled(t, cases[:len(results)], results, 101, false) {
				break
			}
		}
	})
}

// TestRunCancelLateBatch cancels a Run and then sends it one more batch
// before closing the input: every task it returns has a record, scored or
// canceled, never an empty one.
func TestRunCancelLateBatch(t *testing.T) {
	metric := writeFile(t, t.TempDir(), "metric.py", lengthMetric)
	p := openPool(t, Options{Options: engine.Options{Metric: metric}, Processes: 1})
	task := func(round, i int) *Task {
		id := fmt.Sprintf("r%d-%d", round, i)
		return &Task{ID: id, Line: i + 1, Case: fmt.Appendf(nil, `{"id": %q, "input": {"id": %q}, "output": "xx"}`, id, id)}
	}
	for round := range 20 {
		in := make(chan []*Task)
		ctx, cancel := context.WithCancel(context.Background())
		out := p.Run(ctx, batchesOf(in))
		in <- []*Task{task(round, 0)}
		first := <-out
		require.Len(t, first, 1)
		cancel()
		time.Sleep(5 * time.Millisecond) // the stream sees the cancel, waiting on its input
		var late []*Task
		for i := 1; i <= 5; i++ {
			late = append(late, task(round, i))
		}
		select {
		case in <- late: // the stream may or may not read it
		case <-time.After(50 * time.Millisecond):
		}
		close(in)
		for b := range out {
			for _, x := range b {
				if len(x.Record.Line) == 0 {
					t.Fatalf("round %d: task %s came back from Run with no record (neither scored nor canceled)", round, x.ID)
				}
				if x.Record.Kind != "" {
					r, err := caseio.ParseResult(x.Record.Line)
					require.NoError(t, err)
					assert.Equal(t, engine.KindCanceled, r.Err.Kind, "task %s", x.ID)
				}
			}
		}
		cancel()
	}
}

// checkCanceled checks a canceled stream's results: the first scored ones
// normal, every later one either normal or canceled with context.Canceled.
// With wantCanceled, some must be canceled.
func checkCanceled(t *testing.T, cases []engine.Case, results []engine.Result, scored int, wantCanceled bool) bool {
	t.Helper()
	require.Len(t, results, len(cases), "one result per case")
	checkLength(t, cases[:scored], results[:scored])
	canceled, bad := 0, 0
	for i := scored; i < len(results); i++ {
		r, c := results[i], cases[i]
		switch {
		case r.ID != c.ID:
			bad++
			if bad <= 5 {
				t.Errorf("result %d: want case %s, got %s", i, c.ID, r.ID)
			}
		case r.Err == nil:
			if r.Score != float64(len(c.Output.(string)))/100 || r.Feedback != "id="+c.ID {
				bad++
				t.Errorf("result %d (case %s): score %v feedback %q", i, c.ID, r.Score, r.Feedback)
			}
		case r.Err.Kind == engine.KindCanceled && errors.Is(r.Err, context.Canceled):
			canceled++
		default:
			bad++
			if bad <= 5 {
				t.Errorf("result %d (case %s): want a score or a canceled result (errors.Is context.Canceled), got %s (errors.Is context.Canceled: %v)",
					i, c.ID, errText(r.Err), errors.Is(r.Err, context.Canceled))
			}
		}
	}
	if bad > 5 {
		t.Errorf("... %d results wrong in all", bad)
	}
	if wantCanceled {
		assert.Positive(t, canceled, "some cases were not scored when the context ended")
	}
	t.Logf("%d results: %d canceled", len(results), canceled)
	return bad == 0
}

// TestRunCancelInputOpen cancels a Run whose input channel stays open:
// the tasks read and not finished come back canceled at once (Run's doc),
// without waiting for the input to close.
func TestRunCancelInputOpen(t *testing.T) {
	metric := writeFile(t, t.TempDir(), "metric.py", `
import time

def score(input, output, expected=None):
    time.sleep(0.2)
    return 1.0, {"feedback": "ok"}
`)
	p := openPool(t, Options{Options: engine.Options{Metric: metric}, Processes: 1})
	in := make(chan []*Task, 1)
	var tasks []*Task
	for i := range 20 {
		tasks = append(tasks, &Task{ID: fmt.Sprint(i), Line: i + 1, Case: fmt.Appendf(nil, `{"id": "%d", "input": {}, "output": "x"}`, i)})
	}
	in <- tasks
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := p.Run(ctx, batchesOf(in))
	time.Sleep(300 * time.Millisecond)
	cancel()
	got := 0
	deadline := time.After(5 * time.Second)
	for got < len(tasks) {
		select {
		case b, ok := <-out:
			require.True(t, ok, "output closed after %d of %d tasks", got, len(tasks))
			for _, x := range b {
				assert.Equal(t, tasks[got], x, "tasks come back in the order read")
				got++
			}
		case <-deadline:
			close(in)
			t.Fatalf("only %d of %d tasks came back within 5s of the cancel while the input stayed open", got, len(tasks))
		}
	}
	close(in)
	_, ok := <-out
	assert.False(t, ok, "output closes once the input closed")
}

// TestEvaluateMatchesEngine runs programs through the pool and in process
// (engine.Evaluate) on the same cases and artifact: the results are the
// same, case by case.
func TestEvaluateMatchesEngine(t *testing.T) {
	dir := t.TempDir()
	tickets, err := caseio.Dataset{Path: "../testdata/dataset/tickets.csv", Inputs: []string{"message"}, Outputs: []string{"label"}}.Cases()
	require.NoError(t, err)
	keywords, err := os.ReadFile("../testdata/dataset/keywords.txt")
	require.NoError(t, err)
	// A program whose run raises on some inputs, returns non-strings on
	// others, and a metric that raises on one.
	program := writeFile(t, dir, "program.py", `
def run(artifact, input):
    n = input["n"]
    if n % 7 == 3:
        raise ValueError(f"no answer for {n}")
    if n % 5 == 0:
        return {"n": n, "words": [artifact] * (n % 3)}
    return artifact.format(**input)
`)
	metric := writeFile(t, dir, "metric.py", `
def score(input, output, expected=None):
    if input["n"] == 11:
        raise KeyError("eleven")
    if isinstance(output, dict):
        return 0.25, {"feedback": "a dict with %d words" % len(output["words"])}
    return (1.0 if output == expected["want"] else 0.0), {"feedback": "got " + repr(output)}
`)
	var gen []engine.Case
	for n := range 40 {
		want := fmt.Sprintf("item %d", n)
		if n%4 == 0 {
			want = "something else"
		}
		gen = append(gen, engine.Case{ID: fmt.Sprintf("g%d", n), Input: map[string]any{"n": n}, Expected: map[string]any{"want": want}})
	}
	for _, tc := range []struct {
		name, metric, program string
		artifact              any
		cases                 []engine.Case
	}{
		{"keywords", "../testdata/exact_match/metric.py", "../testdata/programs/keywords.py", strings.TrimSpace(string(keywords)), tickets},
		{"generated", metric, program, "item {n}", gen},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := engine.Options{Metric: tc.metric, Program: tc.program}
			e, err := engine.Open(opts)
			require.NoError(t, err)
			defer e.Close()
			want := collect(t, e.Evaluate(context.Background(), tc.artifact, seq(tc.cases)))
			p := openPool(t, Options{Options: opts, Processes: 2})
			got := collect(t, p.Evaluate(context.Background(), tc.artifact, seq(tc.cases)))
			require.Len(t, got, len(tc.cases))
			kinds := map[engine.ErrorKind]int{}
			for i, w := range want {
				g := got[i]
				at := fmt.Sprintf("case %s", tc.cases[i].ID)
				assert.Equal(t, tc.cases[i].ID, g.ID, at)
				assert.Equal(t, w.ID, g.ID, at)
				assert.Equal(t, w.Score, g.Score, at)
				assert.Equal(t, w.Feedback, g.Feedback, at)
				assert.Equal(t, errText(w.Err), errText(g.Err), at)
				// The pool's outputs cross as JSON: compare them as JSON.
				assert.Equal(t, jsonOf(t, w.Output), jsonOf(t, g.Output), at)
				assert.NotNil(t, g.Observation.RunMS, "%s: the run's time is measured", at)
				if w.Err != nil {
					kinds[w.Err.Kind]++
				}
			}
			if tc.name == "generated" {
				assert.Positive(t, kinds[engine.KindRun], "some runs raised")
				assert.Positive(t, kinds[engine.KindException], "a score raised")
			}
			// Without a program, Evaluate is an error for each case.
			plain := openPool(t, Options{Options: engine.Options{Metric: tc.metric}, Processes: 1})
			for _, r := range collect(t, plain.Evaluate(context.Background(), tc.artifact, seq(tc.cases[:2]))) {
				require.NotNil(t, r.Err)
				assert.Equal(t, engine.KindRun, r.Err.Kind)
			}
		})
	}
}

// TestCheck runs the contract check in a worker: all OK for a good metric,
// a failed return-value check for one that returns a string.
func TestCheck(t *testing.T) {
	dir := "../testdata/exact_match"
	cases := readCases(t, filepath.Join(dir, "cases.jsonl"))
	p := openPool(t, Options{Options: engine.Options{Metric: filepath.Join(dir, "metric.py")}, Processes: 2})
	checks := p.Check(context.Background(), cases)
	require.NotEmpty(t, checks)
	names := map[string]bool{}
	for _, c := range checks {
		assert.True(t, c.OK, "check %s: %s", c.Name, c.Message)
		names[c.Name] = true
	}
	assert.True(t, names[engine.CheckLoads], "checks: %+v", checks)
	assert.True(t, names[engine.CheckReturnValue], "checks: %+v", checks)

	bad := writeFile(t, t.TempDir(), "metric.py", `
def score(input, output, expected=None):
    return "0.8"
`)
	p = openPool(t, Options{Options: engine.Options{Metric: bad}, Processes: 2})
	checks = p.Check(context.Background(), cases)
	require.NotEmpty(t, checks)
	last := checks[len(checks)-1]
	assert.Equal(t, engine.CheckReturnValue, last.Name)
	assert.False(t, last.OK)
	assert.Contains(t, last.Message, "str")
	assert.Equal(t, cases[0].ID, last.Case)
	for _, c := range checks[:len(checks)-1] {
		assert.True(t, c.OK, "check %s before the failed one: %s", c.Name, c.Message)
	}
	// The same as the engine's in-process check.
	e, err := engine.Open(engine.Options{Metric: bad})
	require.NoError(t, err)
	defer e.Close()
	assert.Equal(t, e.Check(context.Background(), cases), checks)
	// And scoring still works on the pool after a check.
	r := p.Score(context.Background(), cases[0])
	require.NotNil(t, r.Err)
	assert.Equal(t, engine.KindContract, r.Err.Kind)
}

// A case that cannot cross to a worker (InvalidCase's, a value JSON cannot
// hold) gets the input error the engine gives it, in its place.
func TestScoreAllInvalidCases(t *testing.T) {
	metric := filepath.Join("../testdata/exact_match", "metric.py")
	p := openPool(t, Options{Options: engine.Options{Metric: metric}, Processes: 1})
	e, err := engine.Open(engine.Options{Metric: metric})
	require.NoError(t, err)
	defer e.Close()
	cases := []engine.Case{
		{ID: "ok", Input: map[string]any{"message": "x"}, Output: "bug", Expected: map[string]any{"label": "bug"}},
		engine.InvalidCase("bad", errors.New("line 2: \"input\" must be an object of input fields, got null")),
		{ID: "nan", Input: map[string]any{"x": math.NaN()}, Output: "bug"},
	}
	got := collect(t, p.ScoreAll(context.Background(), seq(cases), 0))
	require.Len(t, got, 3)
	assert.Nil(t, got[0].Err)
	assert.Equal(t, 1.0, got[0].Score)
	want := collect(t, e.ScoreAll(context.Background(), seq(cases[1:2]), 0))
	require.NotNil(t, got[1].Err)
	assert.Equal(t, want[0].Err.Kind, got[1].Err.Kind)
	assert.Equal(t, want[0].Err.Message, got[1].Err.Message)
	require.NotNil(t, got[2].Err)
	assert.Equal(t, engine.KindInput, got[2].Err.Kind)
	assert.Contains(t, got[2].Err.Message, "case nan:")
}

// batchesOf is the tasks of the batches sent on in, as Run takes them,
// for tests that hold the input open or feed it late.
func batchesOf(in <-chan []*Task) iter.Seq[*Task] {
	return func(yield func(*Task) bool) {
		for b := range in {
			for _, t := range b {
				if !yield(t) {
					return
				}
			}
		}
	}
}

// Inputs and references that repeat (a trainer's rollouts: several outputs
// a prompt) reach the metric as their own values every time, whether a
// worker decodes them afresh or reuses the object it kept: each result is
// its case's, among values seen once, twice and many times.
func TestRepeatedValues(t *testing.T) {
	metric := writeFile(t, t.TempDir(), "metric.py", `
def score(input, output, expected=None):
    ok = expected is not None and output == input["q"] + "!" + expected["a"]
    return float(ok), {"feedback": input["q"] + "|" + output + "|" + (expected["a"] if expected else "-")}
`)
	p := openPool(t, Options{Options: engine.Options{Metric: metric}, Processes: 1})
	var cases []engine.Case
	var want []string
	for i := range 3000 {
		prompt := fmt.Sprintf("p%d", i%7+(i/500)*7) // 7 prompts at a time, each many times
		if i%11 == 0 {
			prompt = fmt.Sprintf("once%d", i) // and some seen once
		}
		ref := fmt.Sprintf("r%d", i%3)
		out := prompt + "!" + fmt.Sprintf("r%d", i%5%3)
		line := fmt.Sprintf(`{"id": "c%d", "input": {"q": %q}, "output": %q, "expected": {"a": %q}}`, i, prompt, out, ref)
		c, err := caseio.ParseCase([]byte(line), i+1)
		require.NoError(t, err)
		cases = append(cases, c)
		want = append(want, prompt+"|"+out+"|"+ref)
	}
	results := collect(t, p.ScoreAll(context.Background(), seq(cases), 0))
	require.Len(t, results, len(cases))
	for i, r := range results {
		require.Nil(t, r.Err, "case %d", i)
		require.Equal(t, want[i], r.Feedback, "case %d", i)
		wantScore := 0.0
		if strings.HasSuffix(want[i], "|"+strings.SplitN(want[i], "!", 2)[1][:2]) {
			wantScore = 1
		}
		require.Equal(t, wantScore, r.Score, "case %d: %s", i, want[i])
	}
}

// Cases that come one at a time, while workers are idle, go to the idle
// workers: two concurrent one-case calls to two processes run at once on
// both, not queued behind each other in the first worker with room.
func TestIdleWorkersTakeConcurrentCases(t *testing.T) {
	metric := writeFile(t, t.TempDir(), "metric.py", `
import os, time
def score(input, output, expected=None):
    time.sleep(0.15)
    return 1.0, {"feedback": str(os.getpid())}
`)
	p := openPool(t, Options{Options: engine.Options{Metric: metric}, Processes: 2})
	splits := 0
	for round := 0; round < 40 && splits < 3; round++ {
		var wg sync.WaitGroup
		pids := make([]string, 2)
		for i := range pids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := p.Score(context.Background(), engine.Case{ID: fmt.Sprint(i), Input: map[string]any{}, Output: "x"})
				require.Nil(t, r.Err)
				pids[i] = r.Feedback
			}()
		}
		wg.Wait()
		switch {
		case pids[0] != pids[1]:
			splits++
		case splits > 0:
			t.Fatalf("round %d: both cases went to process %s while the other had none, after %d rounds that split", round, pids[0], splits)
		}
	}
	assert.Equal(t, 3, splits, "concurrent cases went to one process while the other was idle")
}
