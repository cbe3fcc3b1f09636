package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// binary builds the skynet command once for the tests that run it as a
// separate process.
func skynetBin(t *testing.T) string {
	if raceEnabled {
		t.Skip("runs the skynet binary, which is not a race build: the run without -race covers it")
	}
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "skynet-bin-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "skynet")
		// As make build does: the revision recorded (skynet version).
		out, err := exec.Command("go", "build", "-buildvcs=auto", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("%v: %s", err, out)
		}
	})
	require.NoError(t, binErr)
	return binPath
}

// slowRun writes a metric that takes a few ms per case and n cases.
func slowRun(t *testing.T, n int) (metric, data string) {
	dir := t.TempDir()
	metric = filepath.Join(dir, "metric.py")
	require.NoError(t, os.WriteFile(metric, []byte(`
import time
def score(input, output, expected=None):
    time.sleep(0.004)
    return float(input["n"]), {"feedback": "ok"}
`), 0o644))
	data = filepath.Join(dir, "cases.jsonl")
	var b bytes.Buffer
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, `{"id": "c%d", "input": {"n": %d}, "output": "x"}`+"\n", i, i)
	}
	require.NoError(t, os.WriteFile(data, b.Bytes(), 0o644))
	return metric, data
}

func linesIn(t *testing.T, path string) int {
	b, _ := os.ReadFile(path)
	return bytes.Count(b, []byte{'\n'})
}

// waitLines waits until path holds at least n lines.
func waitLines(t *testing.T, path string, n int) {
	deadline := time.Now().Add(20 * time.Second)
	for linesIn(t, path) < n {
		require.True(t, time.Now().Before(deadline), "no progress in %s", path)
		time.Sleep(20 * time.Millisecond)
	}
}

// checkComplete asserts every case has exactly one finished result.
func checkComplete(t *testing.T, path string, n int) {
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	seen := map[string]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r resultLine
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r), "a torn or invalid line: %q", sc.Text())
		require.Nil(t, r.Error, "%s: %+v", r.ID, r.Error)
		seen[r.ID]++
	}
	require.Len(t, seen, n)
	for i := 0; i < n; i++ {
		assert.Equal(t, 1, seen[fmt.Sprintf("c%d", i)], "c%d", i)
	}
}

// A run killed with SIGKILL mid-way and resumed ends with exactly one
// result per case.
func TestKillAndResume(t *testing.T) {
	const n = 300
	metric, data := slowRun(t, n)
	out := filepath.Join(t.TempDir(), "results.jsonl")
	cmd := exec.Command(skynetBin(t), "score", "--metric", metric, "--data", data, "--out", out)
	require.NoError(t, cmd.Start())
	waitLines(t, out, 40)
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	cmd.Wait()
	before := linesIn(t, out)
	require.Less(t, before, n, "killed before the end")

	res, err := exec.Command(skynetBin(t), "score", "--metric", metric, "--data", data, "--out", out, "--resume").CombinedOutput()
	require.NoError(t, err, string(res))
	assert.Contains(t, string(res), fmt.Sprintf("resumed: %d case(s) were already done and kept", before))
	checkComplete(t, out, n)
	checkInOrder(t, out, n)
}

// SIGINT stops cleanly: the summary says interrupted, every case read has a
// result, and --resume finishes the rest without duplicates.
func TestInterruptAndResume(t *testing.T) {
	const n = 300
	metric, data := slowRun(t, n)
	out := filepath.Join(t.TempDir(), "results.jsonl")
	cmd := exec.Command(skynetBin(t), "score", "--metric", metric, "--data", data, "--out", out)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	require.NoError(t, cmd.Start())
	waitLines(t, out, 40)
	assert.Equal(t, 130, signalAndWait(t, cmd, syscall.SIGINT), "an interrupted run exits 130, as shells do for SIGINT")
	assert.Contains(t, stdout.String(), "INTERRUPTED after scoring")

	res, err := exec.Command(skynetBin(t), "score", "--metric", metric, "--data", data, "--out", out, "--resume").CombinedOutput()
	require.NoError(t, err, string(res))
	checkComplete(t, out, n)
	checkInOrder(t, out, n)
}

// checkInOrder asserts the results are c0..c(n-1) in input order.
func checkInOrder(t *testing.T, path string, n int) {
	t.Helper()
	ids := resultIDs(t, path)
	require.Len(t, ids, n)
	for i, id := range ids {
		require.Equal(t, fmt.Sprintf("c%d", i), id, "result %d of the resumed file: input order", i+1)
	}
}

// resultIDs reads the ids of a results file, in its order.
func resultIDs(t *testing.T, path string) []string {
	t.Helper()
	var ids []string
	for _, r := range resultFile(t, path) {
		ids = append(ids, r.ID)
	}
	return ids
}

// labelCases writes n cases c0..c(n-1) that the exact-match metric scores 1.
func labelCases(t *testing.T, dir string, n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, `{"id": "c%d", "input": {"n": %d}, "output": "x", "expected": {"label": "x"}}`+"\n", i, i)
	}
	return writeFile(t, dir, "cases.jsonl", b.String())
}

