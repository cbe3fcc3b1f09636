package pool

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skynetml/skynet/cpython"
	"github.com/skynetml/skynet/engine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const classesDir = "../testdata/classes/"

// refLine is one line of reference.py's output: feedback is null and error
// "Type: message" when score raised.
type refLine struct {
	ID       string  `json:"id"`
	Score    float64 `json:"score"`
	Feedback *string `json:"feedback"`
	Error    *string `json:"error"`
}

var (
	embeddedPythonOnce sync.Once
	embeddedPythonPath string
	embeddedPythonErr  error
)

// embeddedPython is the python executable of the CPython this binary
// embeds: SKYNET_PYTHON, else pkg-config python3-embed's
// exec_prefix/bin/python3.X, never PATH's python3 (a pyenv shim may be
// another version). It must report the embedded version.
func embeddedPython(t *testing.T) string {
	t.Helper()
	embeddedPythonOnce.Do(func() {
		python := os.Getenv("SKYNET_PYTHON")
		if python == "" {
			pc := func(args ...string) (string, error) {
				out, err := exec.Command("pkg-config", append(args, "python3-embed")...).Output()
				return strings.TrimSpace(string(out)), err
			}
			prefix, err := pc("--variable=exec_prefix")
			if err == nil && prefix == "" {
				prefix, err = pc("--variable=prefix")
			}
			if err != nil {
				embeddedPythonErr = fmt.Errorf("pkg-config python3-embed: %w", err)
				return
			}
			python = filepath.Join(prefix, "bin", "python"+cpython.PythonVersion())
		}
		out, err := exec.Command(python, "-c", "import platform; print(platform.python_version())").CombinedOutput()
		if err != nil {
			embeddedPythonErr = fmt.Errorf("%s: %v: %s", python, err, out)
			return
		}
		version := strings.TrimSpace(string(out))
		if rt := cpython.Version().Runtime; !strings.HasPrefix(rt, version+" ") {
			embeddedPythonErr = fmt.Errorf("%s is CPython %s, but this binary embeds %s", python, version, rt)
			return
		}
		embeddedPythonPath = python
	})
	require.NoError(t, embeddedPythonErr)
	return embeddedPythonPath
}

// reference runs testdata/classes/reference.py under the embedded CPython.
func reference(t *testing.T, metric, cases string) []refLine {
	t.Helper()
	cmd := exec.Command(embeddedPython(t), classesDir+"reference.py", metric, cases)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	require.NoError(t, cmd.Run(), "reference.py %s %s: %s", metric, cases, errb.String())
	t.Logf("reference.py: %.1fs", time.Since(start).Seconds())
	var lines []refLine
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var r refLine
		require.NoError(t, json.Unmarshal([]byte(l), &r), "reference.py line %q", l)
		lines = append(lines, r)
	}
	return lines
}

// outcome is what is compared for one case.
type outcome struct {
	Score    float64
	Feedback string
	Error    string
}

// refOutcome is the result the pool must give for r: an exception is a
// case error of kind exception whose message, and feedback, is
// reference.py's "Type: message".
func refOutcome(r refLine) outcome {
	if r.Error != nil {
		return outcome{r.Score, *r.Error, errText(&engine.CaseError{Kind: engine.KindException, Message: *r.Error})}
	}
	o := outcome{Score: r.Score, Error: errText(nil)}
	if r.Feedback != nil {
		o.Feedback = *r.Feedback
	}
	return o
}

func resultOutcome(r engine.Result) outcome { return outcome{r.Score, r.Feedback, errText(r.Err)} }

// scoreClass scores a class's case file in a pool of 2 processes.
func scoreClass(t *testing.T, class, cases string, stderr *bytes.Buffer) (*Pool, []engine.Case, []engine.Result) {
	t.Helper()
	p := openPool(t, Options{Options: engine.Options{Metric: classesDir + class + "/metric.py", Timeout: 30 * time.Second},
		Processes: 2, Stderr: stderr})
	cs := readCases(t, cases)
	start := time.Now()
	// A bound, so that a pool that stops scoring fails the test (the
	// rest come back canceled) instead of hanging the package.
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	results := collect(t, p.ScoreAll(ctx, seq(cs), 0))
	t.Logf("pool: %.1fs", time.Since(start).Seconds())
	require.Len(t, results, len(cs), "one result per case")
	return p, cs, results
}

