package engine

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/skynetml/skynet/llm"
)

// asyncMetric is an `async def score` that awaits, prints around its await
// (so interleaved cases would mix their logs if capture were per thread),
// counts the cases in flight on the loop, and fails on request.
const asyncMetric = `import asyncio

inflight = 0
peak = 0

async def score(input, output, expected=None):
    global inflight, peak
    inflight += 1
    peak = max(peak, inflight)
    try:
        print("start", input["n"])
        await asyncio.sleep(input.get("sleep", 0.05))
        print("end", input["n"])
        if output == "raise":
            raise ValueError(f"case {input['n']} raised")
        if output == "peak":
            return float(peak), {"feedback": "peak"}
        return float(output == expected["label"]), {"feedback": f"n={input['n']}", "scores": {"z": 1.0, "a": 2.0}}
    finally:
        inflight -= 1
`

func asyncCases(n int, output string, extra map[string]any) []Case {
	cases := make([]Case, n)
	for i := range cases {
		in := map[string]any{"n": i}
		for k, v := range extra {
			in[k] = v
		}
		cases[i] = Case{ID: fmt.Sprint(i), Input: in, Output: output, Expected: map[string]any{"label": "x"}}
	}
	return cases
}

func TestAsyncScoreRunsCasesAtOnceOnOneLoop(t *testing.T) {
	e := open(t, Options{Metric: writeMetric(t, asyncMetric), Threads: 50})
	assert.True(t, e.Async())
	assert.Equal(t, 1, e.pythonThreads(), "an async score's cases share one thread")
	start := time.Now()
	n := 0
	for i, r := range e.ScoreAll(ctx, slices.Values(asyncCases(200, "x", map[string]any{"sleep": 0.1})), 0) {
		require.Nil(t, r.Err)
		assert.Equal(t, fmt.Sprint(i), r.ID, "in input order")
		assert.Equal(t, 1.0, r.Score)
		assert.Equal(t, fmt.Sprintf("n=%d", i), r.Feedback)
		assert.Equal(t, map[string]float64{"z": 1, "a": 2}, r.Scores)
		assert.Equal(t, fmt.Sprintf("start %d\nend %d\n", i, i), r.Logs, "each case's own output, though cases interleave")
		n++
	}
	assert.Equal(t, 200, n)
	// 200 cases of 100 ms, 50 at a time: about 0.4 s; one at a time 20 s.
	assert.Less(t, time.Since(start), 5*time.Second)
	r := e.Score(ctx, Case{ID: "p", Input: map[string]any{"n": -1, "sleep": 0}, Output: "peak"})
	require.Nil(t, r.Err)
	assert.Equal(t, 50.0, r.Score, "at most Threads cases in flight, and that many")
}

func TestAsyncScoreErrorsAndTimeouts(t *testing.T) {
	e := open(t, Options{Metric: writeMetric(t, asyncMetric), Threads: 4, Timeout: 500 * time.Millisecond})
	r := e.Score(ctx, Case{ID: "r", Input: map[string]any{"n": 1}, Output: "raise"})
	require.NotNil(t, r.Err)
	assert.Equal(t, KindException, r.Err.Kind)
	assert.Equal(t, "ValueError: case 1 raised", r.Feedback)
	assert.True(t, strings.HasPrefix(r.Err.Traceback, "Traceback (most recent call last):\n  File \""), r.Err.Traceback)
	assert.NotContains(t, r.Err.Traceback, "skynet aio", "the traceback starts at the metric, as a plain call's does")
	assert.Equal(t, "start 1\nend 1\n", r.Logs)

	// A case past its time limit is cancelled; the loop and its other cases go on.
	var got []Result
	cases := []Case{
		{ID: "slow", Input: map[string]any{"n": 2, "sleep": 30}, Output: "x", Expected: map[string]any{"label": "x"}},
		{ID: "fast", Input: map[string]any{"n": 3}, Output: "x", Expected: map[string]any{"label": "x"}},
	}
	start := time.Now()
	for _, r := range e.ScoreAll(ctx, slices.Values(cases), 0) {
		got = append(got, r)
	}
	require.Len(t, got, 2)
	require.NotNil(t, got[0].Err)
	assert.Equal(t, KindTimeout, got[0].Err.Kind)
	assert.Contains(t, got[0].Feedback, "timed out after 500ms")
	require.Nil(t, got[1].Err)
	assert.Less(t, time.Since(start), 5*time.Second)
	r = e.Score(ctx, Case{ID: "after", Input: map[string]any{"n": 4}, Output: "x", Expected: map[string]any{"label": "x"}})
	require.Nil(t, r.Err)
	assert.Equal(t, 1.0, r.Score)
}

