package skynetmod

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skynetml/skynet/cpython"
	"github.com/skynetml/skynet/internal/testenv"
	"github.com/skynetml/skynet/llm"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMain starts the interpreter as a user of a venv does: with the pinned
// test venv's python (VIRTUAL_ENV) when make test names it, so the venv's
// packages are imported instead of Debian's dist-packages (which are then
// not on sys.path at all), as under the venv's own python.
func TestMain(m *testing.M) {
	var cfg cpython.Config
	if venv := os.Getenv(testenv.VenvVar); venv != "" {
		cfg.Executable = filepath.Join(venv, "bin", "python")
	}
	if err := cpython.Initialize(cfg); err != nil {
		panic(err)
	}
	os.Exit(m.Run())
}

var moduleSeq int

// function execs source as a new module and returns its attribute name.
func function(t *testing.T, name, source string) *cpython.Object {
	t.Helper()
	var fn *cpython.Object
	var err error
	require.NoError(t, cpython.WithGIL(func(g *cpython.GIL) {
		moduleSeq++
		var mod *cpython.Object
		mod, err = g.ExecModule("skynetmod_test_"+strings.Repeat("x", moduleSeq), "<metric>", source)
		if err != nil {
			return
		}
		fn, err = g.Attr(mod, name)
		g.Release(mod)
	}))
	require.NoError(t, err)
	return fn
}

func ptr[T any](v T) *T { return &v }

// call runs fn() as a case with obs as its observation.
func call(t *testing.T, fn *cpython.Object, obs *Observation) (any, error) {
	t.Helper()
	c, err := cpython.NewCaller(1 << 10)
	require.NoError(t, err)
	defer c.Close()
	slot := NewSlot()
	defer slot.Close()
	slot.Set([]*Observation{obs})
	return c.Call(fn, nil, 0, cpython.NewTokens(1), true, slot.Handle())
}

func jsonOf(t *testing.T, v any) string {
	b, err := json.Marshal(cpython.Plain(v))
	require.NoError(t, err)
	return string(b)
}

func TestObservationAndServiceCost(t *testing.T) {
	fn := function(t, "f", `
from skynet import observation, service_cost
def f():
    first = observation()
    first["run_ms"] = -1          # a fresh dict each call: this changes nothing
    return [observation(), service_cost()]
`)
	v, err := call(t, fn, &Observation{RunMS: ptr(12.5), CostUSD: ptr(0.003), ModelCalls: ptr(int64(2))})
	require.NoError(t, err)
	assert.JSONEq(t, `[{"run_ms": 12.5, "cost_usd": 0.003, "model_calls": 2, "input_tokens": null, "output_tokens": null}, 0.003]`, jsonOf(t, v))
	v, err = call(t, fn, &Observation{})
	require.NoError(t, err)
	assert.JSONEq(t, `[{"run_ms": null, "cost_usd": null, "model_calls": null, "input_tokens": null, "output_tokens": null}, null]`, jsonOf(t, v))
}

func TestOutsideACaseIsAnError(t *testing.T) {
	fn := function(t, "f", "import skynet\ndef f():\n    return skynet.observation()\n")
	c, err := cpython.NewCaller(0)
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Call(fn, nil, 0, 0, false, 0)
	assert.EqualError(t, err, "RuntimeError: skynet.observation() is only available while Skynet is calling score or run for a case (not at import time or from threads the metric starts)")

	var ierr error
	require.NoError(t, cpython.WithGIL(func(g *cpython.GIL) {
		_, ierr = g.ExecModule("skynetmod_import_time", "<metric>", "import skynet\nCOST = skynet.service_cost()\n")
	}))
	assert.EqualError(t, ierr, "RuntimeError: skynet.service_cost() is only available while Skynet is calling score or run for a case (not at import time or from threads the metric starts)")
}

const seedSpec = `REWARD_SPEC = {"weights": {"accuracy": 0.7, "speed": 0.2, "cost": 0.1},
               "accuracy": {}, "speed": {"reference": 2000}, "cost": {"reference": 0.01}}
`

func TestReward(t *testing.T) {
	fn := function(t, "f", "from skynet import reward\n"+seedSpec+`
def f():
    return reward(REWARD_SPEC, 1.0, "Correct.")
`)
	v, err := call(t, fn, &Observation{RunMS: ptr(2000.0), CostUSD: ptr(0.01)})
	require.NoError(t, err)
	pair := v.(cpython.Tuple)
	assert.InDelta(t, 0.85, pair[0], 1e-12)
	side := cpython.Plain(pair[1]).(map[string]any)
	assert.Equal(t, "Correct. Run took 2000 ms (reference 2000 ms) and cost $0.01 (reference $0.01).", side["feedback"])
	assert.Equal(t, map[string]any{"accuracy": 1.0, "speed": 0.5, "cost": 0.5}, side["scores"])

	v, err = call(t, fn, &Observation{RunMS: ptr(2000.0)})
	require.NoError(t, err)
	pair = v.(cpython.Tuple)
	assert.InDelta(t, 0.8, pair[0], 1e-12, "unmeasured cost is 0")
	assert.Contains(t, cpython.Plain(pair[1]).(map[string]any)["feedback"], "cost was not measured, so the cost part is 0")
}

