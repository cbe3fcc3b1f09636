package main

import (
	"bytes"
	"fmt"
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

// writeFile writes a file in dir and returns its path.
func writeFile(t *testing.T, dir, name, text string) string {
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
	return p
}

func casesText(n int, output string) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, `{"id": "c%d", "input": {"n": %d}, "output": %q}`+"\n", i, i, output)
	}
	return b.String()
}

// --out naming the case file (itself, a symlink or a hard link to it) is
// refused before anything is written.
func TestOutIsNotTheData(t *testing.T) {
	dir := t.TempDir()
	data := writeFile(t, dir, "cases.jsonl", casesText(3, "x"))
	require.NoError(t, os.Symlink(data, filepath.Join(dir, "sym.jsonl")))
	require.NoError(t, os.Link(data, filepath.Join(dir, "hard.jsonl")))
	for _, out := range []string{data, filepath.Join(dir, "sym.jsonl"), filepath.Join(dir, "hard.jsonl")} {
		code, _, errOut := skynet("score", "--metric", example+"metric.py", "--data", data, "--out", out)
		assert.Equal(t, exitUsage, code)
		assert.Contains(t, errOut, "is the case file --data ")
		b, err := os.ReadFile(data)
		require.NoError(t, err)
		assert.Equal(t, casesText(3, "x"), string(b), "the cases are untouched")
	}
}

// With --data -, the metric's stdin is /dev/null: reading it cannot eat
// case lines.
func TestMetricCannotReadTheCases(t *testing.T) {
	const n = 3000
	code, lines, stderr, _ := runCLI(t, []byte(casesText(n, "fault")), "score", "--metric", faultsDir+"reads_stdin.py", "--data", "-")
	require.Equal(t, exitOK, code, stderr)
	require.Len(t, lines, n)
	for i, r := range lines {
		require.Equal(t, "c"+strconv.Itoa(i+1), r.ID)
		require.Equal(t, "read 0 bytes from stdin", r.Feedback)
	}
}

// checkPrefix asserts a results file holds whole lines for c1..cK in order,
// each once, finished ones first and cancelled ones after.
func checkPrefix(t *testing.T, path string, n int) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	lines := resultLines(t, string(b))
	require.LessOrEqual(t, len(lines), n)
	for i, r := range lines {
		require.Equal(t, "c"+strconv.Itoa(i+1), r.ID, "results are c1..cK in order, each once")
	}
}

// A line that never ends (--data /dev/zero) is bounded by --max-line-bytes,
// and Ctrl-C still stops the run.
func TestEndlessLine(t *testing.T) {
	cmd := exec.Command(skynetBin(t), "score", "--metric", example+"metric.py", "--data", "/dev/zero", "--max-line-bytes", "1000000")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Start())
	time.Sleep(1500 * time.Millisecond)
	rss := rssKB(t, cmd.Process.Pid)
	assert.Equal(t, 130, signalAndWait(t, cmd, syscall.SIGINT), "SIGINT stops a run reading an endless line\n%s", stderr.String())
	assert.Less(t, rss, 200_000, "RSS in KB while reading 1.5 s of zeros")
	lines := resultLines(t, stdout.String())
	require.Len(t, lines, 1)
	assert.Equal(t, "input", string(lines[0].Error.Kind))
	assert.Contains(t, lines[0].Error.Message, "longer than 1000000 bytes")
}

func rssKB(t *testing.T, pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			require.NoError(t, err)
			return n
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// --resume refuses a results file that holds ids the data does not have.
func TestResumeRefusesForeignResults(t *testing.T) {
	dir := t.TempDir()
	data := writeFile(t, dir, "cases.jsonl", casesText(3, "x"))
	foreign := `{"id":"other-7","score":1,"feedback":"","scores":{},"error":null,"ms":1}` + "\n"
	out := writeFile(t, dir, "results.jsonl", foreign)
	code, _, errOut := skynet("score", "--metric", example+"metric.py", "--data", data, "--out", out, "--resume")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, `has a result for case "other-7", which is not in`)
	b, _ := os.ReadFile(out)
	assert.Equal(t, foreign, string(b), "the results file is left as it was")

	// Failed results that --resume would score again stay too, when the
	// run is refused.
	failed := foreign + `{"id":"other-8","score":0,"feedback":"line 2: invalid JSON","scores":{},"error":{"kind":"input","message":"line 2: invalid JSON"},"ms":0}` + "\n"
	out = writeFile(t, dir, "results.jsonl", failed)
	code, _, errOut = skynet("score", "--metric", example+"metric.py", "--data", data, "--out", out, "--resume", "--retry-failed")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, `has a result for case "other-7", which is not in`)
	b, _ = os.ReadFile(out)
	assert.Equal(t, failed, string(b), "the results file is left as it was")
}