func TestAsyncScoreCheckSaysTheForm(t *testing.T) {
	e := open(t, Options{Metric: writeMetric(t, asyncMetric)})
	checks := e.Check(ctx, asyncCases(3, "x", nil))
	require.NotEmpty(t, checks)
	var sig string
	for _, c := range checks {
		assert.True(t, c.OK, "%s: %s", c.Name, c.Message)
		if c.Name == CheckSignature {
			sig = c.Message
		}
	}
	assert.Contains(t, sig, "async def score(input, output, expected=None)")

	// An async generator is still refused, saying what it is.
	_, err := Open(Options{Metric: writeMetric(t, "async def score(input, output):\n    yield 1\n")})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "`score` is an async generator (`async def` with `yield`)")
}

// asyncJudge awaits skynet.allm; it also calls the blocking skynet.llm
// and skynet.observation(), which find the task's case on the loop.
const asyncJudge = `import asyncio
import skynet

async def score(input, output, expected=None):
    a, b = await asyncio.gather(skynet.allm("judge", "Answer: " + output), skynet.allm("judge", "Answer: 5"))
    c = skynet.llm("judge", "Answer: " + output) if input.get("blocking") else "-"
    obs = skynet.observation()
    ok = a.startswith("PASS") and b.startswith("FAIL")
    return (1.0 if ok else 0.0), {"feedback": f"{a[:4]}|{b[:4]}|{c[:4]}|{sorted(obs)}"}
`

func TestAsyncScoreAwaitsTheModel(t *testing.T) {
	c, err := llm.New(llm.Config{ReflectionModel: "openai/m", BaseURL: "http://judge.invalid/v1",
		HTTPClient: &http.Client{Transport: judgeTransport(100 * time.Millisecond)}})
	require.NoError(t, err)
	e := open(t, Options{Metric: writeMetric(t, asyncJudge), LLM: c, Threads: 40})
	start := time.Now()
	n := 0
	for _, r := range e.ScoreAll(ctx, slices.Values(asyncCases(40, "4", nil)), 0) {
		require.Nil(t, r.Err)
		assert.Equal(t, 1.0, r.Score, r.Feedback)
		assert.Equal(t, "PASS|FAIL|-|['cost_usd', 'input_tokens', 'model_calls', 'output_tokens', 'run_ms']", r.Feedback)
		n++
	}
	assert.Equal(t, 40, n)
	// 40 cases of two 100 ms calls at once: about 0.1 s on one loop; 8 s one call at a time.
	assert.Less(t, time.Since(start), 3*time.Second)
	assert.Equal(t, int64(80), e.LLM().Stats(llm.RoleMetric).Calls, "two allm calls a case")

	r := e.Score(ctx, Case{ID: "b", Input: map[string]any{"n": 1, "blocking": true}, Output: "4"})
	require.Nil(t, r.Err)
	assert.True(t, strings.HasPrefix(r.Feedback, "PASS|FAIL|PASS|"), r.Feedback)

	// Without a case, allm says so.
	_, err = Open(Options{Metric: writeMetric(t, "import skynet\nskynet.allm('x')\nasync def score(i, o):\n    return 1.0, {'feedback': ''}\n")})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "skynet.allm() is only available while Skynet is calling score")
}

