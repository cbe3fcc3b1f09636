package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
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
}
