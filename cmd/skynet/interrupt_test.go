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

// Signals and interrupts: what reaches skynet and not the metric, and what a
// run that is stopped keeps.

// A metric that registers faulthandler on SIGTERM and SIGINT does not stop
// skynet from being stopped: 143 after SIGTERM, 130 after SIGINT, and every
// result written is whole.
func TestSignalsReachSkynetNotTheMetric(t *testing.T) {
	dir := t.TempDir()
	data := writeFile(t, dir, "cases.jsonl", casesText(2000, "x"))
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		out := filepath.Join(dir, "results-"+strconv.Itoa(int(sig))+".jsonl")
		cmd := exec.Command(skynetBin(t), "score", "--metric", faultsDir+"faulthandler_signals.py", "--data", data, "--out", out)
		require.NoError(t, cmd.Start())
		waitLines(t, out, 20)
		assert.Equal(t, 128+int(sig), signalAndWait(t, cmd, sig), "%v stops the run", sig)
		checkPrefix(t, out, 2000)
	}
}

// SIGINT while the child is being restarted (every case crashes it) still
// leaves each case read with one result, and --resume finishes the rest.
func TestInterruptDuringRestarts(t *testing.T) {
	dir := t.TempDir()
	metric := writeFile(t, dir, "metric.py", "import os, time\ndef score(input, output, expected=None):\n    if input[\"n\"] % 3 == 0:\n        os._exit(9)\n    time.sleep(0.01)\n    return 1.0, {\"feedback\": \"ok\"}\n")
	data := writeFile(t, dir, "cases.jsonl", casesText(240, "x"))
	out := filepath.Join(dir, "results.jsonl")
	cmd := exec.Command(skynetBin(t), "score", "--metric", metric, "--data", data, "--out", out, "--max-crashes", "100")
	require.NoError(t, cmd.Start())
	waitLines(t, out, 5)
	assert.Equal(t, 130, signalAndWait(t, cmd, syscall.SIGINT))
	checkPrefix(t, out, 240)

	res, err := exec.Command(skynetBin(t), "score", "--metric", metric, "--data", data, "--out", out, "--resume", "--max-crashes", "100").CombinedOutput()
	var ee2 *exec.ExitError
	require.ErrorAs(t, err, &ee2, string(res))
	assert.Equal(t, exitCheck, ee2.ExitCode(), "cases crashed: exit 1\n%s", res)
	b, _ := os.ReadFile(out)
	lines := resultLines(t, string(b))
	seen := map[string]int{}
	for _, r := range lines {
		seen[r.ID]++
		n, _ := strconv.Atoi(strings.TrimPrefix(r.ID, "c"))
		if n%3 == 0 {
			assert.Equal(t, "crash", string(r.Error.Kind), r.ID)
		} else {
			assert.Nil(t, r.Error, r.ID)
		}
	}
	require.Len(t, seen, 240)
	for id, k := range seen {
		assert.Equal(t, 1, k, id)
	}
}

// SIGINT while the workers still import a slow metric ends the run at once
// (130), without waiting out the import.
func TestInterruptDuringLoad(t *testing.T) {
	dir := t.TempDir()
	metric := writeFile(t, dir, "metric.py", "import time\ntime.sleep(30)\ndef score(input, output, expected=None):\n    return 1.0, {\"feedback\": \"ok\"}\n")
	data := writeFile(t, dir, "cases.jsonl", casesText(3, "x"))
	cmd := exec.Command(skynetBin(t), "score", "--metric", metric, "--data", data, "--out", filepath.Join(dir, "results.jsonl"))
	require.NoError(t, cmd.Start())
	time.Sleep(500 * time.Millisecond)
	start := time.Now()
	assert.Equal(t, 130, signalAndWait(t, cmd, syscall.SIGINT))
	assert.Less(t, time.Since(start), 10*time.Second, "the import takes 30 s")
}

// A run whose every case was already sent to the child (a small file) stops
// at the signal, not after scoring on for a grace period: the cancel reaches
// the child through the still-open case pipe.
func TestSignalStopsARunFullySent(t *testing.T) {
	dir := t.TempDir()
	metric := writeFile(t, dir, "metric.py", "import time\ndef score(input, output, expected=None):\n    time.sleep(0.05)\n    return 1.0, {'feedback': 'ok'}\n")
	data := writeFile(t, dir, "cases.jsonl", casesText(200, "x"))
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		out := filepath.Join(dir, "results-"+strconv.Itoa(int(sig))+".jsonl")
		cmd := exec.Command(skynetBin(t), "score", "--metric", metric, "--data", data, "--out", out)
		var summary bytes.Buffer
		cmd.Stdout = &summary
		require.NoError(t, cmd.Start())
		waitLines(t, out, 5)
		at := linesIn(t, out)
		assert.Equal(t, 128+int(sig), signalAndWait(t, cmd, sig))
		lines := resultFile(t, out)
		require.Len(t, lines, 200, "every case read has its result")
		scored := 0
		for i, r := range lines {
			require.Equal(t, "c"+strconv.Itoa(i+1), r.ID)
			if r.Error == nil {
				scored++
			} else {
				assert.Equal(t, "canceled", string(r.Error.Kind))
			}
		}
		// At 50 ms a case, a 5 s grace would have scored ~100 more.
		assert.LessOrEqual(t, scored, at+10, "%v: scored %d, %d when signalled", sig, scored, at)
		assert.Contains(t, summary.String(), fmt.Sprintf("INTERRUPTED after scoring %d case(s)", scored))
	}
}
