package engine

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var ctx = context.Background()

// writeMetric writes source as metric.py in a new temp dir and returns its path.
func writeMetric(t *testing.T, source string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "metric.py")
	require.NoError(t, os.WriteFile(path, []byte(source), 0o644))
	return path
}

func open(t *testing.T, opts Options) *Engine {
	t.Helper()
	e, err := Open(opts)
	require.NoError(t, err)
	t.Cleanup(func() { e.Close() })
	return e
}

// readCases reads a testdata case file: package caseio, which reads case
// files, imports engine, so its tests read theirs plainly.
func readCases(t testing.TB, path string) []Case {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var cases []Case
	for _, line := range bytes.Split(data, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var l struct {
			ID                      string
			Input, Output, Expected json.RawMessage
			Observation             Observation
		}
		require.NoError(t, json.Unmarshal(line, &l), path)
		c := Case{ID: l.ID, Input: l.Input, Output: l.Output, Observation: l.Observation}
		if l.Expected != nil {
			c.Expected = l.Expected
		}
		cases = append(cases, c)
	}
	return cases
}

func TestExactMatchExample(t *testing.T) {
	e := open(t, Options{Metric: "../testdata/exact_match/metric.py"})
	assert.Equal(t, 3, e.Arity())
	var got []string
	for _, c := range readCases(t, "../testdata/exact_match/cases.jsonl") {
		r := e.Score(ctx, c)
		require.Nil(t, r.Err, "%+v", r.Err)
		got = append(got, fmt.Sprintf("%s %.1f %s", r.ID, r.Score, r.Feedback))
	}
	assert.Equal(t, []string{
		"t1 1.0 Correct.",
		"t2 0.0 Expected 'bug', got 'other'.",
		"t3 1.0 Correct.",
		"t4 1.0 Correct.",
		"t5 0.0 Expected 'feature', got 'bug'.",
		"t6 1.0 Correct.",
	}, got)
}

func TestJSONFieldsExample(t *testing.T) {
	e := open(t, Options{Metric: "../testdata/json_fields/metric.py"})
	var got []string
	for _, c := range readCases(t, "../testdata/json_fields/cases.jsonl") {
		r := e.Score(ctx, c)
		require.Nil(t, r.Err)
		got = append(got, fmt.Sprintf("%s %.2f format=%.1f fields=%.1f %s", r.ID, r.Score, r.Scores["format"], r.Scores["fields"], r.Feedback))
	}
	assert.Equal(t, "j1 1.00 format=1.0 fields=1.0 All fields present.", got[0])
	assert.Equal(t, "j2 0.75 format=1.0 fields=0.5 Missing fields: year.", got[1])
	assert.True(t, strings.HasPrefix(got[2], "j3 0.00 format=0.0 fields=0.0 Output is not valid JSON: "), got[2])
	assert.Equal(t, "j4 1.00 format=1.0 fields=1.0 All fields present.", got[3])
}

// expectation reads the "# key: value" first line of a testdata file.
func expectation(t *testing.T, path, key string) string {
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	line, _ := bufio.NewReader(f).ReadString('\n')
	prefix := "# " + key + ": "
	require.True(t, strings.HasPrefix(line, prefix), "%s: first line must start with %q", path, prefix)
	return strings.TrimSpace(strings.TrimPrefix(line, prefix))
}

