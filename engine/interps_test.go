package engine

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skynetml/skynet/cpython"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// everyInterpreter is a metric that does what the case's output names and
// says, in its feedback, which interpreter ran it: TOKEN is made at import,
// once per interpreter. Each case first spins 2 ms, so that a stream's
// cases spread over the interpreters.
const everyInterpreter = `
import subprocess, time, uuid
import skynet
TOKEN = uuid.uuid4().hex[:8]
calls = []

def score(input, output, expected=None):
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 0.002:
        pass
    calls.append(1)
    if output == "loop":
        while True:
            pass
    if output == "print":
        print("case", input["n"], "in", TOKEN)
        return 1.0, {"feedback": TOKEN}
    if output == "observe":
        o = skynet.observation()
        return o["run_ms"], {"feedback": TOKEN}
    if output == "tamper":
        try:
            skynet.observation = None
        except AttributeError as exc:
            return 1.0, {"feedback": TOKEN + " " + str(exc)}
        return 0.0, {"feedback": TOKEN + " tampered"}
    if output == "subprocess":
        try:
            subprocess.run(["true"])
        except PermissionError as exc:
            return 1.0, {"feedback": TOKEN + " " + str(exc)}
        return 0.0, {"feedback": TOKEN + " ran a process"}
    if output == "count":
        return float(len(calls)), {"feedback": TOKEN}
    return 1.0, {"feedback": TOKEN}
`

func needSubInterpreters(t *testing.T) {
	t.Helper()
	if !cpython.SubInterpreters() {
		t.Skipf("CPython %s has no per-interpreter GIL", cpython.PythonVersion())
	}
}

// scoreEach scores n cases whose output is what and returns the results in
// order, with the set of interpreters (TOKENs) that ran them.
func scoreEach(t *testing.T, e *Engine, what string, n int) ([]Result, []string) {
	t.Helper()
	cases := make([]Case, n)
	for i := range cases {
		run := 12.5
		cases[i] = Case{ID: fmt.Sprintf("%s%d", what, i), Input: map[string]any{"n": i}, Output: what,
			Observation: Observation{RunMS: &run}}
	}
	var results []Result
	var tokens []string
	for i, r := range e.ScoreAll(ctx, slices.Values(cases), 0) {
		require.Equal(t, len(results), i, "results come in input order")
		require.Equal(t, cases[i].ID, r.ID)
		results = append(results, r)
		if tok, _, _ := strings.Cut(r.Feedback, " "); r.Err == nil && !slices.Contains(tokens, tok) {
			tokens = append(tokens, tok)
		}
	}
	require.Len(t, results, n, "exactly one result per case")
	return results, tokens
}

// Under two interpreters every per-case mechanism works in each of them:
// results in order, captured output, observations, the read-only module,
// timeouts and the watchdog, and the audit hook.
func TestEveryFeatureInEveryInterpreter(t *testing.T) {
	needSubInterpreters(t)
	metric := writeMetric(t, everyInterpreter)
	e := open(t, Options{Metric: metric, Interpreters: 2, Timeout: 300 * time.Millisecond})
	require.Equal(t, 2, e.Interpreters())
	assert.Empty(t, e.Fallback())

	results, tokens := scoreEach(t, e, "print", 60)
	assert.Len(t, tokens, 2, "both interpreters scored")
	for i, r := range results {
		require.Nil(t, r.Err, "%+v", r.Err)
		assert.Equal(t, fmt.Sprintf("case %d in %s\n", i, r.Feedback), r.Logs, "each case's print is its own")
	}

	results, tokens = scoreEach(t, e, "observe", 40)
	assert.Len(t, tokens, 2)
	for _, r := range results {
		require.Nil(t, r.Err, "%+v", r.Err)
		assert.Equal(t, 12.5, r.Score, "observation() sees the case's own measurements")
	}

	results, tokens = scoreEach(t, e, "tamper", 40)
	assert.Len(t, tokens, 2)
	for _, r := range results {
		assert.Equal(t, 1.0, r.Score, "the skynet module is read-only in every interpreter: %s", r.Feedback)
		assert.Contains(t, r.Feedback, "the skynet module is read-only")
	}

	// Four runaway cases: each interpreter's watchdog interrupts its own,
	// and both interpreters then serve again.
	results, _ = scoreEach(t, e, "loop", 4)
	for _, r := range results {
		require.NotNil(t, r.Err)
		assert.Equal(t, KindTimeout, r.Err.Kind)
	}
	_, tokens = scoreEach(t, e, "plain", 60)
	assert.Len(t, tokens, 2, "both interpreters recovered from the timeouts")

}

