package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/skynetml/skynet/engine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const difflibDir = "../../testdata/difflib/"

// TestDifflibBenchmarkFiles keeps testdata/difflib/ usable for benchmarks:
// make_cases.py reproduces the committed cases.jsonl byte for byte, and
// skynet score and the bench's plain and Pool baselines (internal/baseline/) give
// every case the same score and feedback, on the embedded CPython's own python3.
func TestDifflibBenchmarkFiles(t *testing.T) {
	cases := difflibDir + "cases.jsonl"
	dir := t.TempDir()
	engineOut := filepath.Join(dir, "engine.jsonl")
	code, _, errOut := skynet("score", "--metric", difflibDir+"metric.py", "--data", cases, "--out", engineOut)
	require.Equal(t, exitOK, code, errOut)
	scored := difflibResults(t, engineOut)
	require.Len(t, scored, 50)

	// The command ran Python in its child; open an engine here so this
	// process has the interpreter whose python3 the baselines use.
	e, err := engine.Open(engine.Options{Metric: difflibDir + "metric.py"})
	require.NoError(t, err)
	defer e.Close()
	python, err := embeddedPython()
	require.NoError(t, err)
	want, err := os.ReadFile(cases)
	require.NoError(t, err)
	made, err := exec.Command(python, difflibDir+"make_cases.py", "50").Output()
	require.NoError(t, err)
	require.Equal(t, string(want), string(made), "make_cases.py 50 writes cases.jsonl")
	for _, script := range [][]string{{"../../internal/baseline/script.py"}, {"../../internal/baseline/pool.py", "2"}} {
		out := filepath.Join(dir, filepath.Base(script[0])+".jsonl")
		b, err := exec.Command(python, append([]string{script[0], difflibDir + "metric.py", cases, out}, script[1:]...)...).CombinedOutput()
		require.NoError(t, err, string(b))
		assert.Equal(t, scored, difflibResults(t, out), script[0])
	}
	assert.Equal(t, "Similarity 0.888 to the expected text (108 vs 106 characters).", scored[0].Feedback)
}

type difflibResult struct {
	ID       string
	Score    float64
	Feedback string
}

func difflibResults(t *testing.T, path string) []difflibResult {
	return jsonFile[difflibResult](t, path)
}