// Ids are unique after normalisation: a case without an id is named by its
// line number, so line 1 without one and "id": 1 collide. The later line's
// result is an input error naming both lines, the lines after it are
// scored, and stderr says so as it happens: one result a line, as ever.
func TestRepeatedIDs(t *testing.T) {
	dir := t.TempDir()
	data := writeFile(t, dir, "cases.jsonl", `{"input": {}, "output": "x", "expected": {"label": "x"}}`+"\n"+
		`{"id": 1, "input": {}, "output": "b", "expected": {"label": "b"}}`+"\n"+
		`{"id": "c", "input": {}, "output": "c", "expected": {"label": "c"}}`+"\n")
	code, out, errOut := skynet("score", "--metric", example+"metric.py", "--data", data)
	assert.Equal(t, exitOK, code, errOut)
	assert.Contains(t, errOut, `line 2: case id "1" is also the id of line 1`)
	lines := resultLines(t, out)
	require.Len(t, lines, 3, "one result per line")
	assert.Equal(t, []string{"1", "1", "c"}, []string{lines[0].ID, lines[1].ID, lines[2].ID})
	assert.Nil(t, lines[0].Error)
	require.NotNil(t, lines[1].Error)
	assert.Equal(t, "input", string(lines[1].Error.Kind))
	assert.Contains(t, lines[1].Error.Message, `line 2: case id "1" is also the id of line 1`)
	assert.Nil(t, lines[2].Error, "the lines after the repeat are scored")
	assert.Contains(t, errOut, "errors: 1 (input 1: 1)")
}

// A case file that starts with a UTF-8 byte order mark scores its first
// case; a line of Unicode spaces is a case line (an input error), not a
// blank one.
func TestBOMAndUnicodeSpaces(t *testing.T) {
	dir := t.TempDir()
	data := writeFile(t, dir, "cases.jsonl", "\xEF\xBB\xBF"+`{"id": "a", "input": {}, "output": "x", "expected": {"label": "x"}}`+"\n\u00a0\u3000\n\n")
	code, out, errOut := skynet("score", "--metric", example+"metric.py", "--data", data)
	require.Equal(t, exitOK, code, errOut)
	lines := resultLines(t, out)
	require.Len(t, lines, 2)
	assert.Nil(t, lines[0].Error)
	assert.Equal(t, 1.0, lines[0].Score)
	require.NotNil(t, lines[1].Error)
	assert.Equal(t, "input", string(lines[1].Error.Kind))
}

// Finished results reach the disk while a later case is still running: a
// kill -9 of skynet then loses none of the first group of cases.
func TestResultsFlushedWhileASlowCaseRuns(t *testing.T) {
	dir := t.TempDir()
	metric := writeFile(t, dir, "metric.py", "import time\ndef score(input, output, expected=None):\n    if output == \"slow\":\n        time.sleep(30)\n    return 1.0, {\"feedback\": \"ok\"}\n")
	data := writeFile(t, dir, "cases.jsonl", casesText(100, "fast")+`{"id": "slow", "input": {}, "output": "slow"}`+"\n")
	out := filepath.Join(dir, "results.jsonl")
	cmd := exec.Command(skynetBin(t), "score", "--metric", metric, "--data", data, "--out", out)
	require.NoError(t, cmd.Start())
	waitLines(t, out, 64)
	time.Sleep(300 * time.Millisecond)
	require.NoError(t, cmd.Process.Kill())
	cmd.Wait()
	checkPrefix(t, out, 100)
	assert.GreaterOrEqual(t, linesIn(t, out), 64, "the first group of 64 is on disk")
}