func TestReturnValueTable(t *testing.T) {
	cases := readCases(t, "../testdata/exact_match/cases.jsonl")
	files, _ := filepath.Glob("../testdata/contract/*.py")
	require.NotEmpty(t, files)
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			want := expectation(t, path, "check")
			e := open(t, Options{Metric: path})
			checks := e.Check(ctx, cases)
			require.Len(t, checks, 3)
			rv := checks[2]
			assert.Equal(t, CheckReturnValue, rv.Name)
			assert.False(t, rv.OK)
			assert.Equal(t, "t1", rv.Case)
			// Three samples, each failing the same way, reported once, and
			// the check's message does not repeat its case or name.
			found := strings.TrimPrefix(strings.TrimPrefix(want, "case t1: "), CheckReturnValue+": ")
			assert.Equal(t, found+" (also case t2, t3)", rv.Message)
			if strings.Contains(want, "pair") || strings.Contains(want, "side info must be a dict") || strings.Contains(want, `"feedback"`) {
				assert.Equal(t, `return score, {"feedback": "..."}`, rv.Fix, "a wrong shape shows the contract's line")
			}
			if strings.Contains(want, "score must be a number") {
				assert.Equal(t, `return float(score), {"feedback": "..."}`, rv.Fix)
			}
			if strings.Contains(want, "finite") || strings.Contains(want, "named score") || strings.Contains(want, "raised") {
				assert.Empty(t, rv.Fix)
			}
			r := e.Score(ctx, cases[0])
			require.NotNil(t, r.Err)
			assert.Equal(t, 0.0, r.Score)
			if strings.Contains(want, "score raised") {
				assert.Equal(t, KindException, r.Err.Kind)
			} else {
				assert.Equal(t, KindContract, r.Err.Kind)
				assert.Equal(t, want, r.Err.Message)
				assert.Equal(t, want, r.Feedback)
			}
		})
	}
}

func TestValidReturnValues(t *testing.T) {
	e := open(t, Options{Metric: writeMetric(t, `
class Unserialisable: pass
def score(input, output, expected=None):
    kind = input["kind"]
    if kind == "tuple": return (0.8, {"feedback": "Close. Missing the date."})
    if kind == "list": return [1.0, {"feedback": "OK", "scores": {"format": 1.0}}]
    if kind == "int": return (1, {"feedback": "int", "scores": {"n": 2}})
    if kind == "extra": return (0.5, {"feedback": "x", "trace": [1, "a"], "obj": Unserialisable(), "bad": {1}, "nan": float("nan")})
`)})
	c := func(kind string) Case { return Case{ID: kind, Input: map[string]any{"kind": kind}, Output: nil} }
	r := e.Score(ctx, c("tuple"))
	require.Nil(t, r.Err)
	assert.Equal(t, 0.8, r.Score)
	assert.Equal(t, "Close. Missing the date.", r.Feedback)
	r = e.Score(ctx, c("list"))
	require.Nil(t, r.Err)
	assert.Equal(t, map[string]float64{"format": 1.0}, r.Scores)
	r = e.Score(ctx, c("int"))
	require.Nil(t, r.Err)
	assert.Equal(t, 1.0, r.Score)
	assert.Equal(t, map[string]float64{"n": 2.0}, r.Scores)
	r = e.Score(ctx, c("extra"))
	require.Nil(t, r.Err)
	assert.Equal(t, map[string]any{"trace": []any{int64(1), "a"}}, r.Extra)
	assert.Equal(t, []string{
		`side info key "obj" dropped: skynet_metric_` + moduleSuffix(e) + `.Unserialisable is not JSON-serialisable`,
		`side info key "bad" dropped: set is not JSON-serialisable`,
		`side info key "nan" dropped: float nan is not valid JSON`,
	}, r.Warnings)
}

func moduleSuffix(e *Engine) string { return strings.TrimPrefix(e.module, "skynet_metric_") }

func TestSignatures(t *testing.T) {
	files, _ := filepath.Glob("../testdata/signature/*.py")
	require.NotEmpty(t, files)
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			e, err := Open(Options{Metric: path})
			first, _ := os.ReadFile(path)
			if strings.HasPrefix(string(first), "# arity: ") {
				require.NoError(t, err)
				defer e.Close()
				want := expectation(t, path, "arity")
				assert.Equal(t, want, fmt.Sprint(e.Arity()))
				r := e.Score(ctx, Case{ID: "1", Input: map[string]any{}, Output: "out", Expected: map[string]any{"label": "x"}})
				require.Nil(t, r.Err, "%+v", r.Err)
				if want == "2" {
					assert.Equal(t, "two: out", r.Feedback, "called as score(input, output)")
				}
				return
			}
			want := expectation(t, path, "signature")
			var ce *CheckError
			require.True(t, errors.As(err, &ce), "%v", err)
			assert.Equal(t, CheckSignature, ce.Failed().Name)
			assert.Equal(t, want, ce.Failed().Message)
			assert.True(t, ce.Checks[0].OK, "metric loads passed before the signature check")
		})
	}
	// The three-argument forms receive expected; *args gets all three.
	e := open(t, Options{Metric: "../testdata/signature/varargs.py"})
	r := e.Score(ctx, Case{ID: "1", Input: map[string]any{}, Output: 1})
	assert.Equal(t, 3.0, r.Score)
}

