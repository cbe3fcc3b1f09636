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
	"testing"
	"time"

	"github.com/skynetml/skynet/cpython"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const faultsDir = "../../testdata/faults/"

// fiveCases writes five cases, c1 to c5, where c2 has the output that makes
// a fault file misbehave; as a case file (score) and as a dataset with a
// program that passes its "o" column through (eval).
func fiveCases(t *testing.T) (cases, dataset, program string) {
	dir := t.TempDir()
	var c, d bytes.Buffer
	for i := 1; i <= 5; i++ {
		out := "ok"
		if i == 2 {
			out = "fault"
		}
		fmt.Fprintf(&c, `{"id": "c%d", "input": {"n": %d}, "output": %q}`+"\n", i, i, out)
		fmt.Fprintf(&d, `{"id": "c%d", "o": %q}`+"\n", i, out)
	}
	cases, dataset, program = filepath.Join(dir, "cases.jsonl"), filepath.Join(dir, "data.jsonl"), filepath.Join(dir, "program.py")
	require.NoError(t, os.WriteFile(cases, c.Bytes(), 0o644))
	require.NoError(t, os.WriteFile(dataset, d.Bytes(), 0o644))
	require.NoError(t, os.WriteFile(program, []byte("def run(artifact, input):\n    return input[\"o\"]\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "artifact.txt"), []byte("a"), 0o644))
	return cases, dataset, program
}

// runCLI runs the skynet binary and returns its exit code, results (parsed,
// every line checked whole) and stderr.
func runCLI(t *testing.T, stdin []byte, args ...string) (int, []resultLine, string, time.Duration) {
	t.Helper()
	return runCLIEnv(t, nil, stdin, args...)
}

// runCLIEnv is runCLI with env added to the environment.
func runCLIEnv(t *testing.T, env []string, stdin []byte, args ...string) (int, []resultLine, string, time.Duration) {
	t.Helper()
	cmd := exec.Command(skynetBin(t), args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	code := exitCode(t, cmd.Run())
	took := time.Since(start)
	var lines []resultLine
	sc := bufio.NewScanner(&out)
	sc.Buffer(nil, 1<<26)
	for sc.Scan() {
		var r resultLine
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r), "a result line is not whole JSON: %q\nstderr: %s", sc.Text(), errb.String())
		lines = append(lines, r)
	}
	return code, lines, errb.String(), took
}

// exactlyOnce asserts the results are c1..c5 in order, each once.
func exactlyOnce(t *testing.T, lines []resultLine, stderr string) map[string]resultLine {
	t.Helper()
	byID := map[string]resultLine{}
	var ids []string
	for _, r := range lines {
		ids = append(ids, r.ID)
		byID[r.ID] = r
	}
	require.Equal(t, []string{"c1", "c2", "c3", "c4", "c5"}, ids, "one result per case, in input order\nstderr: %s", stderr)
	return byID
}

// TestCrashersLoseNothing runs every fault that takes its process down (or
// wedges it) through skynet score and skynet eval on five cases where case
// c2 misbehaves: five unique results, c2's of the fault's kind, the others
// scored, and exit code 1 when a case crashed.
func TestCrashersLoseNothing(t *testing.T) {
	cases, dataset, program := fiveCases(t)
	artifact := filepath.Join(filepath.Dir(program), "artifact.txt")
	newCPython := !strings.HasPrefix(cpython.Version().Header, "3.10") && !strings.HasPrefix(cpython.Version().Header, "3.11")
	for _, tc := range []struct {
		file, kind string
		says       string // a regexp the message matches
		timeout    string
	}{
		{file: "os_exit.py", kind: "crash", says: "exit code 7"},
		{file: "segfault.py", kind: "crash", says: "SIGSEGV"},
		{file: "abort.py", kind: "crash", says: "SIGABRT"},
		{file: "c_stack_overflow.py", kind: "crash", says: "SIGSEGV", timeout: "20s"}, // 3.13 takes a while to reach its C recursion limit
		{file: "kills_itself.py", kind: "crash", says: "SIGKILL"},
		{file: "closes_fds.py", kind: "crash", says: "channel|exit code 2"}, // 2: the Go runtime fails on its closed epoll fd first
		{file: "writes_every_fd.py", kind: "crash", says: "corrupted"},
		{file: "cpu_rlimit.py", kind: "crash", says: "SIGXCPU", timeout: "10s"},   // as under python3: the soft limit's default action
		{file: "switch_interval.py", kind: "timeout", says: "timed out after 1s"}, // the engine's own result, or the kill's ("could not be stopped") when it never came
		{file: "regex_wedge.py", kind: "timeout", says: "timed out"},
		{file: "forks.py", kind: "", says: ""},
	} {
		if tc.file == "c_stack_overflow.py" && newCPython {
			tc.kind, tc.says = "exception", "RecursionError" // 3.12+ stops C recursion itself
		}
		for _, cmd := range []string{"score", "eval"} {
			t.Run(cmd+"/"+tc.file, func(t *testing.T) {
				timeout := "1s"
				if tc.timeout != "" {
					timeout = tc.timeout
				}
				args := []string{cmd, "--metric", faultsDir + tc.file, "--timeout", timeout}
				if cmd == "score" {
					args = append(args, "--data", cases)
				} else {
					args = append(args, "--data", dataset, "--program", program, "--artifact", artifact)
				}
				code, lines, stderr, took := runCLI(t, nil, args...)
				byID := exactlyOnce(t, lines, stderr)
				for _, id := range []string{"c1", "c3", "c4", "c5"} {
					assert.Nil(t, byID[id].Error, "%s: %+v", id, byID[id].Error)
					assert.Equal(t, 1.0, byID[id].Score, id)
				}
				c2 := byID["c2"]
				if tc.kind == "" {
					assert.Nil(t, c2.Error, "%+v", c2.Error)
					assert.Equal(t, 1.0, c2.Score)
					assert.Equal(t, exitOK, code, stderr)
					return
				}
				require.NotNil(t, c2.Error, "c2 must fail")
				assert.Equal(t, tc.kind, string(c2.Error.Kind), c2.Error.Message)
				assert.Regexp(t, tc.says, c2.Error.Message)
				if tc.kind == "crash" {
					assert.Equal(t, exitCheck, code, "a crashed case is a failed run\n%s", stderr)
					assert.Contains(t, stderr, "restarts: ", "the summary shows the restarts")
				} else {
					assert.Equal(t, exitOK, code, stderr)
				}
				if tc.kind == "timeout" {
					// 1s timeout, the engine's grace, the kill and a new child:
					// well inside the 60s an unbounded wedge would take.
					assert.Less(t, took, 20*time.Second)
				}
				if tc.file == "segfault.py" {
					assert.Contains(t, c2.Error.Message, "about to read address 0", "the metric's last output is in the message")
					assert.NotContains(t, stderr, "goroutine ", "the Go runtime's crash report is not passed on")
				}
			})
		}
	}
}

// A metric that crashes on every case still gives every case one result,
// and the run stops restarting it after --max-crashes in a row.
func TestCrashOnEveryCase(t *testing.T) {
	dir := t.TempDir()
	metric := filepath.Join(dir, "metric.py")
	require.NoError(t, os.WriteFile(metric, []byte("import os\ndef score(input, output, expected=None):\n    os._exit(3)\n"), 0o644))
	var data bytes.Buffer
	for i := 1; i <= 8; i++ {
		fmt.Fprintf(&data, `{"id": "c%d", "input": {}, "output": 1}`+"\n", i)
	}
	code, lines, stderr, _ := runCLI(t, data.Bytes(), "score", "--metric", metric, "--data", "-", "--max-crashes", "3")
	require.Len(t, lines, 8, stderr)
	for i, r := range lines {
		assert.Equal(t, fmt.Sprintf("c%d", i+1), r.ID)
		require.NotNil(t, r.Error)
		assert.Equal(t, "crash", string(r.Error.Kind))
		if i < 3 {
			assert.Contains(t, r.Error.Message, "exit code 3")
		} else {
			assert.Contains(t, r.Error.Message, "stopped restarting")
		}
	}
	assert.Equal(t, exitCheck, code)
	assert.Contains(t, stderr, "errors: 8 (crash 8: c1, c2, c3, ...)")
}

// A metric that cannot load because it loops or crashes at import fails the
// "metric loads" check, on time.
func TestLoadFaults(t *testing.T) {
	cases, _, _ := fiveCases(t)
	for _, tc := range []struct{ file, says string }{
		{"import_loop.py", "did not finish within 2s (--load-timeout)"},
		{"signature_loop.py", "did not finish within 2s (--load-timeout)"},
		{"import_crash.py", "SIGSEGV"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			code, lines, stderr, took := runCLI(t, nil, "score", "--metric", faultsDir+tc.file, "--data", cases, "--load-timeout", "2s")
			assert.Equal(t, exitCheck, code, stderr)
			assert.Empty(t, lines)
			assert.Contains(t, stderr, `check "metric loads" failed`)
			assert.Contains(t, stderr, tc.says)
			assert.Less(t, took, 15*time.Second)
			code, out, _ := skynetOut(t, "check", "--metric", faultsDir+tc.file, "--data", cases, "--load-timeout", "2s")
			assert.Equal(t, exitCheck, code)
			assert.Contains(t, out, "FAILED  metric loads")
			assert.Contains(t, out, tc.says)
		})
	}
}

// skynetOut runs the binary and returns its exit code, stdout and stderr.
func skynetOut(t *testing.T, args ...string) (int, string, string) {
	return skynetEnv(t, nil, args...)
}

// skynetEnv is skynetOut with env added to the environment.
func skynetEnv(t *testing.T, env []string, args ...string) (int, string, string) {
	cmd := exec.Command(skynetBin(t), args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	return exitCode(t, cmd.Run()), out.String(), errb.String()
}

// With several workers (and interpreters, on 3.12+) in flight, crashes
// still leave every case exactly one result: 300 cases, two of them crash.
func TestCrashesWithWorkersInFlight(t *testing.T) {
	dir := t.TempDir()
	metric := writeFile(t, dir, "metric.py", "import ctypes, os\ndef score(input, output, expected=None):\n    if output == \"segv\":\n        ctypes.string_at(0)\n    if output == \"exit\":\n        os._exit(5)\n    return float(input[\"n\"]), {\"feedback\": \"ok\"}\n")
	var data bytes.Buffer
	for i := 1; i <= 300; i++ {
		out := "ok"
		switch i {
		case 40:
			out = "segv"
		case 170:
			out = "exit"
		}
		fmt.Fprintf(&data, `{"id": "c%d", "input": {"n": %d}, "output": %q}`+"\n", i, i, out)
	}
	interps := "auto"
	for _, workers := range []string{"1", "4"} {
		t.Run("workers="+workers, func(t *testing.T) {
			code, lines, stderr, _ := runCLI(t, data.Bytes(), "score", "--metric", metric, "--data", "-", "--workers", workers, "--interpreters", interps)
			require.Len(t, lines, 300, stderr)
			for i, r := range lines {
				require.Equal(t, fmt.Sprintf("c%d", i+1), r.ID, "in order, each once")
				switch i + 1 {
				case 40, 170:
					require.NotNil(t, r.Error, r.ID)
					assert.Equal(t, "crash", string(r.Error.Kind), r.ID)
				default:
					require.Nil(t, r.Error, "%s: %+v", r.ID, r.Error)
					assert.Equal(t, float64(i+1), r.Score)
				}
			}
			assert.Equal(t, exitCheck, code)
			assert.Contains(t, stderr, "errors: 2 (crash 2: c40, c170)")
		})
	}
}

// exitCode is the exit code a finished command's error says (0 for none);
// an error that is not an exit fails the test.
func exitCode(t *testing.T, err error) int {
	t.Helper()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	require.NoError(t, err)
	return 0
}