// With the cases on standard input, --resume can only tell at the end that
// the results file held another dataset's ids: it warns, naming one.
func TestResumeForeignResultsFromStdin(t *testing.T) {
	dir := t.TempDir()
	out := writeFile(t, dir, "results.jsonl", `{"id":"other-7","score":1,"feedback":"","scores":{},"error":null,"ms":1}`+"\n")
	cmd := exec.Command(skynetBin(t), "score", "--metric", example+"metric.py", "--data", "-", "--out", out, "--resume")
	// Cases that score: a run whose every case failed exits 1.
	cmd.Stdin = strings.NewReader(strings.ReplaceAll(casesText(3, "x"), `"output": "x"}`, `"output": "x", "expected": {"label": "x"}}`))
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, string(b))
	assert.Contains(t, string(b), `warning: --resume: `)
	assert.Contains(t, string(b), `has a result for case "other-7", which is not in the cases read from standard input`)
}

// signalAndWait sends sig to a running command and returns its exit code,
// failing the test when it has not exited within 15 s.
func signalAndWait(t *testing.T, cmd *exec.Cmd, sig syscall.Signal) int {
	t.Helper()
	require.NoError(t, cmd.Process.Signal(sig))
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee)
		return ee.ExitCode()
	case <-time.After(15 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("%v did not stop the run", sig)
		return 0
	}
}

// --out naming any other input (the metric, the program, the artifact, the
// price file, a part to merge, a split of eval's dataset) is refused too,
// and the file is untouched.
func TestOutIsNoInput(t *testing.T) {
	dir := t.TempDir()
	metric := writeFile(t, dir, "metric.py", "def score(input, output, expected=None):\n    return 1.0, {'feedback': 'ok'}\n")
	data := writeFile(t, dir, "cases.jsonl", casesText(3, "x"))
	program := writeFile(t, dir, "program.py", "def run(artifact, input):\n    return artifact\n")
	artifact := writeFile(t, dir, "prompt.txt", "Classify the ticket.\n")
	prices := writeFile(t, dir, "prices.json", `{"openai/gpt-4o-mini": {"input_per_mtok": 0.15, "output_per_mtok": 0.6}}`)
	splits := filepath.Join(dir, "splits")
	require.NoError(t, os.Mkdir(splits, 0o755))
	val := writeFile(t, splits, "val.csv", "id,message,label\na,hello,x\n")
	part := writeFile(t, dir, "part.jsonl", `{"id":"c1","score":1,"feedback":"ok","scores":{},"error":null,"ms":1}`+"\n")
	evalArgs := func(data, out string) []string {
		return []string{"eval", "--program", program, "--artifact", artifact, "--metric", metric, "--data", data, "--outputs", "label", "--out", out}
	}
	for _, tc := range []struct {
		args []string
		file string
		says string
	}{
		{[]string{"score", "--metric", metric, "--data", data, "--out", metric}, metric, "is the metric --metric "},
		{[]string{"score", "--metric", metric, "--data", data, "--prices", prices, "--out", prices}, prices, "is the price file --prices "},
		{evalArgs(val, program), program, "is the program --program "},
		{evalArgs(val, artifact), artifact, "is the artifact --artifact "},
		{evalArgs(val, metric), metric, "is the metric --metric "},
		{append(evalArgs(splits, val), "--split", "val"), val, "is inside the dataset --data "},
		{[]string{"merge", "--data", data, "--out", part, part}, part, "is the part "},
	} {
		t.Run(strings.Join(tc.args[:1], " ")+" "+filepath.Base(tc.file), func(t *testing.T) {
			before, err := os.ReadFile(tc.file)
			require.NoError(t, err)
			code, _, errOut := skynet(tc.args...)
			assert.Equal(t, exitUsage, code, errOut)
			assert.Contains(t, errOut, tc.says)
			assert.Contains(t, errOut, "would destroy")
			after, err := os.ReadFile(tc.file)
			require.NoError(t, err)
			assert.Equal(t, string(before), string(after), "the file is untouched")
		})
	}
}