func TestLoadFailures(t *testing.T) {
	for name, tc := range map[string]struct{ source, want string }{
		"syntax":  {"def score(input, output:\n    pass\n", "SyntaxError: "},
		"import":  {"import no_such_module_xyz\n", "ModuleNotFoundError: No module named 'no_such_module_xyz'"},
		"raises":  {"raise RuntimeError('boom at import')\n", "RuntimeError: boom at import"},
		"sysexit": {"import sys\nsys.exit(4)\n", "SystemExit: 4"},
	} {
		t.Run(name, func(t *testing.T) {
			path := writeMetric(t, tc.source)
			_, err := Open(Options{Metric: path})
			var ce *CheckError
			require.True(t, errors.As(err, &ce), "%v", err)
			assert.Equal(t, CheckLoads, ce.Failed().Name)
			assert.Contains(t, ce.Failed().Message, path+": "+tc.want)
		})
	}
	_, err := Open(Options{Metric: "no/such/metric.py"})
	var ce *CheckError
	require.True(t, errors.As(err, &ce))
	assert.Equal(t, "no/such/metric.py: no such file", ce.Failed().Message)
	assert.ErrorIs(t, err, fs.ErrNotExist, "a wrong path can be told from a broken metric")
	_, err = Open(Options{Metric: "../testdata/signature/one_arg.py"})
	require.ErrorAs(t, err, &ce)
	assert.NotErrorIs(t, err, fs.ErrNotExist)
}

func TestTimeoutOption(t *testing.T) {
	path := "../testdata/exact_match/metric.py"
	_, err := Open(Options{Metric: path, Timeout: 601 * time.Second})
	assert.EqualError(t, err, "engine: timeout 10m1s exceeds the maximum of 10m0s")
	_, err = Open(Options{Metric: path, Timeout: -time.Second})
	assert.Error(t, err)
	e := open(t, Options{Metric: path})
	assert.Equal(t, 60*time.Second, e.timeout)
	e = open(t, Options{Metric: path, Timeout: 600 * time.Second})
	assert.Equal(t, 600*time.Second, e.timeout)
}

// TestTimeLimitEndsWhenScoreReturns: the time limit and a result's time are
// the score call's; encoding what it returned starts the limit again (it
// bounds a runaway __repr__ of a returned object), so a call and an encoding
// that each take 60% of the limit are not timed out together.
func TestTimeLimitEndsWhenScoreReturns(t *testing.T) {
	e := open(t, Options{Metric: writeMetric(t, `
import time
class Slow:
    def __repr__(self):
        time.sleep(0.12)
        return "slow"
def score(input, output, expected=None):
    time.sleep(0.12)
    return 1.0, {"feedback": "ok", "object": Slow()}
`), Timeout: 200 * time.Millisecond})
	r := e.Score(ctx, Case{ID: "a", Input: map[string]any{}, Output: "x"})
	require.Nil(t, r.Err, "%v", r.Err)
	assert.Less(t, r.Duration, 200*time.Millisecond, "the call's time, without the encoding")
	assert.GreaterOrEqual(t, r.Duration, 120*time.Millisecond)
}