// A results file --resume continues ends in input order, as if the run had
// never stopped: an interrupted run (one worker's cases finished past the
// gap the others left: c0-c2, c5, the rest cancelled) and a resume that was
// itself killed (kept results, then new ones appended) both come out
// c0..c9, the kept results kept as they were.
func TestResumeEndsInInputOrder(t *testing.T) {
	dir := t.TempDir()
	data := labelCases(t, dir, 10)
	done := func(id string) string {
		return `{"id":"` + id + `","score":1,"feedback":"kept","scores":{},"error":null,"ms":1}` + "\n"
	}
	cancelled := func(id string) string {
		return `{"id":"` + id + `","score":0,"feedback":"score cancelled: interrupted (interrupt)","scores":{},"error":{"kind":"canceled","message":"score cancelled: interrupted (interrupt)"},"ms":0}` + "\n"
	}
	want := []string{"c0", "c1", "c2", "c3", "c4", "c5", "c6", "c7", "c8", "c9"}
	for name, text := range map[string]string{
		"interrupted": done("c0") + done("c1") + done("c2") + cancelled("c3") + cancelled("c4") + done("c5") +
			cancelled("c6") + cancelled("c7") + cancelled("c8") + cancelled("c9"),
		"killed resume": done("c0") + done("c1") + done("c5") + done("c2") + done("c3"),
		"torn":          done("c0") + done("c2") + `{"id":"c1","sco`,
	} {
		t.Run(name, func(t *testing.T) {
			out := writeFile(t, dir, "results-"+strings.ReplaceAll(name, " ", "-")+".jsonl", text)
			made, err := identityOf("score", "metric", example+"metric.py") // as the run that wrote it recorded
			require.NoError(t, err)
			require.NoError(t, writeIdentity(out, made))
			code, summary, errOut := skynet("score", "--metric", example+"metric.py", "--data", data, "--out", out, "--resume")
			require.Equal(t, exitOK, code, errOut)
			assert.NotContains(t, errOut, "warning")
			assert.Equal(t, want, resultIDs(t, out), "input order\n%s", summary)
			for _, r := range resultFile(t, out) {
				if strings.Contains(text, done(r.ID)) {
					assert.Equal(t, "kept", r.Feedback, "%s was kept, not scored again", r.ID)
				} else {
					assert.Equal(t, "Correct.", r.Feedback, r.ID)
				}
			}
			fi, err := os.Stat(out)
			require.NoError(t, err)
			assert.Equal(t, os.FileMode(0o644), fi.Mode().Perm(), "the rewritten file keeps its mode")
			left, _ := filepath.Glob(filepath.Join(dir, ".skynet-resume-*"))
			assert.Empty(t, left, "no temporary file is left behind")
		})
	}
}

// A broken line's result carries the id read from it; once the file is
// fixed, --resume reads the lines whose result was an input error again
// and scores them. --retry-failed also scores again the cases that failed
// otherwise (here an exception); without it they are kept.
func TestResumeScoresFixedAndFailedCases(t *testing.T) {
	dir := t.TempDir()
	good := func(id string, n int) string {
		return fmt.Sprintf(`{"id": %q, "input": {"n": %d}, "output": "x", "expected": {"label": "x"}}`+"\n", id, n)
	}
	broken := writeFile(t, dir, "broken.jsonl", good("a", 1)+
		`{"id": "b", "input": {"n": 2}, "output": "x", "expected": {"label": "x"}`+"\n"+
		`{"id": "c", "inptu": {"n": 3}, "output": "x", "expected": {"label": "x"}}`+"\n"+good("d", 4))
	fixed := writeFile(t, dir, "fixed.jsonl", good("a", 1)+good("b", 2)+good("c", 3)+good("d", 4))
	flaky := writeFile(t, dir, "flaky.py", `
def score(input, output, expected=None):
    if input["n"] == 4:
        raise ValueError("flaky")
    return 1.0, {"feedback": "Correct."}
`)
	out := filepath.Join(dir, "r.jsonl")
	code, _, errOut := skynet("score", "--metric", flaky, "--data", broken, "--out", out)
	require.Equal(t, exitOK, code, errOut)
	kinds := func() map[string]string {
		m := map[string]string{}
		for _, r := range resultFile(t, out) {
			m[r.ID] = "ok"
			if r.Error != nil {
				m[r.ID] = string(r.Error.Kind)
			}
		}
		return m
	}
	assert.Equal(t, []string{"a", "b", "c", "d"}, resultIDs(t, out), "the broken line's result is named by its id, not its line number")
	assert.Equal(t, map[string]string{"a": "ok", "b": "input", "c": "input", "d": "exception"}, kinds())

	code, summary, errOut := skynet("score", "--metric", flaky, "--data", fixed, "--out", out, "--resume")
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, []string{"a", "b", "c", "d"}, resultIDs(t, out))
	assert.Equal(t, map[string]string{"a": "ok", "b": "ok", "c": "ok", "d": "exception"}, kinds(), "the fixed lines are scored; the exception is kept")
	assert.Contains(t, summary, "resumed: 2 failed result(s) dropped, to score their cases again (input 2)")

	code, _, errOut = skynet("score", "--metric", example+"metric.py", "--data", fixed, "--out", out, "--retry-failed")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "--retry-failed needs --resume")

	// The metric fixed: its results and the kept ones are two metrics', so
	// the run must say it mixes them.
	code, _, errOut = skynet("score", "--metric", example+"metric.py", "--data", fixed, "--out", out, "--resume", "--retry-failed")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "resuming would put two metrics' scores under one mean")
	code, summary, errOut = skynet("score", "--metric", example+"metric.py", "--data", fixed, "--out", out, "--resume", "--retry-failed", "--allow-mixed")
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, []string{"a", "b", "c", "d"}, resultIDs(t, out))
	assert.Equal(t, map[string]string{"a": "ok", "b": "ok", "c": "ok", "d": "ok"}, kinds(), "--retry-failed scores the failed case again")
	assert.Contains(t, summary, "(exception 1)")
	assert.Contains(t, summary, "resumed: 3 case(s) were already done and kept")
}
