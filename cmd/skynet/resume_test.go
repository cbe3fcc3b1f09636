package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A results file records what made it (OUT.meta.json: the metric's
// SHA-256); --resume with a changed metric is refused naming both, and
// leaves the file as it was, unless --allow-mixed, which says so and
// records both. merge refuses parts of two metrics.
func TestResumeAfterTheMetricChanged(t *testing.T) {
	dir := t.TempDir()
	src, err := os.ReadFile(example + "metric.py")
	require.NoError(t, err)
	metric := writeFile(t, dir, "metric.py", string(src))
	out := filepath.Join(dir, "results.jsonl")
	code, _, errOut := skynet("score", "--metric", metric, "--data", example+"cases.jsonl", "--out", out)
	require.Equal(t, exitOK, code, errOut)
	meta, err := os.ReadFile(out + metaSuffix)
	require.NoError(t, err)
	assert.Contains(t, string(meta), `"role": "metric"`)
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	kept := strings.Join(strings.SplitAfter(string(b), "\n")[:3], "")
	require.NoError(t, os.WriteFile(out, []byte(kept), 0o644)) // as if interrupted after 3

	// The same metric resumes.
	code, _, errOut = skynet("score", "--metric", metric, "--data", example+"cases.jsonl", "--out", out, "--resume")
	require.Equal(t, exitOK, code, errOut)
	require.NoError(t, os.WriteFile(out, []byte(kept), 0o644))

	// A changed one is refused, the file untouched.
	writeFile(t, dir, "metric.py", string(src)+"\n# changed\n")
	code, stdout, errOut := skynet("score", "--metric", metric, "--data", example+"cases.jsonl", "--out", out, "--resume")
	assert.Equal(t, exitUsage, code, errOut)
	assert.Empty(t, stdout)
	assert.Regexp(t, `--resume: .*results\.jsonl was made by metric .*metric\.py \(sha256 [0-9a-f]{12}\) \(skynet score, [0-9T:-]+Z\); this run's is metric .*metric\.py \(sha256 [0-9a-f]{12}\): resuming would put two metrics' scores under one mean`, errOut)
	assert.Contains(t, errOut, "--allow-mixed")
	b, err = os.ReadFile(out)
	require.NoError(t, err)
	assert.Equal(t, kept, string(b), "the results file is left as it was")

	// --allow-mixed keeps both, says so, and records both.
	code, _, errOut = skynet("score", "--metric", metric, "--data", example+"cases.jsonl", "--out", out, "--resume", "--allow-mixed")
	assert.Equal(t, exitOK, code, errOut)
	assert.Contains(t, errOut, "warning: --allow-mixed: ")
	assert.Equal(t, 6, len(resultLines(t, readString(t, out))))
	meta, err = os.ReadFile(out + metaSuffix)
	require.NoError(t, err)
	assert.Contains(t, string(meta), `"mixed"`)
	assert.Equal(t, 2, strings.Count(string(meta), `"sha256"`))

	// merge refuses parts made by two metrics.
	partA, partB := filepath.Join(dir, "a.jsonl"), filepath.Join(dir, "b.jsonl")
	code, _, errOut = skynet("score", "--metric", metric, "--data", example+"cases.jsonl", "--shard", "0/2", "--out", partA)
	require.Equal(t, exitOK, code, errOut)
	writeFile(t, dir, "metric.py", string(src))
	code, _, errOut = skynet("score", "--metric", metric, "--data", example+"cases.jsonl", "--shard", "1/2", "--out", partB)
	require.Equal(t, exitOK, code, errOut)
	merged := filepath.Join(dir, "merged.jsonl")
	code, _, errOut = skynet("merge", "--data", example+"cases.jsonl", "--out", merged, partA, partB)
	assert.Equal(t, exitUsage, code, errOut)
	assert.Contains(t, errOut, "the parts were made by different runs")
	assert.NoFileExists(t, merged)
}

func readString(t *testing.T, path string) string {
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}