func TestExceptionsNeverStopTheHost(t *testing.T) {
	e := open(t, Options{Metric: writeMetric(t, `
import sys
class Custom(BaseException): pass
def score(input, output, expected=None):
    k = output
    if k == "zero": return 1 / 0
    if k == "exit": sys.exit(2)
    if k == "exit0": raise SystemExit
    if k == "kbd": raise KeyboardInterrupt
    if k == "recurse": return score(input, output, expected)
    if k == "base": raise Custom("custom base")
    return 1.0, {"feedback": "fine"}
`)})
	for kind, want := range map[string]string{
		"zero": "ZeroDivisionError: division by zero", "exit": "SystemExit: 2", "exit0": "SystemExit",
		"kbd": "KeyboardInterrupt", "recurse": "RecursionError: maximum recursion depth exceeded",
		"base": "skynet_metric_" + moduleSuffix(e) + ".Custom: custom base",
	} {
		r := e.Score(ctx, Case{ID: kind, Input: map[string]any{}, Output: kind})
		require.NotNil(t, r.Err, kind)
		assert.Equal(t, KindException, r.Err.Kind, kind)
		if kind == "recurse" {
			// CPython 3.10 names where the limit was hit: "... exceeded in
			// comparison" here (k == "zero"), or "while calling a Python object".
			assert.Regexp(t, "^"+regexp.QuoteMeta(want)+"( in comparison| while calling a Python object)?$", r.Err.Message)
		} else {
			assert.Equal(t, want, r.Err.Message, kind)
		}
		assert.Equal(t, r.Err.Message, r.Feedback, "%s: optimizer sees type and message only", kind)
		assert.Contains(t, r.Err.Traceback, "metric.py", kind)
		assert.NotContains(t, r.Feedback, "Traceback", kind)
		// The next case goes on as normal.
		ok := e.Score(ctx, Case{ID: "after", Input: map[string]any{}, Output: "x"})
		require.Nil(t, ok.Err, kind)
		assert.Equal(t, 1.0, ok.Score)
	}
}

func TestTimeoutInterruptsBusyLoop(t *testing.T) {
	e := open(t, Options{Metric: writeMetric(t, `
def score(input, output, expected=None):
    if output == "spin":
        while True:
            pass
    if output == "swallow":
        while True:
            try:
                while True:
                    pass
            except Exception:
                pass
    return 1.0, {"feedback": "ok"}
`), Timeout: 200 * time.Millisecond})
	for _, kind := range []string{"spin", "swallow"} {
		start := time.Now()
		r := e.Score(ctx, Case{ID: "7", Input: map[string]any{}, Output: kind})
		require.NotNil(t, r.Err)
		assert.Equal(t, KindTimeout, r.Err.Kind)
		assert.Equal(t, "case 7: score timed out after 200ms", r.Err.Message)
		assert.Less(t, time.Since(start), 2*time.Second)
		r = e.Score(ctx, Case{ID: "8", Input: map[string]any{}, Output: "fine"})
		require.Nil(t, r.Err, "a pending interrupt must not hit the next case: %+v", r.Err)
	}
}

func TestTimeoutReplacesBlockedWorker(t *testing.T) {
	e := open(t, Options{Metric: writeMetric(t, `
import time
def score(input, output, expected=None):
    if output == "sleep":
        time.sleep(3)
    return 1.0, {"feedback": "ok"}
`), Timeout: 200 * time.Millisecond})
	start := time.Now()
	r := e.Score(ctx, Case{ID: "s", Input: map[string]any{}, Output: "sleep"})
	require.NotNil(t, r.Err)
	assert.Equal(t, KindTimeout, r.Err.Kind)
	// The sleeping worker was replaced: the next case does not wait for it.
	r = e.Score(ctx, Case{ID: "n", Input: map[string]any{}, Output: "fine"})
	require.Nil(t, r.Err)
	assert.Less(t, time.Since(start), 2500*time.Millisecond)
}

