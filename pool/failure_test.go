package pool

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skynetml/skynet/engine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOpenLoadFailure opens pools on metrics that do not load: Open
// returns a *engine.CheckError whose failed check is CheckLoads and whose
// message names the file and line, said once however many workers tried.
func TestOpenLoadFailure(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, src string
		line      int
		says      string // what the message must hold besides the file and line
	}{
		{"syntax error", "def score(input, output, expected=None):\n    return 1.0, {\"feedback\": \"ok\"}\n\nif x ==:\n    pass\n", 4, "SyntaxError"},
		{"import raises", "import os\n\nraise RuntimeError(\"no model weights at /nowhere\")\n\ndef score(input, output):\n    return 1.0, {}\n", 3, "no model weights at /nowhere"},
		{"module not found", "import skynet_no_such_module_here\n\ndef score(input, output):\n    return 1.0, {}\n", 1, "skynet_no_such_module_here"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			metric := writeFile(t, dir, strings.ReplaceAll(tc.name, " ", "_")+".py", tc.src)
			for _, procs := range []int{1, 3} {
				var stderr bytes.Buffer
				start := time.Now()
				p, err := Open(Options{Options: engine.Options{Metric: metric}, Processes: procs, Stderr: &stderr})
				if p != nil {
					p.Close()
				}
				took := time.Since(start)
				require.Error(t, err, "processes=%d", procs)
				assert.Nil(t, p)
				ce, ok := errors.AsType[*engine.CheckError](err)
				require.True(t, ok, "processes=%d: want a *engine.CheckError, got %T: %v", procs, err, err)
				failed := ce.Failed()
				assert.Equal(t, engine.CheckLoads, failed.Name, "processes=%d", procs)
				assert.False(t, failed.OK)
				base := filepath.Base(metric)
				assert.Contains(t, failed.Message, base, "processes=%d: the message names the file", procs)
				// A syntax error's message has the line; an exception's
				// traceback (Detail) does.
				assert.Contains(t, failed.Message+"\n"+failed.Detail, fmt.Sprintf("%s\", line %d", base, tc.line), "processes=%d: the message or traceback names the line", procs)
				assert.Contains(t, failed.Message, tc.says, "processes=%d", procs)
				assert.Equal(t, 1, strings.Count(err.Error(), tc.says), "processes=%d: said once in the error: %v", procs, err)
				assert.False(t, errors.Is(err, fs.ErrNotExist), "the file exists")
				assert.LessOrEqual(t, strings.Count(stderr.String(), tc.says), 1, "processes=%d: said at most once on stderr:\n%s", procs, stderr.String())
				assert.Less(t, took, 15*time.Second)
				// The checks are the engine's own, as an in-process Open makes them.
				_, eerr := engine.Open(engine.Options{Metric: metric})
				if ece, ok := errors.AsType[*engine.CheckError](eerr); assert.True(t, ok, "engine.Open: %v", eerr) {
					assert.Equal(t, ece.Checks, ce.Checks, "processes=%d: the pool's checks and engine.Open's", procs)
				}
				t.Logf("processes=%d: %.2fs: %v", procs, took.Seconds(), err)
			}
		})
	}
}

// TestOpenMissingFile opens pools on a metric or program that does not
// exist: a *engine.CheckError that matches fs.ErrNotExist, before any
// worker starts; a directory is not a metric either.
func TestOpenMissingFile(t *testing.T) {
	dir := t.TempDir()
	good := writeFile(t, dir, "metric.py", lengthMetric)
	for _, tc := range []struct {
		name     string
		opts     engine.Options
		check    string
		notExist bool
	}{
		{"metric", engine.Options{Metric: filepath.Join(dir, "missing.py")}, engine.CheckLoads, true},
		{"program", engine.Options{Metric: good, Program: filepath.Join(dir, "no_program.py")}, engine.CheckProgramLoads, true},
		{"metric is a directory", engine.Options{Metric: dir}, engine.CheckLoads, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Open(Options{Options: tc.opts, Processes: 2})
			if p != nil {
				p.Close()
			}
			require.Error(t, err)
			ce, ok := errors.AsType[*engine.CheckError](err)
			require.True(t, ok, "want a *engine.CheckError, got %T: %v", err, err)
			assert.Equal(t, tc.check, ce.Failed().Name)
			assert.Equal(t, tc.notExist, errors.Is(err, fs.ErrNotExist), "errors.Is(err, fs.ErrNotExist): %v", err)
			// The same as the engine's in-process Open says.
			_, eerr := engine.Open(tc.opts)
			require.Error(t, eerr)
			assert.Equal(t, tc.notExist, errors.Is(eerr, fs.ErrNotExist), "engine: %v", eerr)
		})
	}
	_, err := Open(Options{})
	assert.Error(t, err, "no metric")
	_, err = Open(Options{Options: engine.Options{Metric: good}, Processes: -1})
	assert.Error(t, err, "negative processes")
}

// wedgeN makes the catastrophic regex of wedgeMetric: (a+)+$ against
// 'a'*n+'b' backtracks 2^n ways in C with the GIL held; at n=24 it takes
// 0.5 s on a 2-CPU box (Python 3.11), so n=34 takes minutes, far past the
// 1 s timeout, and no Python-level interrupt can stop it.
const wedgeMetric = `
import re

def score(input, output, expected=None):
    if input.get("wedge"):
        re.match(r'(a+)+$', 'a' * 34 + 'b')
        return 1.0, {"feedback": "the regex finished"}
    return len(output) / 100, {"feedback": "id=" + input["id"]}
`

