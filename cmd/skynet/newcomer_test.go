package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Defects a new user met (issue 17), each pinned by a test.

const datasetDir = "../../testdata/dataset/"

// skynet check names the case and the rule once, and shows the fix for a
// return value of the wrong shape; --json carries the fix too.
func TestCheckSaysCaseAndRuleOnce(t *testing.T) {
	code, out, _ := skynet("check", "--metric", "../../testdata/contract/no_side_info.py", "--data", example+"cases.jsonl")
	assert.Equal(t, exitCheck, code)
	assert.Contains(t, out, "FAILED  metric's return value [case t1]: must return a pair (score, side info), got float 0.8: no side info (also case t2, t3)\n"+
		`        fix: return score, {"feedback": "..."}`+"\n")
	assert.NotContains(t, out, "case t1: metric's return value")
	assert.Equal(t, 1, strings.Count(out, "t1"), out)

	code, out, _ = skynet("check", "--metric", "../../testdata/contract/score_is_string.py", "--data", example+"cases.jsonl", "--samples", "1", "--json")
	assert.Equal(t, exitCheck, code)
	var report struct {
		Checks []struct{ Name, Case, Message, Fix string } `json:"checks"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &report))
	rv := report.Checks[len(report.Checks)-1]
	assert.Equal(t, "t1", rv.Case)
	assert.Equal(t, "score must be a number, got str '0.8'", rv.Message)
	assert.Equal(t, `return float(score), {"feedback": "..."}`, rv.Fix)

	// A metric that raises has no fix to show, only the traceback.
	code, out, _ = skynet("check", "--metric", "../../testdata/contract/raises.py", "--data", example+"cases.jsonl", "--samples", "1")
	assert.Equal(t, exitCheck, code)
	assert.Contains(t, out, "FAILED  metric's return value [case t1]: score raised KeyError: 'labels'\n")
	assert.NotContains(t, out, "fix:")
}

// A missing metric (or program) file is a file error, exit 2 at once, for
// every command, as a missing data file is.
func TestMissingMetricIsAFileError(t *testing.T) {
	const missing = "../../testdata/no/metric.py"
	prog, art := "../../testdata/programs/keywords.py", datasetDir+"keywords.txt"
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"check", "--metric", missing, "--data", example + "cases.jsonl"}, "skynet check: --metric " + missing + ": no such file"},
		{[]string{"score", "--metric", missing, "--data", example + "cases.jsonl"}, "skynet score: --metric " + missing + ": no such file"},
		{[]string{"eval", "--metric", missing, "--program", prog, "--artifact", art, "--data", datasetDir + "tickets.csv"}, "skynet eval: --metric " + missing + ": no such file"},
		{[]string{"eval", "--metric", example + "metric.py", "--program", "no/program.py", "--artifact", art, "--data", datasetDir + "tickets.csv"}, "skynet eval: --program no/program.py: no such file"},
		{[]string{"score", "--metric", example, "--data", example + "cases.jsonl"}, "is a directory, not a file"},
		{[]string{"score", "--metric", example + "metric.py", "--data", "no/such/cases.jsonl"}, "no/such/cases.jsonl"},
	} {
		t.Run(strings.Join(tc.args[:3], " "), func(t *testing.T) {
			code, out, errOut := skynet(tc.args...)
			assert.Equal(t, exitUsage, code, errOut)
			assert.Contains(t, errOut, tc.says)
			assert.Empty(t, out, "nothing is scored")
		})
	}
}