func TestCancelledContext(t *testing.T) {
	e := open(t, Options{Metric: writeMetric(t, "def score(i, o, e=None):\n    while True: pass\n")})
	c, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	r := e.Score(c, Case{ID: "c", Input: map[string]any{}})
	require.NotNil(t, r.Err)
	assert.Equal(t, KindCanceled, r.Err.Kind)
	// A deadline, a cancellation (with its cause) and a closed engine are
	// told apart by errors.Is, not by the message.
	assert.ErrorIs(t, r.Err, context.DeadlineExceeded)
	assert.NotErrorIs(t, r.Err, context.Canceled)
	assert.Equal(t, "case c: score cancelled: context deadline exceeded", r.Err.Message)

	budget := errors.New("the optimizer's budget is spent")
	c2, cancel2 := context.WithCancelCause(ctx)
	time.AfterFunc(100*time.Millisecond, func() { cancel2(budget) })
	r = e.Score(c2, Case{ID: "d", Input: map[string]any{}})
	require.NotNil(t, r.Err)
	assert.ErrorIs(t, r.Err, context.Canceled)
	assert.ErrorIs(t, r.Err, budget)
	assert.NotErrorIs(t, r.Err, context.DeadlineExceeded)
	assert.Equal(t, "case d: score cancelled: context canceled (the optimizer's budget is spent)", r.Err.Message)

	// Cancelled before the case was queued.
	r = e.Score(c2, Case{ID: "e", Input: map[string]any{}})
	assert.ErrorIs(t, r.Err, budget)
	assert.NotErrorIs(t, r.Err, ErrClosed)

	// The other kinds have no cause.
	r = e.Score(ctx, Case{ID: "f", Input: []any{}})
	require.NotNil(t, r.Err)
	assert.Nil(t, errors.Unwrap(r.Err))
}

func TestPrintIsCapturedPerCase(t *testing.T) {
	e := open(t, Options{Metric: writeMetric(t, `
import sys
def score(input, output, expected=None):
    print("scoring", output)
    print("warn", file=sys.stderr)
    if output == "big":
        print("x" * 100000)
    return 1.0, {"feedback": "ok"}
`), LogsLimit: 1000})
	r := e.Score(ctx, Case{ID: "1", Input: map[string]any{}, Output: "a"})
	assert.Equal(t, "scoring a\nwarn\n", r.Logs)
	r = e.Score(ctx, Case{ID: "2", Input: map[string]any{}, Output: "big"})
	assert.True(t, strings.HasSuffix(r.Logs, "\n[skynet: output truncated]\n"))
	assert.Len(t, r.Logs, 1000+len("\n[skynet: output truncated]\n"))
}

func TestTwoMetricsWithOneNameDoNotClash(t *testing.T) {
	a := writeMetric(t, "import helper\ndef score(i, o, e=None):\n    return 1.0, {'feedback': 'A ' + helper.NAME}\n")
	require.NoError(t, os.WriteFile(filepath.Join(filepath.Dir(a), "helper.py"), []byte("NAME = 'beside A'\n"), 0o644))
	b := writeMetric(t, "def score(i, o, e=None):\n    return 2.0, {'feedback': 'B'}\n")
	ea, eb := open(t, Options{Metric: a}), open(t, Options{Metric: b})
	c := Case{ID: "1", Input: map[string]any{}}
	assert.Equal(t, "A beside A", ea.Score(ctx, c).Feedback, "a module beside metric.py is importable")
	assert.Equal(t, "B", eb.Score(ctx, c).Feedback)
	assert.Equal(t, 1.0, ea.Score(ctx, c).Score)
}

func TestMutatingInputDoesNotLeakAcrossCalls(t *testing.T) {
	e := open(t, Options{Metric: writeMetric(t, `
def score(input, output, expected=None):
    seen = len(input["items"])
    input["items"].append(1)
    expected["label"] = "changed"
    return float(seen), {"feedback": str(seen)}
`)})
	c := Case{ID: "1", Input: json.RawMessage(`{"items": [0]}`), Expected: map[string]any{"label": "x"}}
	for i := 0; i < 3; i++ {
		assert.Equal(t, 1.0, e.Score(ctx, c).Score)
	}
}

