package main

import (
	"bytes"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// benchMetric writes source as metric.py beside a few cases.
func benchMetric(t *testing.T, source string) string {
	t.Helper()
	dir := t.TempDir()
	metric := filepath.Join(dir, "metric.py")
	require.NoError(t, os.WriteFile(metric, []byte(source), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cases.jsonl"), []byte(
		`{"id": "a", "input": {"n": 1}, "output": "x", "expected": {"label": "x"}}`+"\n"+
			`{"id": "b", "input": {"n": 2}, "output": "y", "expected": {"label": "x"}}`+"\n"), 0o644))
	return metric
}

// A metric that prints, on import and in every call, used to break the
// subprocess worker's protocol (its replies shared stdout) and bench waited
// forever. Every path now runs, the baselines' scores checked against the
// engine's inside the command, and the report is JSON on stdout alone.
func TestBenchMetricThatPrints(t *testing.T) {
	metric := benchMetric(t, `
import sys
print("loading the metric")
def score(input, output, expected=None):
    print("scoring", input["n"])
    print("to stderr", file=sys.stderr)
    ok = output == expected["label"]
    return (1.0 if ok else 0.0), {"feedback": "ok" if ok else "no"}
`)
	// Unset (an empty value), as on most machines: with it set, a worker
	// flushed every line whatever it asked for, which hid a pipelined
	// worker that never flushed its warm-up reply.
	t.Setenv("PYTHONUNBUFFERED", "")
	rep := benchJSON(t, "--metric", metric, "--cases", "40", "--runs", "1", "--per-process-cases", "2", "--worker-timeout", "60s")
	for _, k := range []string{"engine", "python_loop", "python_loop_shared", "subprocess_lockstep", "subprocess_pipelined", "subprocess_per_case"} {
		ns := rep.NSPerCase[k]
		assert.True(t, ns > 0 && !math.IsInf(ns, 0) && !math.IsNaN(ns), "%s: %v ns/case", k, ns)
	}
	assert.Contains(t, rep.Ratios, "subprocess_lockstep_vs_engine", "the ratios are computed (their size is the bench's to judge, not a test's)")
}

// A worker that never answers is stopped after --worker-timeout, and the
// error names the path, the metric and what happened. The metric hangs
// only where the skynet module is missing (plain python3), so the engine's
// paths, which run first, finish.
func TestBenchWorkerThatNeverAnswers(t *testing.T) {
	metric := benchMetric(t, `
import sys, time
try:
    import skynet
    embedded = True
except ImportError:
    embedded = False
def score(input, output, expected=None):
    if not embedded:
        print("worker: about to hang", file=sys.stderr)
        time.sleep(3600)
    return 1.0, {"feedback": "ok"}
`)
	cmd := exec.Command(skynetBin(t), "bench", "--metric", metric, "--cases", "5", "--runs", "1", "--worker-timeout", "1s")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.WaitDelay = 5 * time.Second
	guard := time.AfterFunc(2*time.Minute, func() { cmd.Process.Kill() })
	defer guard.Stop()
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start)
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, stderr.String())
	assert.Equal(t, exitCheck, exit.ExitCode())
	msg := stderr.String()
	assert.Contains(t, msg, "skynet bench: subprocess_lockstep: the lockstep worker (")
	assert.Contains(t, msg, metric)
	assert.Contains(t, msg, "sent no reply for 1s after 0 replies, so it was stopped")
	assert.Contains(t, msg, "--worker-timeout")
	assert.Contains(t, msg, "worker: about to hang", "what the worker wrote to stderr is part of the error")
	assert.Less(t, took, 30*time.Second, "the timeout, not the worker, ends the wait")
	assert.Equal(t, 1, strings.Count(msg, "skynet bench:"), msg)
}

// The SPEC's per-case bars are for a trivial metric: a 2 ms-a-case metric's
// ratios are printed without a verdict (it printed
// "subprocess_lockstep_vs_engine 0.66 (bar >= 100: NOT met)"), while the
// --file bars, which hold for any metric, keep theirs. A trivial metric is
// graded as before.
func TestBenchBarsFitTheMetric(t *testing.T) {
	report := func(loopNS float64) *benchReport {
		rep := &benchReport{NSPerCase: map[string]float64{"python_loop": loopNS, "engine": loopNS * 1.2}, Bars: map[string]bool{},
			Ratios: map[string]float64{"engine_vs_python_loop": 1.2, "subprocess_lockstep_vs_engine": 0.66, "subprocess_pipelined_vs_engine": 0.9,
				"subprocess_per_case_vs_engine": 30, "python_script_vs_skynet_score": 0.8, "processes_speedup": 1.9}}
		rep.grade(2)
		return rep
	}
	slow := report(2e6)
	var out bytes.Buffer
	slow.printRatios(&out, 2)
	text := out.String()
	for _, name := range []string{"engine_vs_python_loop", "subprocess_lockstep_vs_engine", "subprocess_pipelined_vs_engine", "subprocess_per_case_vs_engine"} {
		assert.NotContains(t, slow.Bars, name, "no verdict for %s", name)
		assert.Contains(t, slow.NoBar, name)
		for _, l := range strings.Split(text, "\n") {
			if strings.Contains(l, name) {
				assert.NotContains(t, l, "NOT met", l)
			}
		}
	}
	assert.Contains(t, text, "subprocess_lockstep_vs_engine          0.66   (no bar: the SPEC's per-case bars are for a trivial metric (under 1000 ns a case in the pure-Python loop); this one takes 2000000 ns)")
	assert.Contains(t, text, "python_script_vs_skynet_score          0.80   (bar >= 1: NOT met)", "the file bars hold for any metric")
	assert.Contains(t, text, "processes_speedup                      1.90   (bar >= 1.7: met)")

	trivial := report(266)
	assert.Empty(t, trivial.NoBar)
	assert.Equal(t, map[string]bool{"engine_vs_python_loop": false, "subprocess_lockstep_vs_engine": false, "subprocess_pipelined_vs_engine": false,
		"subprocess_per_case_vs_engine": false, "python_script_vs_skynet_score": false, "processes_speedup": true}, trivial.Bars)
}
