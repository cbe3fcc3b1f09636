package engine

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An int past sys.get_int_max_str_digits() (4300 digits) cannot be turned
// into text in Python 3.11+: as a score or named score it is a contract
// error that says what it is, and as an extra side-info key it is dropped
// with a warning, the way other values JSON cannot hold are.
func TestHugeIntsInReturnValues(t *testing.T) {
	e := open(t, Options{Metric: writeMetric(t, `
def score(input, output, expected=None):
    kind, n = input["kind"], input.get("mul", 1) * 10**input.get("exp", 100000) + input.get("add", 0)
    if kind == "score": return n, {"feedback": "x"}
    if kind == "neg": return -n, {"feedback": "x"}
    if kind == "shifted": return 1 << input["bits"], {"feedback": "x"}
    if kind == "named": return 1.0, {"feedback": "x", "scores": {"ok": 0.5, "big": n}}
    if kind == "extra": return 0.5, {"feedback": "x", "big": n, "keep": [1, "a"], "nested": {"deep": [n]}}
    if kind == "output": return 1.0, {"feedback": "x", "n": output}
`)})
	score := func(id string, input map[string]any) Result {
		return e.Score(ctx, Case{ID: id, Input: input, Output: nil})
	}
	contract := func(r Result, want string) {
		t.Helper()
		require.NotNil(t, r.Err, "%+v", r)
		assert.Equal(t, KindContract, r.Err.Kind)
		assert.Equal(t, want, r.Err.Message)
		assert.Equal(t, want, r.Feedback, "the optimizer is told the same")
	}

	contract(score("s", map[string]any{"kind": "score"}),
		"case s: metric's return value: score must be a finite number, got an int of 100001 digits (too large for a float)")
	contract(score("n", map[string]any{"kind": "neg"}),
		"case n: metric's return value: score must be a finite number, got a negative int of 100001 digits (too large for a float)")
	// The digit count is exact, on both sides of a power of ten...
	contract(score("d", map[string]any{"kind": "score", "add": -1}),
		"case d: metric's return value: score must be a finite number, got an int of 100000 digits (too large for a float)")
	contract(score("m", map[string]any{"kind": "score", "mul": 7, "exp": 5000}),
		"case m: metric's return value: score must be a finite number, got an int of 5001 digits (too large for a float)")
	// ...an int Python can still print is sized from its digits...
	contract(score("p", map[string]any{"kind": "score", "exp": 400}),
		"case p: metric's return value: score must be a finite number, got an int of 401 digits (too large for a float)")
	// ...and past 300,000 digits it is an estimate, said to be one (2**1328771 has 400000).
	contract(score("a", map[string]any{"kind": "shifted", "bits": 1328771}),
		"case a: metric's return value: score must be a finite number, got an int of about 400001 digits (too large for a float)")
	contract(score("k", map[string]any{"kind": "named"}),
		`case k: metric's return value: named score "big" must be a finite number, got an int of 100001 digits (too large for a float)`)

	r := score("x", map[string]any{"kind": "extra"})
	require.Nil(t, r.Err, "%+v", r.Err)
	assert.Equal(t, 0.5, r.Score)
	assert.Equal(t, "x", r.Feedback, "nothing of the value buffer leaks into the feedback")
	assert.Equal(t, map[string]any{"keep": []any{int64(1), "a"}}, r.Extra)
	assert.Equal(t, []string{
		`side info key "big" dropped: an int of 100001 digits is longer than Python writes as text (sys.get_int_max_str_digits())`,
		`side info key "nested" dropped: an int of 100001 digits is longer than Python writes as text (sys.get_int_max_str_digits())`,
	}, r.Warnings)

	// The engine goes on serving.
	r = score("after", map[string]any{"kind": "score", "exp": 2})
	require.Nil(t, r.Err, "%+v", r.Err)
	assert.Equal(t, 100.0, r.Score)
}

// A program whose run returns a huge int is scored like any other: the
// output is reported by its size, not turned into a run error.
func TestHugeIntOutput(t *testing.T) {
	program := writeFile(t, "program.py", `
def run(artifact, input):
    return -10**input["exp"]
`)
	metric := writeFile(t, "metric.py", `
def score(input, output, expected=None):
    return 1.0, {"feedback": f"{output.bit_length()} bits", "out": output}
`)
	e := open(t, Options{Metric: metric, Program: program})
	rs := evaluate(t, e, "", Case{ID: "h", Input: map[string]any{"exp": 100000}})
	require.Nil(t, rs[0].Err, "%+v", rs[0].Err)
	assert.Equal(t, 1.0, rs[0].Score)
	assert.Equal(t, "332193 bits", rs[0].Feedback)
	assert.Equal(t, "negative int of 100001 digits", rs[0].Output)
	assert.Equal(t, []string{
		`side info key "out" dropped: a negative int of 100001 digits is longer than Python writes as text (sys.get_int_max_str_digits())`,
	}, rs[0].Warnings)
}

// The digit count of a huge int is the length of its decimal text, around
// powers of ten and powers of two alike.
func TestHugeIntDigitCounts(t *testing.T) {
	e := open(t, Options{Metric: writeMetric(t, `
import random, sys
def score(input, output, expected=None):
    n = eval(input["n"], {"random": random.Random(input["seed"])})
    limit = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    digits = len(str(abs(n)))
    sys.set_int_max_str_digits(limit)
    return 1.0, {"feedback": f"an int of {digits} digits", "n": abs(n)}
`)})
	exprs := []string{"10**4301", "10**4301 - 1", "2**14287", "2**14288 - 1", "random.getrandbits(100000)",
		"10**99999", "10**99999 - 1", "10**99998 * 9", "random.randrange(10**54321)"}
	for i, expr := range exprs {
		r := e.Score(ctx, Case{ID: expr, Input: map[string]any{"n": expr, "seed": i}})
		require.Nil(t, r.Err, "%s: %+v", expr, r.Err)
		require.Len(t, r.Warnings, 1, expr)
		assert.Equal(t, `side info key "n" dropped: `+r.Feedback+` is longer than Python writes as text (sys.get_int_max_str_digits())`,
			r.Warnings[0], expr)
	}
}