func TestBadCaseShapes(t *testing.T) {
	e := open(t, Options{Metric: "../testdata/exact_match/metric.py"})
	r := e.Score(ctx, Case{ID: "x", Input: []any{1}})
	require.NotNil(t, r.Err)
	assert.Equal(t, KindInput, r.Err.Kind)
	assert.Equal(t, "case x: input must be a dict of the case's input fields, got a list", r.Err.Message)
	r = e.Score(ctx, Case{ID: "y", Input: map[string]any{}, Expected: "billing"})
	assert.Equal(t, "case y: expected must be a dict of output columns or null, got a string", r.Err.Message)
	r = e.Score(ctx, Case{ID: "z", Input: map[string]any{}, Output: struct{}{}})
	assert.Equal(t, KindInput, r.Err.Kind)
}

func TestConcurrentScore(t *testing.T) {
	e := open(t, Options{Metric: writeMetric(t, "def score(i, o, e=None):\n    return float(o), {'feedback': str(i['n'])}\n"), Threads: 3})
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				n := g*1000 + i
				r := e.Score(ctx, Case{ID: fmt.Sprint(n), Input: map[string]any{"n": n}, Output: n})
				assert.Nil(t, r.Err)
				assert.Equal(t, float64(n), r.Score)
				assert.Equal(t, fmt.Sprint(n), r.Feedback)
			}
		}()
	}
	wg.Wait()
}

func TestCheckSamples(t *testing.T) {
	e := open(t, Options{Metric: writeMetric(t, `
calls = []
def score(i, o, e=None):
    calls.append(1)
    if len(calls) == 4: return "bad"
    return 1.0, {"feedback": "ok"}
`), Samples: 5})
	cases := readCases(t, "../testdata/exact_match/cases.jsonl")
	checks := e.Check(ctx, cases)
	require.Len(t, checks, 3)
	assert.Equal(t, []string{CheckLoads, CheckSignature, CheckReturnValue}, []string{checks[0].Name, checks[1].Name, checks[2].Name})
	assert.False(t, checks[2].OK)
	assert.Equal(t, "t4", checks[2].Case, "the fourth of five samples fails")
	e2 := open(t, Options{Metric: "../testdata/exact_match/metric.py"})
	checks = e2.Check(ctx, cases)
	assert.True(t, checks[2].OK)
	assert.Equal(t, "3 sample case(s) returned valid (score, side info) pairs", checks[2].Message)
}

func TestClosedEngine(t *testing.T) {
	e, err := Open(Options{Metric: "../testdata/exact_match/metric.py"})
	require.NoError(t, err)
	require.NoError(t, e.Close())
	require.NoError(t, e.Close(), "Close is idempotent")
	r := e.Score(ctx, Case{ID: "1", Input: map[string]any{}})
	assert.Equal(t, KindCanceled, r.Err.Kind)
	assert.ErrorIs(t, r.Err, ErrClosed)
	assert.Equal(t, "case 1: engine is closed", r.Err.Message)
	// Check runs nothing on a closed engine, and blames no case.
	checks := e.Check(ctx, readCases(t, "../testdata/exact_match/cases.jsonl"))
	last := checks[len(checks)-1]
	assert.Equal(t, CheckReturnValue, last.Name)
	assert.False(t, last.OK)
	assert.Empty(t, last.Case)
	assert.Equal(t, "not run: engine is closed", last.Message)
}

