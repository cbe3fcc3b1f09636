package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A metric that sets a signal handler while cases run on two threads is
// warned of once a stream, in one wording: check says it in its threads
// line (not again on stderr); score says it on stderr, where its summary
// is too, and again in the summary when that goes to stdout (--out).
func TestSignalWarningOnce(t *testing.T) {
	dir := t.TempDir()
	metric := writeFile(t, dir, "metric.py", "import signal\ndef score(input, output, expected=None):\n    signal.signal(signal.SIGALRM, lambda *a: None)\n    return 1.0, {'feedback': 'ok'}\n")
	const warning = "metric.py:3 sets a signal handler (signal.signal)"

	code, out, errOut := skynetOut(t, "check", "--metric", metric, "--data", example+"cases.jsonl", "--threads", "2")
	assert.Equal(t, exitCheck, code, errOut) // the cases on the second thread raise ValueError
	assert.Regexp(t, `(?m)^ok      threads: .*metric\.py:3 sets a signal handler \(signal\.signal\)`, out)
	assert.Equal(t, 1, strings.Count(out+errOut, warning), "stdout: %s\nstderr: %s", out, errOut)

	code, out, errOut = skynetOut(t, "score", "--metric", metric, "--data", example+"cases.jsonl", "--threads", "2", "--processes", "1")
	assert.Equal(t, exitOK, code, errOut)
	assert.Equal(t, 1, strings.Count(errOut, warning), errOut)
	assert.NotContains(t, out, warning)

	code, out, errOut = skynetOut(t, "score", "--metric", metric, "--data", example+"cases.jsonl", "--threads", "2", "--processes", "1",
		"--out", writeFile(t, dir, "results.jsonl", ""))
	assert.Equal(t, exitOK, code, errOut)
	assert.Equal(t, 1, strings.Count(errOut, warning), errOut)
	assert.Equal(t, 1, strings.Count(out, warning), "the summary, on stdout: %s", out)
}
