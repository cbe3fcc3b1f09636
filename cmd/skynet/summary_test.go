package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The summary says, for the run it ends: the mean with its standard error
// and 95% interval (clustered by an input field with --cluster), each named
// score's, a histogram, errors by kind with their first ids, and the call
// time's percentiles with the slowest cases; --summary-json writes the same
// figures, which agree with the results file's.
func TestSummaryFigures(t *testing.T) {
	dir := t.TempDir()
	metric := writeFile(t, dir, "metric.py", `
import time
def score(input, output, expected=None):
    if output == "raise":
        raise ValueError("no")
    if output == "slow":
        time.sleep(0.05)
    v = float(input["v"])
    return v, {"feedback": "ok", "scores": {"half": v / 2}}
`)
	var b strings.Builder
	vals := []float64{1, 0, 1, 1, 0.5, 0, 1, 0.25, 1, 0}
	for i, v := range vals {
		out := "x"
		switch i {
		case 3:
			out = "raise"
		case 7:
			out = "slow"
		}
		fmt.Fprintf(&b, `{"id": "c%d", "input": {"v": %v, "passage": "p%d"}, "output": %q}`+"\n", i, v, i/3, out)
	}
	data := writeFile(t, dir, "cases.jsonl", b.String())
	sumPath := filepath.Join(dir, "summary.json")
	code, out, errOut := skynet("score", "--metric", metric, "--data", data, "--summary-json", sumPath, "--cluster", "passage")
	require.Equal(t, exitOK, code, errOut)
	results := resultLines(t, out)
	require.Len(t, results, len(vals))

	var n, sum, sq float64
	for _, r := range results {
		n++
		sum += r.Score
	}
	mean := sum / n
	for _, r := range results {
		sq += (r.Score - mean) * (r.Score - mean)
	}
	se := math.Sqrt(sq/(n-1)) / math.Sqrt(n)

	var got summaryJSON
	raw, err := os.ReadFile(sumPath)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &got))
	assert.Equal(t, 10, got.Cases)
	assert.Equal(t, 9, got.Scored)
	assert.Equal(t, 1, got.Failed)
	assert.InDelta(t, mean, got.Mean.Mean, 1e-12)
	assert.Equal(t, "passage", got.Mean.Cluster)
	assert.Equal(t, 4, got.Mean.Clusters)
	require.NotNil(t, got.Mean.SE)
	assert.NotEqual(t, se, *got.Mean.SE, "clustered, the standard error is not the plain one")
	assert.Equal(t, errorsJSON{Count: 1, FirstIDs: []string{"c3"}}, got.Errors["exception"])
	require.NotNil(t, got.CallMS)
	assert.Equal(t, "c7", got.CallMS.Slowest[0].ID, "the slow case is the slowest")
	assert.GreaterOrEqual(t, got.CallMS.Slowest[0].MS, 50.0)
	assert.Equal(t, 10, sumInts(got.Histogram.Counts))
	assert.Equal(t, []int{4, 0, 1, 0, 0, 1, 0, 0, 0, 4}, got.Histogram.Counts, "0 (3, and the failed case), 0.25, 0.5, 1 (4)")
	require.Contains(t, got.Named, "half")
	assert.Equal(t, 9, got.Named["half"].N, "the failed case has no named score")

	assert.Regexp(t, `(?m)^mean score: 0\.4750 \(95% interval -?\d\.\d{4} to \d\.\d{4}; standard error \d\.\d{4}, clustered by input "passage" in 4 clusters; failed cases count as 0\)$`, errOut)
	assert.Contains(t, errOut, "\nhistogram (10 bins from 0 to 1): 4 0 1 0 0 1 0 0 0 4\n")
	assert.Contains(t, errOut, "\nerrors: 1 (exception 1: c3)\n")
	assert.Regexp(t, `(?m)^call time: p50 [0-9.]+ µs, p99 [0-9.]+ ms; slowest: c7 [0-9.]+ ms, `, errOut)
	assert.Regexp(t, `(?m)^named scores: half 0\.\d{4} \[-?\d\.\d{4}, \d\.\d{4}\] \(9\)$`, errOut)

	// Without --cluster, the plain standard error.
	code, _, errOut = skynet("score", "--metric", metric, "--data", data, "--summary-json", sumPath)
	require.Equal(t, exitOK, code, errOut)
	raw, err = os.ReadFile(sumPath)
	require.NoError(t, err)
	got = summaryJSON{}
	require.NoError(t, json.Unmarshal(raw, &got))
	assert.InDelta(t, se, *got.Mean.SE, 1e-12)
	assert.Contains(t, errOut, fmt.Sprintf("standard error %.4f;", se))
}

func sumInts(v []int) int {
	n := 0
	for _, x := range v {
		n += x
	}
	return n
}