// Module globals are per interpreter: each counts only the calls it ran.
func TestGlobalsArePerInterpreter(t *testing.T) {
	needSubInterpreters(t)
	e := open(t, Options{Metric: writeMetric(t, everyInterpreter), Interpreters: 2})
	results, tokens := scoreEach(t, e, "count", 60)
	require.Len(t, tokens, 2)
	ran, counted := map[string]float64{}, map[string]float64{}
	for _, r := range results {
		require.Nil(t, r.Err, "%+v", r.Err)
		ran[r.Feedback]++
		counted[r.Feedback] = max(counted[r.Feedback], r.Score)
	}
	assert.Equal(t, ran, counted)
}

func TestUntrustedInEveryInterpreter(t *testing.T) {
	needSubInterpreters(t)
	e := open(t, Options{Metric: writeMetric(t, everyInterpreter), Interpreters: 2, Untrusted: true})
	results, tokens := scoreEach(t, e, "subprocess", 40)
	assert.Len(t, tokens, 2)
	for _, r := range results {
		assert.Equal(t, 1.0, r.Score, r.Feedback)
		assert.Contains(t, r.Feedback, "skynet untrusted mode: subprocess.Popen is not allowed")
	}
	trusted := open(t, Options{Metric: writeMetric(t, everyInterpreter), Interpreters: 2})
	results, _ = scoreEach(t, trusted, "subprocess", 4)
	for _, r := range results {
		assert.Equal(t, 0.0, r.Score, "trusted sub-interpreters may start processes: %s", r.Feedback)
	}
}

// A metric importing an extension module that cannot be loaded in a
// sub-interpreter falls back to the main interpreter, once, and says which.
func TestSubInterpreterFallback(t *testing.T) {
	needSubInterpreters(t)
	metric := writeMetric(t, "import _testsinglephase\ndef score(i, o, e=None):\n    return 1.0, {'feedback': 'ok'}\n")
	e, err := Open(Options{Metric: metric, Interpreters: 2})
	if err != nil && strings.Contains(err.Error(), "No module named '_testsinglephase'") {
		t.Skip("this CPython has no _testsinglephase module")
	}
	require.NoError(t, err)
	defer e.Close()
	assert.Equal(t, 1, e.Interpreters())
	assert.Contains(t, e.Fallback(), "scoring in the main interpreter only")
	assert.Contains(t, e.Fallback(), "_testsinglephase does not support loading in subinterpreters")
	checks := e.Check(ctx, []Case{{ID: "a", Input: map[string]any{}}})
	i := slices.IndexFunc(checks, func(c Check) bool { return c.Name == CheckInterpreters })
	require.GreaterOrEqual(t, i, 0, "%v", checks)
	assert.True(t, checks[i].OK, "a fallback is a notice, not a failed check")
	assert.Equal(t, e.Fallback(), checks[i].Message)
	assert.True(t, checks[len(checks)-1].OK, "the metric scores in the main interpreter")
}

