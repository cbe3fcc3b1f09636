package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Defects a new user met (issue 17), each pinned by a test.

const datasetDir = "../../testdata/dataset/"

// A CSV given to skynet score is said, once, not to be JSONL, with the
// command that reads datasets; every line still has its result, and since
// none was a case, the run exits 2, not 0 with a mean of 0.
func TestScoreCSVIsNotJSONL(t *testing.T) {
	code, out, errOut := skynet("score", "--metric", example+"metric.py", "--data", datasetDir+"tickets.csv")
	assert.Equal(t, exitUsage, code, errOut)
	assert.Equal(t, 1, strings.Count(errOut, "is not JSONL"), errOut)
	assert.Contains(t, errOut, `skynet score: ../../testdata/dataset/tickets.csv is not JSONL: line 1 does not start with "{"`)
	assert.Equal(t, 1, strings.Count(errOut, "skynet eval --data ../../testdata/dataset/tickets.csv"), errOut)
	assert.Contains(t, errOut, "no line of ../../testdata/dataset/tickets.csv is a case (see the input errors in the results): the metric was not called")
	lines := resultLines(t, out)
	require.Len(t, lines, 6, "one result per line, none skipped")
	for _, r := range lines {
		require.NotNil(t, r.Error)
		assert.Equal(t, "input", string(r.Error.Kind))
	}

	// From standard input, the same (the built binary, to give it stdin).
	csv, err := os.ReadFile(datasetDir + "tickets.csv")
	require.NoError(t, err)
	code, results, errOut, _ := runCLI(t, csv, "score", "--metric", example+"metric.py", "--data", "-")
	assert.Equal(t, exitUsage, code, errOut)
	assert.Len(t, results, 6)
	assert.Equal(t, 1, strings.Count(errOut, "standard input is not JSONL"), errOut)
	assert.Contains(t, errOut, "use skynet eval --data FILE")
}

// A JSONL dataset (rows of columns, not cases) starts like JSONL, so it is
// told at the end: no line was a case; use skynet eval. Exit 2.
func TestScoreJSONLDatasetHasNoCases(t *testing.T) {
	code, _, errOut := skynet("score", "--metric", example+"metric.py", "--data", datasetDir+"tickets.jsonl")
	assert.Equal(t, exitUsage, code, errOut)
	assert.NotContains(t, errOut, "is not JSONL")
	assert.Contains(t, errOut, "no line of ../../testdata/dataset/tickets.jsonl is a case")
	assert.Equal(t, 1, strings.Count(errOut, "use skynet eval --data ../../testdata/dataset/tickets.jsonl"), errOut)
}

// A file whose first line is not JSON but which holds cases is said not to
// look like JSONL, and still scores what it can: exit 0.
func TestScoreNotJSONLFirstLineButCases(t *testing.T) {
	dir := t.TempDir()
	data := writeFile(t, dir, "cases.txt", "id,input,output\n"+`{"id": "a", "input": {}, "output": "x", "expected": {"label": "x"}}`+"\n")
	code, out, errOut := skynet("score", "--metric", example+"metric.py", "--data", data)
	assert.Equal(t, exitOK, code, errOut)
	assert.Equal(t, 1, strings.Count(errOut, "is not JSONL"), errOut)
	lines := resultLines(t, out)
	require.Len(t, lines, 2)
	assert.Equal(t, "input", string(lines[0].Error.Kind))
	assert.Nil(t, lines[1].Error)
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

// A run where every case failed scored nothing: exit 1, said on stderr,
// every case still with its result. One scored case makes it exit 0.
func TestEveryCaseFailedExits1(t *testing.T) {
	dir := t.TempDir()
	raises := writeFile(t, dir, "raises.py", "def score(input, output, expected=None):\n    if output != 'ok':\n        raise ValueError('no')\n    return 1.0, {'feedback': 'ok'}\n")
	data := writeFile(t, dir, "cases.jsonl", casesText(4, "x"))
	code, out, errOut := skynet("score", "--metric", raises, "--data", data)
	assert.Equal(t, exitCheck, code, errOut)
	assert.Contains(t, errOut, `skynet score: every case failed (4), none has a score: see "error" in the results`)
	assert.Len(t, resultLines(t, out), 4)

	// A contract failure on every case is the same.
	code, _, errOut = skynet("score", "--metric", "../../testdata/contract/no_side_info.py", "--data", example+"cases.jsonl")
	assert.Equal(t, exitCheck, code, errOut)
	assert.Contains(t, errOut, "every case failed (6)")

	// eval: a program whose every run raises.
	prog := writeFile(t, dir, "program.py", "def run(artifact, input):\n    raise RuntimeError('down')\n")
	code, _, errOut = skynet("eval", "--metric", example+"metric.py", "--program", prog, "--artifact", datasetDir+"keywords.txt",
		"--data", datasetDir+"tickets.csv", "--outputs", "label")
	assert.Equal(t, exitCheck, code, errOut)
	assert.Contains(t, errOut, "skynet eval: every case failed (5)")

	mixed := writeFile(t, dir, "mixed.jsonl", casesText(3, "x")+`{"id": "good", "input": {}, "output": "ok"}`+"\n")
	code, _, errOut = skynet("score", "--metric", raises, "--data", mixed)
	assert.Equal(t, exitOK, code, "a case was scored: the failures are results, not a failed run\n%s", errOut)
	assert.NotContains(t, errOut, "every case failed")
}

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
