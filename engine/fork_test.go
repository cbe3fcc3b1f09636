package engine

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// forkMetric forks in score and in run. The child does what input["mode"]
// says and then returns (or raises); the parent waits for it, up to 10 s,
// and reports its exit status and how long it took. A child that got back
// into Go would carry on as a second copy of the host, so its exit status
// would not be a prompt 0: the skynet.* modes end with os._exit(7), which
// only runs if the call returned instead of ending the child.
const forkMetric = `
import os, time, skynet

REWARD_SPEC = {"weights": {"accuracy": 0.7, "speed": 0.2, "cost": 0.1},
               "accuracy": {}, "speed": {"reference": 2000}, "cost": {"reference": 0.01}}

def child(mode):
    if mode == "raise":
        raise ValueError("the child raises")
    if mode == "observation":
        skynet.observation()
        os._exit(7)
    if mode == "reward":
        skynet.reward(REWARD_SPEC, 1.0, "child")
        os._exit(7)
    if mode == "llm":
        skynet.llm("say hi")
        os._exit(7)
    return 0.5, {"feedback": "child"}

def forked(mode):
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        return child(mode)
    while time.monotonic() - start < 10:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return f"child exit {os.waitstatus_to_exitcode(status)} after {time.monotonic() - start:.3f}s"
        time.sleep(0.002)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    return "child still running after 10s"

def score(input, output, expected=None):
    if input.get("mode") == "run":
        return 1.0, {"feedback": output}
    return 1.0, {"feedback": forked(input["mode"])}

def run(artifact, input):
    return forked("return")
`

var forkModes = []string{"return", "raise", "observation", "reward", "llm"}

// inFreshProcess runs test child of this test binary in a new process with
// SKYNET_TEST_FORK_CHILD=arg and returns its output. Forking is tried there:
// a forked copy that got back into Go would write into that output, not
// the test's. WaitDelay bounds how long a forked copy left holding
// the output pipe could keep the test waiting.
func inFreshProcess(t *testing.T, child, arg string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+child+"$", "-test.v")
	cmd.Env = append(os.Environ(), "SKYNET_TEST_FORK_CHILD="+arg, "SKYNET_METRIC_MODEL=", "SKYNET_REFLECTION_MODEL=")
	cmd.WaitDelay = 5 * time.Second
	timer := time.AfterFunc(90*time.Second, func() { cmd.Process.Kill() })
	defer timer.Stop()
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	return string(out)
}

// TestForkedChildNeverReturnsIntoGo checks the whole output of an engine
// scoring cases that fork: one result per case, each the parent's score,
// every forked child gone with status 0 at once, and one summary.
func TestForkedChildNeverReturnsIntoGo(t *testing.T) {
	if os.Getenv("SKYNET_TEST_FORK_CHILD") != "" {
		return
	}
	out := inFreshProcess(t, "TestForkedChildNeverReturnsIntoGoChild", writeMetric(t, forkMetric))
	var results []string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "RESULT ") {
			results = append(results, line)
		}
	}
	want := append(slices.Clone(forkModes), "run")
	require.Len(t, results, len(want), "exactly one result per case:\n%s", out)
	status := regexp.MustCompile(`^RESULT (\w+) 1\.0 child exit 0 after (\d+\.\d+)s$`)
	for i, line := range results {
		m := status.FindStringSubmatch(line)
		require.NotNil(t, m, "the parent's score, and the child exited with status 0: %s", line)
		assert.Equal(t, want[i], m[1])
		var secs float64
		fmt.Sscan(m[2], &secs)
		assert.Less(t, secs, 3.0, "the child exits at once: %s", line)
	}
	assert.Equal(t, 1, strings.Count(out, "SUMMARY "), "one summary, not one per process:\n%s", out)
}

func TestForkedChildNeverReturnsIntoGoChild(t *testing.T) {
	metric := os.Getenv("SKYNET_TEST_FORK_CHILD")
	if metric == "" {
		t.Skip("runs as TestForkedChildNeverReturnsIntoGo's child process")
	}
	e := open(t, Options{Metric: metric})
	var cases []Case
	for _, m := range forkModes {
		cases = append(cases, Case{ID: m, Input: map[string]any{"mode": m}})
	}
	n := 0
	for _, r := range e.ScoreAll(ctx, slices.Values(cases), 0) {
		require.Nil(t, r.Err, "%+v", r.Err)
		fmt.Printf("RESULT %s %.1f %s\n", r.ID, r.Score, r.Feedback)
		n++
	}
	// run forks too: its child must not go on to score or report.
	p := open(t, Options{Metric: metric, Program: metric})
	for _, r := range p.Evaluate(ctx, nil, slices.Values([]Case{{ID: "run", Input: map[string]any{"mode": "run"}}})) {
		require.Nil(t, r.Err, "%+v", r.Err)
		fmt.Printf("RESULT %s %.1f %s\n", r.ID, r.Score, r.Feedback)
		n++
	}
	fmt.Printf("SUMMARY %d results\n", n)
}

// Forks that exec or end with os._exit keep working: subprocess (vfork, and
// fork+exec when preexec_fn forces a real fork) and multiprocessing's fork
// workers, which run Python and call os._exit. The host goes on scoring
// after them.
func TestSubprocessAndForkPoolInsideScore(t *testing.T) {
	if os.Getenv("SKYNET_TEST_FORK_CHILD") != "" {
		return
	}
	out := inFreshProcess(t, "TestSubprocessAndForkPoolInsideScoreChild", writeMetric(t, `
import multiprocessing, subprocess

def square(x):
    return x * x

def score(input, output, expected=None):
    a = subprocess.run(["sh", "-c", "echo vfork"], capture_output=True, text=True)
    b = subprocess.run(["sh", "-c", "echo fork"], capture_output=True, text=True, preexec_fn=lambda: None)
    a = a.stdout.strip() if a.returncode == 0 else repr(a)
    b = b.stdout.strip() if b.returncode == 0 else repr(b)
    with multiprocessing.get_context("fork").Pool(2) as pool:
        squares = pool.map(square, range(6))
    return 1.0, {"feedback": f"{a} {b} {squares}"}
`))
	want := "FEEDBACK 0: vfork fork [0, 1, 4, 9, 16, 25]\nFEEDBACK 1: vfork fork [0, 1, 4, 9, 16, 25]\n"
	assert.Contains(t, out, want)
	assert.Equal(t, 2, strings.Count(out, "FEEDBACK "), out)
}

func TestSubprocessAndForkPoolInsideScoreChild(t *testing.T) {
	metric := os.Getenv("SKYNET_TEST_FORK_CHILD")
	if metric == "" {
		t.Skip("runs as TestSubprocessAndForkPoolInsideScore's child process")
	}
	e := open(t, Options{Metric: metric})
	for i := 0; i < 2; i++ {
		r := e.Score(ctx, Case{ID: fmt.Sprint(i), Input: map[string]any{}})
		require.Nil(t, r.Err, "%+v", r.Err)
		fmt.Printf("FEEDBACK %d: %s\n", i, r.Feedback)
	}
}
