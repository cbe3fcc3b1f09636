package engine

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skynetml/skynet/llm"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func writeFile(t *testing.T, name, source string) string {
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, []byte(source), 0o644))
	return path
}

func evaluate(t *testing.T, e *Engine, artifact any, cases ...Case) []Result {
	var out []Result
	for _, r := range e.Evaluate(ctx, artifact, sliceSeq(cases)) {
		out = append(out, r)
	}
	require.Len(t, out, len(cases))
	return out
}

// The output goes from run to score as the Python object itself.
func TestEvaluatePassesTheObject(t *testing.T) {
	program := writeFile(t, "program.py", `
class Answer:
    def __init__(self, text): self.text = text
    def __repr__(self): return f"Answer({self.text!r})"
def run(artifact, input):
    return Answer(artifact + input["q"])
`)
	metric := writeFile(t, "metric.py", `
def score(input, output, expected=None):
    kind = type(output).__name__
    return (1.0 if output.text == expected["label"] else 0.0), {"feedback": f"{kind}: {output.text}"}
`)
	e := open(t, Options{Metric: metric, Program: program})
	// The caller's Output is not used (run makes it), so it need not even encode.
	rs := evaluate(t, e, "say ", Case{ID: "a", Input: map[string]any{"q": "hi"}, Output: struct{}{}, Expected: map[string]any{"label": "say hi"}})
	require.Nil(t, rs[0].Err, "%+v", rs[0].Err)
	assert.Equal(t, 1.0, rs[0].Score)
	assert.Equal(t, "Answer: say hi", rs[0].Feedback)
	assert.True(t, strings.HasPrefix(rs[0].Output.(string), "skynet_program_"), "a non-JSON output is reported by its repr: %v", rs[0].Output)
	assert.Contains(t, rs[0].Output, "Answer('say hi')")
}

// Run time is measured by the host around run; run code cannot change it.
func TestEvaluateMeasuresRunTime(t *testing.T) {
	program := writeFile(t, "program.py", `
import time, skynet
def run(artifact, input):
    time.sleep(0.03)
    time._skynet_test_clocks = time.perf_counter, time.monotonic
    time.perf_counter = lambda: 0.0
    time.monotonic = lambda: 0.0
    try:
        skynet.observation = lambda: {"run_ms": 0.0}
    except AttributeError:
        pass
    return input["label"]
`)
	// score, which runs after the host measured run, puts the clocks back:
	// the interpreter is the whole test process's, and asyncio's loop reads
	// time.monotonic (a stopped clock hangs the async tests run after this).
	reward, err := filepath.Abs("../testdata/reward/metric.py")
	require.NoError(t, err)
	metric := writeFile(t, "metric.py", fmt.Sprintf(`
import time, importlib.util
spec = importlib.util.spec_from_file_location("reward_metric", %q)
reward_metric = importlib.util.module_from_spec(spec)
spec.loader.exec_module(reward_metric)
def score(input, output, expected=None):
    time.perf_counter, time.monotonic = time.__dict__.pop("_skynet_test_clocks", (time.perf_counter, time.monotonic))
    return reward_metric.score(input, output, expected)
`, reward))
	e := open(t, Options{Metric: metric, Program: program})
	rs := evaluate(t, e, "x", Case{ID: "1", Input: map[string]any{"label": "billing"}, Expected: map[string]any{"label": "billing"}})
	r := rs[0]
	require.Nil(t, r.Err, "%+v", r.Err)
	require.NotNil(t, r.Observation.RunMS)
	assert.GreaterOrEqual(t, *r.Observation.RunMS, 30.0)
	assert.Less(t, *r.Observation.RunMS, 1000.0)
	assert.InDelta(t, 2000/(2000+*r.Observation.RunMS), r.Scores["speed"], 1e-3, "reward saw the host's run time")
	assert.Equal(t, 1.0, r.Scores["cost"], "no model calls: cost measured as 0")
	assert.Equal(t, "billing", r.Output)
}

func priced(t *testing.T, delay time.Duration) (*llm.Client, *httptest.Server) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(delay)
		fmt.Fprint(w, `{"choices": [{"message": {"content": " Billing "}}], "usage": {"prompt_tokens": 1000, "completion_tokens": 100}}`)
	}))
	t.Cleanup(srv.Close)
	c, err := llm.New(llm.Config{TaskModel: "openai/task", MetricModel: "openai/judge", BaseURL: srv.URL + "/v1",
		Prices: llm.Prices{"openai/task": {Input: 1e-6, Output: 2e-6}}})
	require.NoError(t, err)
	return c, srv
}