func TestRewardArgumentErrors(t *testing.T) {
	fn := function(t, "f", "from skynet import reward\n"+seedSpec+`
def f():
    out = []
    for args in [(REWARD_SPEC, 1.5, "x"), (REWARD_SPEC, True, "x"), (REWARD_SPEC, 0.5, None),
                 ({"weights": {"accuracy": 1, "speed": -1, "cost": 0}}, 0.5, "x")]:
        try:
            reward(*args)
            out.append("no error")
        except Exception as exc:
            out.append(f"{type(exc).__name__}: {exc}")
    return out
`)
	v, err := call(t, fn, &Observation{})
	require.NoError(t, err)
	assert.Equal(t, []any{
		"ValueError: reward: accuracy must be a score in [0, 1] (REWARD_SPEC has no accuracy.reference), got 1.5",
		"TypeError: skynet.reward(): accuracy must be a number, got bool",
		"TypeError: skynet.reward(): feedback must be a str, got NoneType",
		"ValueError: REWARD_SPEC: weights.speed must be >= 0, got -1",
	}, v)
}

// TestTampering: nothing a metric does to the module, the dicts it returns or
// the clock changes what reward computes from the host's measurements, and
// replacing the module's functions fails (so no metric can change them for
// the metrics loaded after it).
func TestTampering(t *testing.T) {
	fn := function(t, "f", "import skynet, time\nfrom skynet import reward\n"+seedSpec+`
def f():
    refused = []
    for name in ("observation", "service_cost", "reward"):
        try:
            setattr(skynet, name, lambda *a: {"run_ms": 0.0, "cost_usd": 0.0})
        except AttributeError as exc:
            refused.append(str(exc))
    try:
        del skynet.llm
    except AttributeError as exc:
        refused.append(str(exc))
    skynet.observation()["run_ms"] = 0.0
    time.time = lambda: 0.0
    time.perf_counter = lambda: 0.0
    time.monotonic = lambda: 0.0
    return [reward(REWARD_SPEC, 1.0, "x"), refused]
`)
	v, err := call(t, fn, &Observation{RunMS: ptr(6000.0), CostUSD: ptr(0.03)})
	require.NoError(t, err)
	out := v.([]any)
	scores := cpython.Plain(out[0].(cpython.Tuple)[1]).(map[string]any)["scores"].(map[string]any)
	assert.InDelta(t, 0.25, scores["speed"], 1e-12, "speed from the host's 6000 ms")
	assert.InDelta(t, 0.25, scores["cost"], 1e-12, "cost from the host's $0.03")
	assert.Equal(t, []any{
		"the skynet module is read-only: cannot replace skynet.observation (measurements live in the host)",
		"the skynet module is read-only: cannot replace skynet.service_cost (measurements live in the host)",
		"the skynet module is read-only: cannot replace skynet.reward (measurements live in the host)",
		"the skynet module is read-only: cannot delete skynet.llm (measurements live in the host)",
	}, out[1])
}

func TestLLMWithoutModelIsClear(t *testing.T) {
	fn := function(t, "f", "from skynet import llm\ndef f():\n    return llm('Answer PASS or FAIL.', input='2+2=4')\n")
	_, err := call(t, fn, &Observation{})
	pe, ok := cpython.AsError(err)
	require.True(t, ok)
	assert.Equal(t, "RuntimeError", pe.Type)
	assert.Equal(t, "skynet.llm: no metric model is configured: set --metric-model or --reflection-model, or SKYNET_METRIC_MODEL or SKYNET_REFLECTION_MODEL (in Go, llm.Config.MetricModel or ReflectionModel)", pe.Message)
}