func TestAsyncScoreWithAProgram(t *testing.T) {
	dir := t.TempDir()
	metric := filepath.Join(dir, "metric.py")
	program := filepath.Join(dir, "program.py")
	require.NoError(t, os.WriteFile(metric, []byte(`import asyncio
async def score(input, output, expected=None):
    await asyncio.sleep(0.01)
    return float(output == expected["out"]), {"feedback": f"got {output}"}
`), 0o644))
	require.NoError(t, os.WriteFile(program, []byte(`def run(artifact, input):
    if input["q"] == "boom":
        raise RuntimeError("run failed")
    return artifact["prefix"] + input["q"]
`), 0o644))
	e := open(t, Options{Metric: metric, Program: program, Threads: 8})
	cases := []Case{{ID: "1", Input: map[string]any{"q": "a"}, Expected: map[string]any{"out": "pa"}}, {ID: "2", Input: map[string]any{"q": "b"}, Expected: map[string]any{"out": "zz"}},
		{ID: "3", Input: map[string]any{"q": "boom"}, Expected: map[string]any{"out": "x"}}}
	var got []Result
	for _, r := range e.Evaluate(ctx, map[string]any{"prefix": "p"}, slices.Values(cases)) {
		got = append(got, r)
	}
	require.Len(t, got, 3)
	assert.Equal(t, 1.0, got[0].Score)
	assert.Equal(t, "pa", got[0].Output)
	assert.Equal(t, 0.0, got[1].Score)
	assert.Equal(t, "got pb", got[1].Feedback)
	require.NotNil(t, got[2].Err)
	assert.Equal(t, KindRun, got[2].Err.Kind)
	assert.Contains(t, got[2].Feedback, "run failed")
	require.NotNil(t, got[0].Observation.RunMS, "run's time is measured")
}

func TestAsyncScoreClosesWithCasesInFlight(t *testing.T) {
	e, err := Open(Options{Metric: writeMetric(t, asyncMetric), Threads: 10})
	require.NoError(t, err)
	done := make(chan []Result)
	go func() {
		var got []Result
		for _, r := range e.ScoreAll(ctx, slices.Values(asyncCases(20, "x", map[string]any{"sleep": 30})), 0) {
			got = append(got, r)
		}
		done <- got
	}()
	time.Sleep(300 * time.Millisecond)
	start := time.Now()
	require.NoError(t, e.Close())
	select {
	case got := <-done:
		require.Len(t, got, 20)
		for _, r := range got {
			require.NotNil(t, r.Err)
			assert.Equal(t, KindCanceled, r.Err.Kind)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("closing the engine did not end the cases in flight")
	}
	assert.Less(t, time.Since(start), 5*time.Second)
}

func TestAsyncScoreBlockingTheLoopTimesOut(t *testing.T) {
	// time.sleep in a coroutine holds the loop: past the time limit the
	// watchdog times the cases out and interrupts the loop, which then runs on.
	e := open(t, Options{Metric: writeMetric(t, `import asyncio, time
async def score(input, output):
    if output == "block":
        time.sleep(3)
    await asyncio.sleep(0)
    return 1.0, {"feedback": "ok"}
`), Threads: 4, Timeout: 300 * time.Millisecond})
	r := e.Score(ctx, Case{ID: "b", Input: map[string]any{}, Output: "block"})
	require.NotNil(t, r.Err)
	assert.Equal(t, KindTimeout, r.Err.Kind)
	deadline := time.Now().Add(10 * time.Second)
	for {
		r = e.Score(ctx, Case{ID: "ok", Input: map[string]any{}, Output: "fine"})
		if r.Err == nil || time.Now().After(deadline) {
			break
		}
	}
	require.Nil(t, r.Err, "the loop scores again once the blocking call returned")
	assert.Equal(t, 1.0, r.Score)
}