// The task model's cost during run becomes the case's cost: what
// service_cost() and reward() see.
func TestEvaluateMeasuresTaskModelCost(t *testing.T) {
	client, _ := priced(t, 0)
	metric := writeFile(t, "metric.py", `
from skynet import reward, service_cost, observation
import json
REWARD_SPEC = {"weights": {"accuracy": 1, "speed": 0, "cost": 1}, "speed": {"reference": 1000}, "cost": {"reference": 0.0012}}
def score(input, output, expected=None):
    value, side = reward(REWARD_SPEC, 1.0 if output == expected["label"] else 0.0, "ok")
    o = observation()
    side["feedback"] += f" service_cost={service_cost()} calls={o['model_calls']} tokens={o['input_tokens']}+{o['output_tokens']}"
    return value, side
`)
	e := open(t, Options{Metric: metric, Program: "../testdata/programs/classify.py", LLM: client})
	rs := evaluate(t, e, "Classify the message.", Case{ID: "1", Input: map[string]any{"message": "charged twice"}, Expected: map[string]any{"label": "billing"}})
	r := rs[0]
	require.Nil(t, r.Err, "%+v", r.Err)
	assert.Equal(t, "billing", r.Output)
	require.NotNil(t, r.Observation.CostUSD)
	assert.InDelta(t, 1000e-6+200e-6, *r.Observation.CostUSD, 1e-12)
	assert.Equal(t, int64(1), *r.Observation.ModelCalls)
	assert.InDelta(t, 0.5, r.Scores["cost"], 1e-9, "cost at the reference: part 1/2")
	assert.Contains(t, r.Feedback, "service_cost=0.0012")
	assert.Contains(t, r.Feedback, " calls=1 tokens=1000+100")
	assert.Equal(t, int64(1), e.Stats().Models[llm.RoleTask].Calls)
	assert.Equal(t, int64(0), e.Stats().Models[llm.RoleMetric].Calls, "task calls are accounted apart")
}

func TestEvaluateUnpricedCostIsNotMeasured(t *testing.T) {
	client, _ := priced(t, 0)
	program := writeFile(t, "program.py", "from skynet import llm\ndef run(artifact, input):\n    return llm('x').strip().lower()\n")
	// The judge model has no price: but it is only the metric model. Use an
	// unpriced task model by asking a client without prices.
	c2, err := llm.New(llm.Config{TaskModel: "openai/unpriced", BaseURL: client.BaseURL()})
	require.NoError(t, err)
	e := open(t, Options{Metric: "../testdata/reward/metric.py", Program: program, LLM: c2})
	r := evaluate(t, e, "a", Case{ID: "1", Input: map[string]any{}, Expected: map[string]any{"label": "billing"}})[0]
	require.Nil(t, r.Err, "%+v", r.Err)
	assert.Nil(t, r.Observation.CostUSD)
	assert.Equal(t, 0.0, r.Scores["cost"])
	assert.Contains(t, r.Feedback, "cost was not measured, so the cost part is 0")
}

func TestEvaluateRunErrors(t *testing.T) {
	program := writeFile(t, "program.py", `
def run(artifact, input):
    if input["kind"] == "raise":
        raise ValueError("bad input")
    if input["kind"] == "spin":
        while True:
            pass
    return "fine"
`)
	e := open(t, Options{Metric: "../testdata/exact_match/metric.py", Program: program, RunTimeout: 200 * time.Millisecond})
	rs := evaluate(t, e, "a",
		Case{ID: "r", Input: map[string]any{"kind": "raise"}, Expected: map[string]any{"label": "fine"}},
		Case{ID: "s", Input: map[string]any{"kind": "spin"}, Expected: map[string]any{"label": "fine"}},
		Case{ID: "f", Input: map[string]any{"kind": "ok"}, Expected: map[string]any{"label": "fine"}})
	require.NotNil(t, rs[0].Err)
	assert.Equal(t, KindRun, rs[0].Err.Kind)
	assert.Equal(t, "case r: run raised ValueError: bad input", rs[0].Err.Message)
	assert.Contains(t, rs[0].Err.Traceback, "program.py")
	require.NotNil(t, rs[1].Err)
	assert.Equal(t, KindRun, rs[1].Err.Kind)
	assert.Equal(t, "case s: run timed out after 200ms", rs[1].Err.Message)
	require.Nil(t, rs[2].Err, "%+v", rs[2].Err)
	assert.Equal(t, 1.0, rs[2].Score)
	// Only f reached score: a run that failed is no score call. (The count
	// is added when the batch returns, just after its results.)
	require.Eventually(t, func() bool { return e.Stats().ScoreCalls >= 1 }, 2*time.Second, 5*time.Millisecond)
	time.Sleep(50 * time.Millisecond)
	assert.Equal(t, int64(1), e.Stats().ScoreCalls)
}

func TestProgramChecks(t *testing.T) {
	for source, want := range map[string]string{
		"def run(artifact):\n    pass\n":              "found run(artifact): run must take (artifact, input)",
		"RUN = 1\n":                                   "the program defines no `run` function",
		"async def run(artifact, input):\n    pass\n": "`run` is `async def`; it must be a plain `def` (Skynet calls it directly)",
	} {
		_, err := Open(Options{Metric: "../testdata/exact_match/metric.py", Program: writeFile(t, "program.py", source)})
		var ce *CheckError
		require.True(t, errors.As(err, &ce), "%v", err)
		assert.Equal(t, CheckRunSignature, ce.Failed().Name)
		assert.Equal(t, want, ce.Failed().Message)
	}
	_, err := Open(Options{Metric: "../testdata/exact_match/metric.py", Program: "no/program.py"})
	var ce *CheckError
	require.True(t, errors.As(err, &ce))
	assert.Equal(t, CheckProgramLoads, ce.Failed().Name)
}