func TestLLMCallsTheSlotsModel(t *testing.T) {
	fn := function(t, "f", `
import skynet
def f():
    out = [skynet.llm("Judge.", input="2+2=4"), skynet.llm("Judge.", input={"q": 1}, temperature=0, max_tokens=5)]
    try:
        skynet.llm("fail please")
    except skynet.LLMError as exc:
        out.append(str(exc))
    try:
        skynet.llm("x", max_tokens=True)
    except TypeError as exc:
        out.append(str(exc))
    return out
`)
	var got []llm.Request
	c, err := cpython.NewCaller(0)
	require.NoError(t, err)
	defer c.Close()
	slot := NewSlot()
	defer slot.Close()
	slot.Set([]*Observation{{}})
	slot.SetModel(func(i int, inRun bool, req llm.Request) (string, error) {
		got = append(got, req)
		if req.Instructions == "fail please" {
			return "", &llm.Error{Model: "m/x", Attempts: 5, Status: 500, Msg: "HTTP 500: boom"}
		}
		return "PASS because " + req.Input, nil
	})
	v, err := c.Call(fn, nil, 0, cpython.NewTokens(1), false, slot.Handle())
	require.NoError(t, err)
	assert.Equal(t, []any{
		"PASS because 2+2=4",
		`PASS because {"q": 1}`,
		"skynet.llm: model m/x: HTTP 500: boom (after 5 attempts)",
		"skynet.llm(): max_tokens must be an int",
	}, v)
	require.Len(t, got, 3)
	assert.Equal(t, 0.0, *got[1].Temperature)
	assert.Equal(t, 5, *got[1].MaxTokens)
	assert.Nil(t, got[0].Temperature)
}

// TestStubMatchesModule keeps skynet.pyi in step with the module's functions.
func TestStubMatchesModule(t *testing.T) {
	fn := function(t, "f", `
import ast, skynet
def f(stub):
    tree = ast.parse(stub)
    # Functions and exception classes; the TypedDicts exist only for typing.
    stubbed = sorted(n.name for n in tree.body if isinstance(n, ast.FunctionDef)
                     or (isinstance(n, ast.ClassDef) and n.name.endswith("Error")))
    real = sorted(n for n in dir(skynet) if not n.startswith("_") and callable(getattr(skynet, n)))
    return [stubbed, real]
`)
	var e cpython.Encoder
	require.NoError(t, e.Value(Stub))
	c, err := cpython.NewCaller(0)
	require.NoError(t, err)
	defer c.Close()
	v, err := c.Call(fn, e.Bytes(), 1, 0, false, 0)
	require.NoError(t, err)
	pair := v.([]any)
	assert.Equal(t, pair[1], pair[0], "skynet.pyi functions == module functions")
	assert.Equal(t, []any{"LLMError", "allm", "dspy_metric", "llm", "observation", "reward", "service_cost"}, pair[1])
}

// TestDSPyMetric drives skynet.dspy_metric with DSPy's own callers, run
// for real in this process (testdata/peers/dspy_calls.py, DSPy from the
// pinned test venv): the checks skynet_client.dspy_metric passes over
// skynet serve (clients/python/test_peers.py), with the metric called
// directly as the reference.
func TestDSPyMetric(t *testing.T) {
	version := function(t, "v", "import platform\ndef v():\n    return platform.python_version()\n")
	v, err := call(t, version, &Observation{})
	require.NoError(t, err)
	venv := testenv.Venv(t, v.(string))
	venv, err = filepath.EvalSymlinks(venv)
	require.NoError(t, err)
	peers, err := filepath.Abs("../testdata/peers")
	require.NoError(t, err)
	metric, err := filepath.Abs("../clients/python/testdata/metric.py")
	require.NoError(t, err)

	// The interpreter runs in the venv (TestMain), as under its python: its
	// site-packages are importable and no other installation's are, so a
	// Debian package (python3-typing-extensions) cannot shadow the pinned one.
	where := function(t, "where", `
import os, sys, typing_extensions
def where():
    sites = [os.path.realpath(p) for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
    return [os.path.realpath(sys.prefix), os.path.realpath(typing_extensions.__file__)] + sites
`)
	got, err := call(t, where, &Observation{})
	require.NoError(t, err)
	paths := got.([]any)
	assert.Equal(t, venv, paths[0], "sys.prefix is the venv")
	for _, p := range paths[1:] {
		assert.True(t, strings.HasPrefix(p.(string), venv+string(filepath.Separator)), "%s is outside the venv %s", p, venv)
	}

	fn := function(t, "f", fmt.Sprintf(`
import importlib.util, os, sys, traceback
sys.path.insert(0, %q)
os.environ.setdefault("DSPY_CACHEDIR", %q)
import dspy_calls, skynet

spec = importlib.util.spec_from_file_location("dspy_test_metric", %q)
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)

def reference(cases):
    out = []
    for c in cases:
        value, side = mod.score(c["input"], c["output"], c["expected"])
        out.append({"score": value, "feedback": side["feedback"], "scores": side.get("scores", {})})
    return out

def f():
    try:
        got = dspy_calls.drive(skynet.dspy_metric(mod.score))
    except Exception:
        return [traceback.format_exc()]  # the whole traceback, into the test's failure
    return dspy_calls.check_all(got, reference)
`, peers, t.TempDir(), metric))
	failed, err := call(t, fn, &Observation{})
	require.NoError(t, err)
	assert.Empty(t, failed, "what DSPy got from skynet.dspy_metric")
}