// TestClassesMatchReference scores testdata/classes' signal-timeout and
// multiprocessing metrics in worker processes and compares each case with
// what the plain script (reference.py) gives under the same CPython: the
// same score, feedback and exception.
func TestClassesMatchReference(t *testing.T) {
	embeddedPython(t)
	for _, class := range []string{"signal_timeout", "mp_fork", "mp_spawn"} {
		t.Run(class, func(t *testing.T) {
			t.Parallel()
			cases := classesDir + class + "/cases.jsonl"
			var ref []refLine
			refDone := make(chan struct{})
			go func() { // at the same time as the pool: the time is the metrics' timeouts
				defer close(refDone)
				ref = reference(t, classesDir+class+"/metric.py", cases)
			}()
			var stderr bytes.Buffer
			_, cs, results := scoreClass(t, class, cases, &stderr)
			<-refDone
			require.Len(t, ref, len(cs), "reference.py: one line per case")
			for i, r := range results {
				require.Equal(t, cs[i].ID, r.ID, "result %d", i)
				require.Equal(t, cs[i].ID, ref[i].ID, "reference.py line %d", i+1)
				assert.Equal(t, refOutcome(ref[i]), resultOutcome(r), "%s case %s: reference.py (expected) and the pool (actual)", class, r.ID)
			}
			if t.Failed() {
				t.Logf("stderr:\n%s", stderr.String())
			}
		})
	}
}

// TestCrashIsolation scores crash_one, whose co07 segfaults its process:
// co07 gets a crash result that names it and the signal, every other case
// is what reference.py gives without co07, and the pool counts one crash
// and restarts the process.
func TestCrashIsolation(t *testing.T) {
	embeddedPython(t)
	var stderr bytes.Buffer
	p, cs, results := scoreClass(t, "crash_one", classesDir+"crash_one/cases.jsonl", &stderr)
	ref := reference(t, classesDir+"crash_one/metric.py", classesDir+"crash_one/cases_nocrash.jsonl")
	refByID := map[string]refLine{}
	for _, r := range ref {
		refByID[r.ID] = r
	}
	require.Len(t, ref, len(cs)-1)
	crashes := 0
	for i, r := range results {
		require.Equal(t, cs[i].ID, r.ID, "result %d", i)
		if r.Err != nil && r.Err.Kind == engine.KindCrash {
			crashes++
		}
		if r.ID == "co07" {
			if assert.NotNil(t, r.Err, "co07 crashed its process") && assert.Equal(t, engine.KindCrash, r.Err.Kind, errText(r.Err)) {
				assert.Contains(t, r.Err.Message, "case co07")
				if !asanEnabled {
					assert.Contains(t, r.Err.Message, "crashed")
					assert.Contains(t, r.Err.Message, "SIGSEGV")
				}
				assert.Equal(t, 0.0, r.Score)
			}
			continue
		}
		want, ok := refByID[r.ID]
		require.True(t, ok, "reference.py has case %s", r.ID)
		assert.Equal(t, refOutcome(want), resultOutcome(r), "case %s: reference.py (expected) and the pool (actual)", r.ID)
	}
	assert.Equal(t, 1, crashes, "exactly one crash result")
	st := p.Stats()
	assert.Equal(t, 1, st.Crashes, "Stats().Crashes right after the last result: %+v", st)
	assert.GreaterOrEqual(t, st.Restarts, 1, "Stats().Restarts: %+v", st)
	assert.Equal(t, 0, st.Wedges)
	assert.Contains(t, stderr.String(), "co07", "the pool's notice names the case")
	// The pool goes on scoring after the crash.
	r := p.Score(context.Background(), cs[0])
	assert.Equal(t, refOutcome(refByID[cs[0].ID]), resultOutcome(r))
	if t.Failed() {
		t.Logf("stderr:\n%s", stderr.String())
	}
}

