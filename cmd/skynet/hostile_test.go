package main

// What a hostile metric may do to the run around it (testdata/faults'
// process-child faults and generated inputs): each must end as promised,
// one result a case and a clear error, within a bounded time.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// killGrandchild kills the process whose pid the grandchild fault wrote.
func killGrandchild(t *testing.T, pidfile string) {
	t.Cleanup(func() {
		if b, err := os.ReadFile(pidfile); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
}

// TestGrandchildHoldingPipes: a grandchild that left the worker's process
// group and holds its pipes for a minute neither hangs skynet score nor
// keeps skynet serve from stopping on SIGTERM.
func TestGrandchildHoldingPipes(t *testing.T) {
	cases, _, _ := fiveCases(t)
	pidfile := filepath.Join(t.TempDir(), "grandchild.pid")
	killGrandchild(t, pidfile)
	env := []string{"SKYNET_TEST_GRANDCHILD_PIDFILE=" + pidfile}
	code, lines, stderr, took := runCLIEnv(t, env, nil, "score", "--metric", faultsDir+"grandchild_holds_pipes.py", "--data", cases, "--processes", "1")
	assert.Equal(t, exitOK, code, stderr)
	exactlyOnce(t, lines, stderr)
	assert.Less(t, took, 20*time.Second, "the run waited for the grandchild (it sleeps 60 s)")
	_, err := os.Stat(pidfile)
	require.NoError(t, err, "the grandchild ran")

	pidfile2 := filepath.Join(t.TempDir(), "grandchild.pid")
	killGrandchild(t, pidfile2)
	t.Setenv("SKYNET_TEST_GRANDCHILD_PIDFILE", pidfile2) // skynet serve's workers inherit it
	s := startServe(t, "--metric", faultsDir+"grandchild_holds_pipes.py", "--processes", "1")
	body, err := os.ReadFile(cases)
	require.NoError(t, err)
	status, reply := postBody(t, s.url+"/v1/score", "application/x-ndjson", body)
	require.Equal(t, http.StatusOK, status, string(reply))
	assert.Len(t, splitLines(reply), 5)
	start := time.Now()
	require.NoError(t, s.cmd.Process.Signal(syscall.SIGTERM))
	assert.Equal(t, exitOK, s.wait(t), s.stderr())
	assert.Less(t, time.Since(start), 15*time.Second, "skynet serve waited for the grandchild after SIGTERM")
}

// TestLongCaseIDs: an id of any length a case line may have, and a named
// score as long, cross from the worker whole, in skynet score and serve.
func TestLongCaseIDs(t *testing.T) {
	dir := t.TempDir()
	metric := writeFile(t, dir, "metric.py", `def score(input, output, expected=None):
    return 1.0, {"feedback": "ok", "scores": {"n" * 70000: 1.0}}
`)
	ids := []string{strings.Repeat("L", 65536), "short", strings.Repeat("M", 200000)}
	var b bytes.Buffer
	for _, id := range ids {
		line, err := json.Marshal(map[string]any{"id": id, "input": map[string]any{}, "output": "x"})
		require.NoError(t, err)
		b.Write(append(line, '\n'))
	}
	data := writeFile(t, dir, "cases.jsonl", b.String())
	code, lines, stderr, _ := runCLI(t, nil, "score", "--metric", metric, "--data", data)
	require.Equal(t, exitOK, code, stderr[:min(len(stderr), 2000)])
	require.Len(t, lines, len(ids))
	for i, r := range lines {
		assert.Equal(t, ids[i], r.ID, "case %d", i)
		assert.Nil(t, r.Error, "case %d", i)
		assert.Contains(t, r.Scores, strings.Repeat("n", 70000))
	}
	assert.NotContains(t, stderr, "restart")
	assert.Contains(t, stderr, "named scores: "+strings.Repeat("n", 40)+"... (70000 bytes) 1.0000 [1.0000, 1.0000] (3)", "a long name is cut in the summary")

	s := startServe(t, "--metric", metric, "--processes", "1")
	status, reply := postBody(t, s.url+"/v1/score", "application/x-ndjson", b.Bytes())
	require.Equal(t, http.StatusOK, status, string(reply[:min(len(reply), 2000)]))
	got := resultLines(t, string(reply))
	require.Len(t, got, len(ids))
	for i, r := range got {
		assert.Equal(t, ids[i], r.ID, "serve, case %d", i)
		assert.Nil(t, r.Error, "serve, case %d", i)
	}
}

// TestResultsNotHeldBehindASlowCase: results of cases that finished while
// a slow case of the same batch runs reach the --out file long before it
// ends, so a kill then loses none of them.
func TestResultsNotHeldBehindASlowCase(t *testing.T) {
	dir := t.TempDir()
	metric := writeFile(t, dir, "metric.py", `import time
def score(input, output, expected=None):
    if input.get("slow"):
        time.sleep(30)
    return 1.0, {"feedback": "ok"}
`)
	var b strings.Builder
	for i := range 100 {
		fmt.Fprintf(&b, `{"id": "f%d", "input": {}, "output": "x"}`+"\n", i)
	}
	b.WriteString(`{"id": "slow", "input": {"slow": true}, "output": "x"}` + "\n")
	data := writeFile(t, dir, "cases.jsonl", b.String())
	out := filepath.Join(dir, "results.jsonl")
	cmd := exec.Command(skynetBin(t), "score", "--metric", metric, "--data", data, "--out", out, "--processes", "1")
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	deadline := time.Now().Add(15 * time.Second)
	for linesIn(t, out) < 100 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	cmd.Wait()
	assert.Equal(t, 100, linesIn(t, out), "the 100 fast cases' results are on disk while the slow case (30 s) runs")
}

// TestMetricReadingItsFds: a metric that drains every descriptor of its
// process (the worker's pipes among them) costs no other case anything:
// every case gets its score, none is cancelled, and the exit code says all
// is well only because it is.
func TestMetricReadingItsFds(t *testing.T) {
	if testing.Short() {
		t.Skip("5,000 cases, three runs")
	}
	dir := t.TempDir()
	var b strings.Builder
	for i := range 5000 {
		out := "ok"
		if i == 1000 {
			out = "fault"
		}
		fmt.Fprintf(&b, `{"id": "c%d", "input": {"n": %d}, "output": %q}`+"\n", i, i, out)
	}
	data := writeFile(t, dir, "cases.jsonl", b.String())
	for run := range 3 {
		code, lines, stderr, _ := runCLI(t, nil, "score", "--metric", faultsDir+"drains_fds.py", "--data", data)
		assert.Equal(t, exitOK, code, "run %d: %s", run, stderr)
		require.Len(t, lines, 5000, "run %d", run)
		for i, r := range lines {
			if !assert.Nil(t, r.Error, "run %d, case %s: %s", run, r.ID, stderr) {
				break
			}
			assert.Equal(t, fmt.Sprintf("c%d", i), r.ID)
		}
		assert.NotContains(t, stderr, "cancelled")
	}
}

// TestResumeWithAPermanentlyBadLine: --resume on a finished results file
// whose case file has a line that is not a case (and stays so) has nothing
// new to score, and exits 0 as any finished resume does.
func TestResumeWithAPermanentlyBadLine(t *testing.T) {
	dir := t.TempDir()
	data := writeFile(t, dir, "cases.jsonl", `{"id": "a", "input": {}, "output": "x"}
{"id": "b", "input": {}, "outptu": "x"}
{"id": "c", "input": {}, "output": "x"}
`)
	metric := writeFile(t, dir, "metric.py", "def score(input, output, expected=None):\n    return 1.0, {\"feedback\": \"ok\"}\n")
	out := filepath.Join(dir, "results.jsonl")
	code, _, errOut := skynet("score", "--metric", metric, "--data", data, "--out", out)
	require.Equal(t, exitOK, code, errOut)
	for range 2 {
		code, stdout, errOut := skynet("score", "--metric", metric, "--data", data, "--out", out, "--resume")
		assert.Equal(t, exitOK, code, "%s%s", stdout, errOut)
		assert.NotContains(t, errOut, "no line of")
		got := resultFile(t, out)
		require.Len(t, got, 3)
		assert.Equal(t, "input", string(got[1].Error.Kind))
	}
}

// TestFaulthandlerEnable: faulthandler.enable() at import needs
// sys.stderr.fileno(), as python3 gives it.
func TestFaulthandlerEnable(t *testing.T) {
	cases, _, _ := fiveCases(t)
	code, lines, stderr, _ := runCLI(t, nil, "score", "--metric", faultsDir+"faulthandler_enable.py", "--data", cases)
	require.Equal(t, exitOK, code, stderr)
	byID := exactlyOnce(t, lines, stderr)
	assert.Equal(t, "faulthandler on, stderr fd 2, stdout fd 2", byID["c1"].Feedback)
}

// TestMetricSignalsItsParent: os.kill(os.getppid(), SIGTERM) and a SIGINT to
// the parent's process group fail the case that sends them; the run goes
// on and ends as a run that was not interrupted.
func TestMetricSignalsItsParent(t *testing.T) {
	cases, _, _ := fiveCases(t)
	// In a process group of its own: were the signal to get through, it
	// would stop skynet, not this test.
	cmd := exec.Command(skynetBin(t), "score", "--metric", faultsDir+"signals_parent.py", "--data", cases)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	code, stderr := exitCode(t, cmd.Run()), errb.String()
	lines := resultLines(t, out.String())
	assert.Equal(t, exitOK, code, stderr)
	assert.NotContains(t, stderr, "INTERRUPTED")
	byID := exactlyOnce(t, lines, stderr)
	c2 := byID["c2"]
	require.NotNil(t, c2.Error)
	assert.Equal(t, "exception", string(c2.Error.Kind))
	assert.Contains(t, c2.Feedback, "PermissionError: skynet: os.kill(")
	assert.Contains(t, c2.Feedback, "the parent of this worker process")
	for _, id := range []string{"c1", "c3", "c4", "c5"} {
		assert.Nil(t, byID[id].Error, id)
	}
}

// TestStoppedWorker: a worker stopped by SIGSTOP is found within seconds,
// not after the fixed silence limit (10 s) whatever --timeout is.
func TestStoppedWorker(t *testing.T) {
	cases, _, _ := fiveCases(t)
	code, lines, stderr, took := runCLI(t, nil, "score", "--metric", faultsDir+"stops_itself.py", "--data", cases, "--timeout", "2s", "--processes", "1")
	assert.Equal(t, exitCheck, code, stderr)
	byID := exactlyOnce(t, lines, stderr)
	c2 := byID["c2"]
	require.NotNil(t, c2.Error)
	assert.Equal(t, "crash", string(c2.Error.Kind))
	assert.Contains(t, c2.Error.Message, "stopped (SIGSTOP)")
	assert.Less(t, took, 9*time.Second, "found before the 10 s silence limit (twice: once with its batch, once alone)")
}

// TestSummaryAfterPartialOutput: a metric's last output without a newline
// does not make the summary start mid-line; named scores with control
// characters are quoted.
func TestSummaryAfterPartialOutput(t *testing.T) {
	dir := t.TempDir()
	metric := writeFile(t, dir, "metric.py", `import os
print("loading, no newline", end="")
def score(input, output, expected=None):
    os.write(2, b"from C, no newline")
    return 1.0, {"feedback": "ok", "scores": {"a\x00b": 0.5, "\x1b[31mred": 1.0}}
`)
	data := writeFile(t, dir, "cases.jsonl", casesText(3, "x"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, skynetBin(t), "score", "--metric", metric, "--data", data, "--processes", "1")
	var errb bytes.Buffer
	cmd.Stderr = &errb
	require.NoError(t, cmd.Run())
	sc := bufio.NewScanner(&errb)
	var summary []string
	for sc.Scan() {
		if strings.Contains(sc.Text(), "scored") {
			assert.True(t, strings.HasPrefix(sc.Text(), "scored 3 case(s)"), "the summary starts its own line: %q", sc.Text())
		}
		summary = append(summary, sc.Text())
	}
	assert.Contains(t, summary, `named scores: "\x1b[31mred" 1.0000 [1.0000, 1.0000] (3), "a\x00b" 0.5000 [0.5000, 0.5000] (3)`)
}