func TestInterpretersNeedPython312(t *testing.T) {
	if cpython.SubInterpreters() {
		e := open(t, Options{Metric: "../testdata/exact_match/metric.py"})
		assert.GreaterOrEqual(t, e.Interpreters(), 1, "auto is one per CPU")
		return
	}
	_, err := Open(Options{Metric: "../testdata/exact_match/metric.py", Interpreters: 2})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "needs CPython 3.12 or later")
	assert.Contains(t, err.Error(), "embeds CPython "+cpython.PythonVersion())
	e := open(t, Options{Metric: "../testdata/exact_match/metric.py"})
	assert.Equal(t, 1, e.Interpreters(), "auto means 1 before 3.12")
}

// A case that imports, inside score, a module a sub-interpreter refuses is
// scored in the main interpreter, and so is everything after it: no case
// gets the refusal as its result. (_testsinglephase, not ctypes, so that
// no other test finds ctypes already imported in the main interpreter.)
func TestLazyImportRefusedInSubInterpreter(t *testing.T) {
	needSubInterpreters(t)
	metric := writeMetric(t, everyInterpreter+`
_score = score
def score(input, output, expected=None):
    if output == "lazy":
        _score(input, "plain", expected)  # 2 ms, so that the cases spread
        import _testsinglephase
        return 1.0, {"feedback": TOKEN + " imported"}
    return _score(input, output, expected)
`)
	e := open(t, Options{Metric: metric, Interpreters: 2})
	_, tokens := scoreEach(t, e, "plain", 40)
	require.Len(t, tokens, 2)
	// Until a sub-interpreter has met a lazy case (the first stream almost
	// always gives it one).
	for round := 0; round < 5 && e.fallback.Load() == nil; round++ {
		var results []Result
		results, tokens = scoreEach(t, e, "lazy", 40)
		if results[0].Err != nil && strings.Contains(results[0].Err.Message, "No module named") {
			t.Skip("this CPython has no _testsinglephase module")
		}
		for _, r := range results {
			require.Nil(t, r.Err, "%+v", r.Err)
			assert.Equal(t, 1.0, r.Score)
		}
		assert.Len(t, tokens, 1, "every case ran in the main interpreter")
	}
	assert.Contains(t, e.Fallback(), "from now on: a case needs an import a sub-interpreter refuses")
	assert.Contains(t, e.Fallback(), "_testsinglephase does not support loading in subinterpreters")
	assert.Equal(t, 1, e.Interpreters())
	_, after := scoreEach(t, e, "plain", 40)
	assert.Equal(t, tokens, after, "the main interpreter alone scores from then on")
	checks := e.Check(ctx, []Case{{ID: "a", Input: map[string]any{}, Output: "plain"}})
	require.GreaterOrEqual(t, len(checks), 2)
	assert.Equal(t, CheckInterpreters, checks[len(checks)-2].Name)
}

// Evaluate runs the program in every interpreter too: each has its own
// copy of program.py, and run's measured time reaches score there.
func TestEvaluateInEveryInterpreter(t *testing.T) {
	needSubInterpreters(t)
	program := writeFile(t, "program.py", `
import time, uuid
TOKEN = uuid.uuid4().hex[:8]
def run(artifact, input):
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 0.002:
        pass
    return artifact + ":" + TOKEN
`)
	metric := writeMetric(t, `
import skynet
def score(input, output, expected=None):
    return (1.0 if skynet.observation()["run_ms"] >= 2 else 0.0), {"feedback": output}
`)
	e := open(t, Options{Metric: metric, Program: program, Interpreters: 2})
	require.Equal(t, 2, e.Interpreters())
	cases := make([]Case, 60)
	for i := range cases {
		cases[i] = Case{ID: fmt.Sprint(i), Input: map[string]any{"n": i}}
	}
	tokens := map[string]bool{}
	for _, r := range evaluate(t, e, "art", cases...) {
		require.Nil(t, r.Err, "%+v", r.Err)
		assert.Equal(t, 1.0, r.Score, "run's 2 ms reached observation()")
		art, tok, _ := strings.Cut(r.Feedback, ":")
		assert.Equal(t, "art", art)
		tokens[tok] = true
	}
	assert.Len(t, tokens, 2, "both interpreters ran the program")
}