// TestWedge scores a case whose score holds the GIL in C past its 1 s
// timeout: it gets a timeout result, the worker is replaced, and every
// other case (on that worker too) scores normally.
func TestWedge(t *testing.T) {
	metric := writeFile(t, t.TempDir(), "metric.py", wedgeMetric)
	var stderr bytes.Buffer
	p := openPool(t, Options{Options: engine.Options{Metric: metric, Timeout: time.Second}, Processes: 2, Stderr: &stderr})
	cases := lengthCases("w", 60)
	cases[17].Input = map[string]any{"id": cases[17].ID, "wedge": true}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	start := time.Now()
	results := collect(t, p.ScoreAll(ctx, seq(cases), 0))
	took := time.Since(start)
	t.Logf("%d cases in %.1fs", len(results), took.Seconds())
	require.Len(t, results, len(cases))
	r := results[17]
	assert.Equal(t, "w17", r.ID)
	if assert.NotNil(t, r.Err, "the wedged case") {
		assert.Equal(t, engine.KindTimeout, r.Err.Kind, errText(r.Err))
		assert.Contains(t, r.Err.Message, "timed out")
	}
	assert.Equal(t, 0.0, r.Score)
	others := append(append([]engine.Case(nil), cases[:17]...), cases[18:]...)
	rest := append(append([]engine.Result(nil), results[:17]...), results[18:]...)
	checkLength(t, others, rest)
	t.Logf("w17: %s", errText(r.Err))
	// The wedge is counted when its worker is killed, which may be after
	// the case's timeout result (the worker's engine gives it at 1 s).
	var st Stats
	assert.Eventually(t, func() bool { st = p.Stats(); return st.Wedges == 1 }, 5*time.Second, 20*time.Millisecond,
		"Stats().Wedges")
	assert.Equal(t, 1, st.Wedges, "Stats().Wedges: %+v", st)
	assert.GreaterOrEqual(t, st.Restarts, 1, "Stats().Restarts: %+v", st)
	assert.Equal(t, 0, st.Crashes, "a wedge is not a crash: %+v", st)
	assert.Contains(t, stderr.String(), "w17", "the pool's notice names the case")
	assert.Less(t, took, 20*time.Second, "the wedged worker is killed, not waited for")
	// The pool goes on scoring.
	checkLength(t, cases[:5], collect(t, p.ScoreAll(context.Background(), seq(cases[:5]), 0)))
	if t.Failed() {
		t.Logf("stderr:\n%s", stderr.String())
	}
}

// TestScoreAllKinds checks the error kinds a worker's engine gives come
// through the pool as they are: an exception with its "Type: message" and
// traceback, a contract error, a timeout a Python-level interrupt stops
// (no wedge), and logs.
func TestScoreAllKinds(t *testing.T) {
	metric := writeFile(t, t.TempDir(), "metric.py", `
import time

def score(input, output, expected=None):
    k = input["kind"]
    if k == "raise":
        raise ValueError("bad output " + output)
    if k == "contract":
        return "0.5"
    if k == "loop":
        while True:
            pass
    if k == "print":
        print("hello from", input["id"])
    return 0.5, {"feedback": "fine", "scores": {"a": 0.25}}
`)
	p := openPool(t, Options{Options: engine.Options{Metric: metric, Timeout: time.Second}, Processes: 2})
	kinds := []string{"ok", "raise", "contract", "loop", "print", "ok"}
	var cases []engine.Case
	for i, k := range kinds {
		id := fmt.Sprintf("k%d", i)
		cases = append(cases, engine.Case{ID: id, Input: map[string]any{"id": id, "kind": k}, Output: "x"})
	}
	e, err := engine.Open(engine.Options{Metric: metric, Timeout: time.Second})
	require.NoError(t, err)
	defer e.Close()
	want := collect(t, e.ScoreAll(context.Background(), seq(cases), 0))
	got := collect(t, p.ScoreAll(context.Background(), seq(cases), 0))
	require.Len(t, got, len(cases))
	for i, w := range want {
		g := got[i]
		at := fmt.Sprintf("case %s (%s)", cases[i].ID, kinds[i])
		assert.Equal(t, w.ID, g.ID, at)
		assert.Equal(t, w.Score, g.Score, at)
		assert.Equal(t, w.Feedback, g.Feedback, at)
		assert.Equal(t, errText(w.Err), errText(g.Err), at)
		if len(w.Scores) > 0 || len(g.Scores) > 0 { // nil and empty alike: ParseResult makes an empty map
			assert.Equal(t, w.Scores, g.Scores, at)
		}
		assert.Equal(t, w.Logs, g.Logs, at)
		if w.Err != nil && w.Err.Kind == engine.KindException {
			assert.Contains(t, g.Err.Traceback, "ValueError", at)
		}
	}
	require.NotNil(t, got[3].Err)
	assert.Equal(t, engine.KindTimeout, got[3].Err.Kind)
	assert.Equal(t, 0, p.Stats().Wedges, "a Python loop is interrupted, not a wedge")
}