// TestVirtualenv runs a child process with VIRTUAL_ENV set, and one with
// Options.PythonExecutable naming the venv's python: the venv's
// site-packages, including its .pth files, must be importable, and
// sys.executable is the venv's python, so a subprocess started with it
// sees the venv too.
func TestVirtualenv(t *testing.T) {
	if os.Getenv("SKYNET_TEST_VENV_CHILD") != "" {
		return
	}
	python := embeddedPython(t)
	venv := filepath.Join(t.TempDir(), "venv")
	out, err := exec.Command(python, "-m", "venv", "--system-site-packages", "--without-pip", venv).CombinedOutput()
	require.NoError(t, err, string(out))
	site, _ := filepath.Glob(filepath.Join(venv, "lib", "python*", "site-packages"))
	require.Len(t, site, 1)
	require.NoError(t, os.WriteFile(filepath.Join(site[0], "venv_only_mod.py"), []byte("WHERE = 'venv'\n"), 0o644))
	extra := filepath.Join(t.TempDir(), "pth_dir")
	require.NoError(t, os.MkdirAll(extra, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(extra, "pth_only_mod.py"), []byte("WHERE = 'pth'\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(site[0], "extra.pth"), []byte(extra+"\n"), 0o644))
	metric := writeMetric(t, `
import subprocess, sys, venv_only_mod, pth_only_mod
def score(input, output, expected=None):
    child = subprocess.run([sys.executable, "-c", "import venv_only_mod; print(venv_only_mod.WHERE)"],
                           capture_output=True, text=True)
    return 1.0, {"feedback": f"{venv_only_mod.WHERE} {pth_only_mod.WHERE} {sys.prefix} {sys.executable} {child.stdout.strip()}{child.stderr}"}
`)
	want := "FEEDBACK: venv pth " + venv + " " + filepath.Join(venv, "bin", "python") + " venv\n"
	for _, env := range [][]string{
		{"VIRTUAL_ENV=" + venv},
		{"VIRTUAL_ENV=", "SKYNET_TEST_VENV_PYTHON=" + filepath.Join(venv, "bin", "python")},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestVirtualenvChild$", "-test.v")
		cmd.Env = append(append(os.Environ(), "SKYNET_TEST_VENV_CHILD="+metric), env...)
		out, err = cmd.CombinedOutput()
		require.NoError(t, err, string(out))
		assert.Contains(t, string(out), want, env)
	}
}

// embeddedPython is the python executable of the installation the embedded
// interpreter runs from, whichever CPython the build chose (make PYTHON=...),
// so a venv made with it is one that interpreter can use.
func embeddedPython(t *testing.T) string {
	e := open(t, Options{Metric: writeMetric(t, `
import os, sys
def score(input, output, expected=None):
    v = sys.version_info
    return 1.0, {"feedback": os.path.join(sys.base_exec_prefix, "bin", f"python{v.major}.{v.minor}")}
`)})
	r := e.Score(ctx, Case{ID: "1", Input: map[string]any{}})
	require.Nil(t, r.Err, "%+v", r.Err)
	return r.Feedback
}

func TestVirtualenvChild(t *testing.T) {
	metric := os.Getenv("SKYNET_TEST_VENV_CHILD")
	if metric == "" {
		t.Skip("runs as TestVirtualenv's child process")
	}
	e := open(t, Options{Metric: metric, PythonExecutable: os.Getenv("SKYNET_TEST_VENV_PYTHON")})
	r := e.Score(ctx, Case{ID: "1", Input: map[string]any{}})
	require.Nil(t, r.Err, "%+v", r.Err)
	fmt.Printf("FEEDBACK: %s\n", r.Feedback)
}

func TestMain(m *testing.M) {
	if os.Getenv(mainThreadEnv) != "" {
		os.Exit(mainThreadChild())
	}
	runtime.GOMAXPROCS(max(runtime.GOMAXPROCS(0), 2))
	os.Exit(m.Run())
}

// TestMemoryLimit runs a child process whose interpreter has a memory cap:
// an allocation bomb becomes a MemoryError in its case, and the next case runs.
func TestMemoryLimit(t *testing.T) {
	if os.Getenv("SKYNET_TEST_MEMLIMIT_CHILD") != "" {
		return
	}
	metric, err := filepath.Abs("../testdata/faults/memory_bomb.py")
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0], "-test.run=^TestMemoryLimitChild$", "-test.v")
	// Under make asan, what the capped allocator holds at exit would read as
	// leaks: the interpreter is never finalised.
	cmd.Env = append(os.Environ(), "SKYNET_TEST_MEMLIMIT_CHILD="+metric, "ASAN_OPTIONS=detect_leaks=0")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	assert.Contains(t, string(out), "BOMB: exception: MemoryError\n")
	assert.Contains(t, string(out), "NEXT: fine\n")
	assert.Contains(t, string(out), "BOMBS: 4 MemoryError\n")
}

func TestMemoryLimitChild(t *testing.T) {
	metric := os.Getenv("SKYNET_TEST_MEMLIMIT_CHILD")
	if metric == "" {
		t.Skip("runs as TestMemoryLimit's child process")
	}
	e := open(t, Options{Metric: metric, PythonMemoryLimit: 256 << 20})
	r := e.Score(ctx, Case{ID: "b", Input: map[string]any{}, Output: "bomb"})
	require.NotNil(t, r.Err)
	fmt.Printf("BOMB: %s: %s\n", r.Err.Kind, r.Err.Message)
	bombs := 0
	for _, r := range e.ScoreAll(ctx, slices.Values([]Case{{ID: "b1", Input: map[string]any{}, Output: "bomb"}, {ID: "b2", Input: map[string]any{}, Output: "bomb"},
		{ID: "b3", Input: map[string]any{}, Output: "bomb"}, {ID: "b4", Input: map[string]any{}, Output: "bomb"}}), 0) {
		if r.Err != nil && r.Err.Message == "MemoryError" {
			bombs++
		}
	}
	fmt.Printf("BOMBS: %d MemoryError\n", bombs)
	r = e.Score(ctx, Case{ID: "n", Input: map[string]any{}, Output: "next"})
	require.Nil(t, r.Err, "%+v", r.Err)
	fmt.Printf("NEXT: %s\n", r.Feedback)
}

// A timed-out sample is named once, as the check's Case, not in its message.
func TestCheckNamesTheCaseOnce(t *testing.T) {
	e := open(t, Options{Metric: writeMetric(t, "def score(i, o, e=None):\n    while True: pass\n"),
		Timeout: 200 * time.Millisecond, Samples: 1})
	checks := e.Check(ctx, []Case{{ID: "s", Input: map[string]any{}}})
	assert.Equal(t, "s", checks[len(checks)-1].Case)
	assert.Equal(t, "score timed out after 200ms", checks[len(checks)-1].Message)
}

// Different problems on different samples: the first is the check's Case,
// the others name theirs, and each fix is shown once.
func TestCheckSeveralProblems(t *testing.T) {
	e := open(t, Options{Metric: writeMetric(t, `
def score(input, output, expected=None):
    if output == "num":
        return 0.5
    if output == "str":
        return "0.5", {"feedback": "ok"}
    return 1.0, {}
`)})
	checks := e.Check(ctx, []Case{{ID: "a", Input: map[string]any{}, Output: "num"}, {ID: "b", Input: map[string]any{}, Output: "str"},
		{ID: "c", Input: map[string]any{}, Output: "num"}})
	rv := checks[len(checks)-1]
	assert.Equal(t, "a", rv.Case)
	assert.Equal(t, "must return a pair (score, side info), got float 0.5: no side info (also case c); case b: score must be a number, got str '0.5'", rv.Message)
	assert.Equal(t, `return score, {"feedback": "..."} or return float(score), {"feedback": "..."}`, rv.Fix)
}

// Named scores keep the order the metric returned them in
// (Result.ScoreNames), on the C fast path (feedback and scores only) and
// on the general one (another side-info key).
func TestScoreNamesKeepTheMetricsOrder(t *testing.T) {
	e := open(t, Options{Metric: writeFile(t, "metric.py", `
def score(input, output, expected=None):
    side = {"feedback": "ok", "scores": {"zeta": 1.0, "alpha": 0.5, "mid": 0.25}}
    if input["extra"]:
        side["note"] = "general path"
    return 1.0, side
`)})
	for _, extra := range []bool{false, true} {
		r := e.Score(ctx, Case{ID: "1", Input: map[string]any{"extra": extra}, Output: "x"})
		require.Nil(t, r.Err, "%+v", r.Err)
		assert.Equal(t, []string{"zeta", "alpha", "mid"}, r.ScoreNames, "extra key: %v", extra)
		assert.Equal(t, map[string]float64{"zeta": 1, "alpha": 0.5, "mid": 0.25}, r.Scores)
	}
}