// TestStatsAfterLastResult reads Stats as soon as a stream's last result,
// a crash, is in: the crash is counted already.
func TestStatsAfterLastResult(t *testing.T) {
	metric := writeFile(t, t.TempDir(), "metric.py", `
import os

def score(input, output, expected=None):
    if input.get("exit"):
        os._exit(7)
    return 1.0, {"feedback": "ok"}
`)
	var stderr bytes.Buffer
	p := openPool(t, Options{Options: engine.Options{Metric: metric}, Processes: 1, Stderr: &stderr})
	for round := range 8 {
		cases := []engine.Case{
			{ID: fmt.Sprintf("ok%d", round), Input: map[string]any{}, Output: "x"},
			{ID: fmt.Sprintf("exit%d", round), Input: map[string]any{"exit": true}, Output: "x"},
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		results := collect(t, p.ScoreAll(ctx, seq(cases), 0))
		st := p.Stats()
		cancel()
		require.Len(t, results, 2)
		assert.Nil(t, results[0].Err)
		if assert.NotNil(t, results[1].Err) && assert.Equal(t, engine.KindCrash, results[1].Err.Kind, errText(results[1].Err)) {
			assert.Contains(t, results[1].Err.Message, "exit code 7")
		}
		if !assert.Equal(t, round+1, st.Crashes, "round %d: Stats().Crashes read right after the crash result", round) {
			time.Sleep(100 * time.Millisecond)
			t.Logf("100ms later: Crashes %d, Restarts %d", p.Stats().Crashes, p.Stats().Restarts)
			break
		}
		assert.GreaterOrEqual(t, st.Restarts, round+1)
	}
}

// TestClassesSoak (make soak; SKYNET_CLASSES_SOAK=rounds) scores the
// stdlib classes' cases, four copies of each, in four pools of two
// processes at once, the way a loaded machine runs them, and holds every
// result to what reference.py gave for its case: a result that reached
// another case shows. A case whose metric timed out under the load (its
// feedback says so) is counted, not compared: python3 under that load can
// time out too.
func TestClassesSoak(t *testing.T) {
	rounds, _ := strconv.Atoi(os.Getenv("SKYNET_CLASSES_SOAK"))
	if rounds <= 0 {
		t.Skip("SKYNET_CLASSES_SOAK is not set: make soak sets it")
	}
	embeddedPython(t)
	for _, class := range []string{"mp_fork", "mp_spawn", "signal_timeout", "stdlib_cext", "module_state", "async_gather", "ctypes_libc"} {
		t.Run(class, func(t *testing.T) {
			cases := readCases(t, classesDir+class+"/cases.jsonl")
			var copies []engine.Case
			var lines bytes.Buffer
			for k := range 4 {
				for _, c := range cases {
					c.ID = fmt.Sprintf("%s_%d", c.ID, k)
					copies = append(copies, c)
					b, err := json.Marshal(map[string]any{"id": c.ID, "input": c.Input, "output": c.Output, "expected": c.Expected})
					require.NoError(t, err)
					lines.Write(append(b, '\n'))
				}
			}
			file := filepath.Join(t.TempDir(), "cases.jsonl")
			require.NoError(t, os.WriteFile(file, lines.Bytes(), 0o644))
			ref := reference(t, classesDir+class+"/metric.py", file)
			require.Len(t, ref, len(copies))
			want := map[string]outcome{}
			for _, r := range ref {
				want[r.ID] = refOutcome(r)
			}
			for round := range rounds {
				var wg sync.WaitGroup
				var mu sync.Mutex
				same, timedOut := 0, 0
				for range 4 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						p, err := Open(Options{Options: engine.Options{Metric: classesDir + class + "/metric.py", Timeout: 60 * time.Second},
							Processes: 2, Stderr: io.Discard})
						if !assert.NoError(t, err) {
							return
						}
						defer p.Close()
						results := collect(t, p.ScoreAll(context.Background(), seq(copies), 0))
						mu.Lock()
						defer mu.Unlock()
						if !assert.Len(t, results, len(copies), "one result per case") {
							return
						}
						for i, r := range results {
							assert.Equal(t, copies[i].ID, r.ID, "result %d", i)
							got := resultOutcome(r)
							if got != want[r.ID] && strings.Contains(strings.ToLower(got.Feedback), "time") {
								timedOut++
								continue
							}
							if assert.Equal(t, want[r.ID], got, "%s case %s, round %d: reference.py (expected) and the pool (actual)", class, r.ID, round) {
								same++
							}
						}
					}()
				}
				wg.Wait()
				t.Logf("round %d: %d results the same as reference.py's, %d timed out under the load", round, same, timedOut)
			}
		})
	}
}
