package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// What a user is told when a case file, dataset, split, metric or merge part
// is not what the command reads, and what every line still gets.

const datasetDir = "../../testdata/dataset/"

// A CSV file given to skynet score is refused before a result is written
// (exit 2), said once not to be JSONL, with the command that reads
// datasets; --out is not even created.
func TestScoreCSVIsNotJSONL(t *testing.T) {
	code, out, errOut := skynet("score", "--metric", example+"metric.py", "--data", datasetDir+"tickets.csv")
	assert.Equal(t, exitUsage, code, errOut)
	assert.Equal(t, 1, strings.Count(errOut, "is not JSONL"), errOut)
	assert.Contains(t, errOut, `skynet score: ../../testdata/dataset/tickets.csv is not JSONL: line 1 does not start with "{"`)
	assert.Equal(t, 1, strings.Count(errOut, "skynet eval --data ../../testdata/dataset/tickets.csv"), errOut)
	assert.Empty(t, out, "no result written")
	outPath := filepath.Join(t.TempDir(), "results.jsonl")
	code, out, errOut = skynet("score", "--metric", example+"metric.py", "--data", datasetDir+"tickets.csv", "--out", outPath)
	assert.Equal(t, exitUsage, code, errOut)
	assert.Contains(t, errOut, "is not JSONL")
	assert.Empty(t, out)
	assert.NoFileExists(t, outPath)

	// Standard input cannot be looked at first: every line still gets its
	// result, the hint comes at once, and since none was a case, the run
	// exits 2, not 0 with a mean of 0 (the built binary, to give it stdin).
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

// A missing metric, program or data file is a file error, exit 2 at once,
// for every command, naming the flag.
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
		{[]string{"score", "--metric", example + "metric.py", "--data", "no/such/cases.jsonl"}, "skynet score: --data no/such/cases.jsonl: no such file"},
		{[]string{"check", "--metric", example + "metric.py", "--data", "no/such/cases.jsonl"}, "skynet check: --data no/such/cases.jsonl: no such file"},
		{[]string{"eval", "--metric", example + "metric.py", "--program", prog, "--artifact", art, "--data", "no/dataset"}, "skynet eval: --data no/dataset: no such file or directory"},
	} {
		t.Run(strings.Join(tc.args[:3], " "), func(t *testing.T) {
			code, out, errOut := skynet(tc.args...)
			assert.Equal(t, exitUsage, code, errOut)
			assert.Contains(t, errOut, tc.says)
			assert.Empty(t, out, "nothing is scored")
		})
	}
}

// The summary's first line says how many cases have a score and how many
// failed: "scored 3 case(s)" for 3 that all failed read as 3 scores.
func TestSummarySaysScoredAndFailed(t *testing.T) {
	dir := t.TempDir()
	raises := writeFile(t, dir, "raises.py", "def score(input, output, expected=None):\n    if output != 'ok':\n        raise ValueError('no')\n    return 1.0, {'feedback': 'ok'}\n")
	code, _, errOut := skynet("score", "--metric", raises, "--data", writeFile(t, dir, "cases.jsonl", casesText(3, "x")))
	assert.Equal(t, exitCheck, code, errOut)
	assert.Regexp(t, `(?m)^scored 0 of 3 case\(s\) in [0-9.]+s \([0-9]+ cases/s\); 3 failed$`, errOut)
	assert.NotContains(t, errOut, "scored 3 case(s)")

	mixed := writeFile(t, dir, "mixed.jsonl", casesText(3, "x")+`{"id": "good", "input": {}, "output": "ok"}`+"\n")
	code, _, errOut = skynet("score", "--metric", raises, "--data", mixed)
	assert.Equal(t, exitOK, code, errOut)
	assert.Regexp(t, `(?m)^scored 1 of 4 case\(s\) in .*; 3 failed$`, errOut)

	code, _, errOut = skynet("score", "--metric", example+"metric.py", "--data", example+"cases.jsonl")
	assert.Equal(t, exitOK, code, errOut)
	assert.Regexp(t, `(?m)^scored 6 case\(s\) in [0-9.]+s \([0-9]+ cases/s\)$`, errOut, "none failed: the count alone")
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

// Defects a newcomer met in eval's datasets and score's inputs (issue 18).

const keywordsProgram = "../../testdata/programs/keywords.py"

// evalLines runs skynet eval and reads its results with the output run gave.
func evalLines(t *testing.T, args ...string) (code int, lines []evalLine, errOut string) {
	t.Helper()
	code, out, errOut := skynet(append([]string{"eval", "--metric", example + "metric.py", "--program", keywordsProgram,
		"--artifact", datasetDir + "keywords.txt"}, args...)...)
	if strings.TrimSpace(out) == "" {
		return code, nil, errOut
	}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var r evalLine
		require.NoError(t, json.Unmarshal([]byte(l), &r), l)
		lines = append(lines, r)
	}
	return code, lines, errOut
}

type evalLine struct {
	ID     string      `json:"id"`
	Output any         `json:"output"`
	Error  *errorField `json:"error"`
}

// A UTF-8 byte order mark at the start of a dataset is skipped (as score
// skips it in a case file) and CRLF line endings read: the first CSV column
// was "\ufeffid", so the ids were lost and a "\ufeffid" column reached run;
// a JSONL dataset's first row was bad JSON. CSV and JSONL, files and a
// split directory's.
func TestEvalDatasetBOMAndCRLF(t *testing.T) {
	dir := t.TempDir()
	echo := writeFile(t, dir, "echo.py", "def run(artifact, input):\n    return ','.join(sorted(input))\n")
	const bom = "\ufeff"
	csvText := bom + "id,message,label,split\r\nb1,charged twice,billing,val\r\nb2,\"it crashes\r\nevery time\",bug,val\r\n"
	jsonlText := bom + `{"id": "b1", "message": "charged twice", "label": "billing", "split": "val"}` + "\r\n" +
		`{"id": "b2", "message": "it crashes", "label": "bug", "split": "val"}` + "\r\n"
	require.NoError(t, os.Mkdir(dir+"/splits", 0o755))
	writeFile(t, dir, "splits/val.csv", csvText)
	writeFile(t, dir, "splits/test.jsonl", jsonlText)
	for _, tc := range []struct{ name, data, split string }{
		{"csv", writeFile(t, dir, "data.csv", csvText), ""},
		{"jsonl", writeFile(t, dir, "data.jsonl", jsonlText), "val"},
		{"split dir csv", dir + "/splits", "val"},
		{"split dir jsonl", dir + "/splits", "test"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"--data", tc.data, "--outputs", "label"}
			if tc.split != "" {
				args = append(args, "--split", tc.split)
			}
			code, lines, errOut := evalLines(t, args...)
			require.Equal(t, exitOK, code, errOut)
			require.Len(t, lines, 2, errOut)
			for i, r := range lines {
				assert.Equal(t, []string{"b1", "b2"}[i], r.ID)
				assert.Nil(t, r.Error)
			}
			code, lines, errOut = skynetEvalWith(t, echo, args...)
			require.Equal(t, exitOK, code, errOut)
			assert.Equal(t, "message", lines[0].Output, "run is given the message column only: no \\ufeffid, no split")
		})
	}
}

func skynetEvalWith(t *testing.T, program string, args ...string) (int, []evalLine, string) {
	t.Helper()
	code, out, errOut := skynet(append([]string{"eval", "--metric", example + "metric.py", "--program", program,
		"--artifact", datasetDir + "keywords.txt"}, args...)...)
	var lines []evalLine
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var r evalLine
		if json.Unmarshal([]byte(l), &r) == nil {
			lines = append(lines, r)
		}
	}
	return code, lines, errOut
}

// --split that no row has (or a file without a split column) is a usage
// error naming the file and the splits there are, not "scored 0 case(s)";
// a split directory lists the split files it holds; splits are
// case-sensitive, and the error says which one was meant.
func TestEvalSplitSelectsNothing(t *testing.T) {
	dir := t.TempDir()
	data := writeFile(t, dir, "data.csv", "id,message,label,split\nc1,charged twice,billing,train\nc2,crash,bug,val\n")
	nosplit := writeFile(t, dir, "nosplit.csv", "id,message,label\nc1,charged twice,billing\n")
	require.NoError(t, os.Mkdir(dir+"/splits", 0o755))
	writeFile(t, dir, "splits/train.jsonl", `{"id": "d1", "message": "m", "label": "billing"}`+"\n")
	writeFile(t, dir, "splits/val.jsonl", `{"id": "d2", "message": "m", "label": "billing"}`+"\n")
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"--data", data, "--split", "test"}, "skynet eval: --split test: no row of " + data + ` has split "test" (its splits: train, val)` + "\n"},
		{[]string{"--data", data, "--split", "Val"}, `(its splits: train, val); splits are case-sensitive: did you mean "val"?`},
		{[]string{"--data", nosplit, "--split", "val"}, "skynet eval: --split val: " + nosplit + ` has no "split" column` + "\n"},
		{[]string{"--data", dir + "/splits", "--split", "nope"}, `no file for split "nope" (its splits: train, val)` + "\n"},
		{[]string{"--data", dir + "/splits", "--split", "TRAIN"}, `did you mean "train"?`},
		{[]string{"--data", dir + "/splits"}, "choose one (--split train|val)\n"},
	} {
		code, lines, errOut := evalLines(t, append(tc.args, "--outputs", "label")...)
		assert.Equal(t, exitUsage, code, errOut)
		assert.Contains(t, errOut, tc.says)
		assert.NotContains(t, errOut, "scored 0")
		assert.Empty(t, lines)
	}
	code, lines, errOut := evalLines(t, "--data", data, "--split", "val", "--outputs", "label")
	assert.Equal(t, exitOK, code, errOut)
	require.Len(t, lines, 1)
	assert.Equal(t, "c2", lines[0].ID)
}

// An empty input (nothing, only blank lines, an empty standard input, an
// empty dataset) has no cases: exit 2 naming it, as skynet check does; not
// exit 0 "scored 0 case(s)". A shard that happens to hold none of a file's
// cases, or a resumed run whose cases are all done, had cases: exit 0.
func TestEmptyInputHasNoCases(t *testing.T) {
	dir := t.TempDir()
	for name, text := range map[string]string{"empty.jsonl": "", "blank.jsonl": "\n  \r\n\t\n", "bom.jsonl": "\ufeff\n"} {
		data := writeFile(t, dir, name, text)
		code, out, errOut := skynet("score", "--metric", example+"metric.py", "--data", data)
		assert.Equal(t, exitUsage, code, errOut)
		assert.Contains(t, errOut, "skynet score: "+data+" has no cases")
		assert.NotContains(t, errOut, "scored 0")
		assert.Empty(t, out)
		code, _, errOut = skynet("check", "--metric", example+"metric.py", "--data", data)
		assert.Equal(t, exitUsage, code, errOut)
	}
	code, results, errOut, _ := runCLI(t, []byte("\n\n"), "score", "--metric", example+"metric.py", "--data", "-")
	assert.Equal(t, exitUsage, code, errOut)
	assert.Contains(t, errOut, "skynet score: standard input has no cases")
	assert.NotContains(t, errOut, "scored 0")
	assert.Empty(t, results)
	code, results, errOut, _ = runCLI(t, []byte{}, "score", "--metric", example+"metric.py", "--data", "-")
	assert.Equal(t, exitUsage, code, errOut)
	assert.Empty(t, results)

	for name, text := range map[string]string{"empty.csv": "", "header.csv": "id,message,label\n", "empty.jsonl": ""} {
		data := writeFile(t, dir, "ds-"+name, text)
		code, _, errOut := evalLines(t, "--data", data, "--outputs", "label")
		assert.Equal(t, exitUsage, code, errOut)
		assert.Contains(t, errOut, "skynet eval: dataset "+data+" has no cases")
	}

	// One case: one of two shards holds none of it, and exits 0.
	good := writeFile(t, dir, "good.jsonl", `{"id": "g", "input": {}, "output": "x", "expected": {"label": "x"}}`+"\n")
	for _, shard := range []string{"0/2", "1/2"} {
		code, summary, errOut := skynet("score", "--metric", example+"metric.py", "--data", good, "--shard", shard)
		assert.Equal(t, exitOK, code, "shard %s: %s%s", shard, summary, errOut)
		assert.NotContains(t, errOut, "no cases")
	}
	// Every case done already: resuming scores nothing, and exits 0.
	out := dir + "/results.jsonl"
	code, _, errOut = skynet("score", "--metric", example+"metric.py", "--data", good, "--out", out)
	require.Equal(t, exitOK, code, errOut)
	code, summary, errOut := skynet("score", "--metric", example+"metric.py", "--data", good, "--out", out, "--resume")
	assert.Equal(t, exitOK, code, errOut)
	assert.Contains(t, summary, "resumed: 1 case(s) were already done")
	code, summary, errOut = skynet("eval", "--metric", example+"metric.py", "--program", keywordsProgram, "--artifact", datasetDir+"keywords.txt",
		"--data", datasetDir+"tickets.csv", "--outputs", "label", "--shard", "0/50")
	assert.Equal(t, exitOK, code, "an eval shard without cases: %s%s", summary, errOut)
}

// skynet score points to skynet eval only when the lines look like dataset
// rows (JSON objects of columns, or CSV); lines that fail for another
// reason (too long for --max-line-bytes, not UTF-8) say only that no line
// is a case. A character in a JSON error is shown as itself (U+00A0), not
// as its first byte read as Latin-1 ('Â').
func TestScoreEvalHintOnlyForDatasetRows(t *testing.T) {
	dir := t.TempDir()
	notUTF8 := writeFile(t, dir, "latin1.jsonl", "{\"id\": \"a\", \"input\": {}, \"output\": \"caf\xe9\"}\n{\"id\": \"b\", \"input\": {}, \"output\": \"\xff\"}\n")
	nbsp := writeFile(t, dir, "nbsp.jsonl", "\u00a0\n")
	for _, tc := range []struct {
		data  string
		extra []string
	}{
		{example + "cases.jsonl", []string{"--max-line-bytes", "10"}},
		{notUTF8, nil},
		{nbsp, nil},
	} {
		code, out, errOut := skynet(append([]string{"score", "--metric", example + "metric.py", "--data", tc.data}, tc.extra...)...)
		assert.Equal(t, exitUsage, code, errOut)
		assert.Contains(t, errOut, "skynet score: no line of "+tc.data+" is a case (see the input errors in the results): the metric was not called\n")
		assert.NotContains(t, errOut, "skynet eval", "%s is no dataset", tc.data)
		assert.NotContains(t, out, "Â")
		if tc.data == nbsp {
			assert.Contains(t, out, "unexpected U+00A0")
		}
	}
	// Dataset rows still get the hint, once.
	rows := writeFile(t, dir, "rows.jsonl", `{"id": "r1", "message": "hi", "label": "x"}`+"\n")
	code, _, errOut := skynet("score", "--metric", example+"metric.py", "--data", rows)
	assert.Equal(t, exitUsage, code, errOut)
	assert.Equal(t, 1, strings.Count(errOut, "use skynet eval --data "+rows), errOut)
}

// --data - (standard input) is for skynet score; check, eval and bench say
// so, exit 2, instead of "open -: no such file or directory".
func TestStdinDataIsForScoreOnly(t *testing.T) {
	for _, args := range [][]string{
		{"check", "--metric", example + "metric.py", "--data", "-"},
		{"eval", "--metric", example + "metric.py", "--program", keywordsProgram, "--artifact", datasetDir + "keywords.txt", "--data", "-"},
		{"bench", "--metric", example + "metric.py", "--data", "-"},
	} {
		code, out, errOut := skynet(args...)
		assert.Equal(t, exitUsage, code, errOut)
		assert.Equal(t, "skynet "+args[0]+": --data -: standard input is read by skynet score only; give a file\n", errOut)
		assert.Empty(t, out)
	}
}

// A CSV row with fewer cells than the header keeps its id (it was given
// its line number) and its error names the columns without a value.
func TestEvalShortCSVRowKeepsID(t *testing.T) {
	data := writeFile(t, t.TempDir(), "short.csv", "id,message,label\nz1,charged twice,billing\nz2,short\n")
	code, lines, errOut := evalLines(t, "--data", data, "--outputs", "label")
	assert.Equal(t, exitOK, code, errOut)
	require.Len(t, lines, 2)
	assert.Equal(t, "z2", lines[1].ID)
	require.NotNil(t, lines[1].Error)
	assert.Equal(t, "input", string(lines[1].Error.Kind))
	assert.Equal(t, data+`:3: 2 fields, the header has 3: no value for "label"`, lines[1].Error.Message)
}

// skynet score --data DIR is refused at once (exit 2), before any summary;
// it printed "scored 0 case(s)", then "read .: is a directory".
func TestScoreDataDirectoryRefused(t *testing.T) {
	for _, cmd := range []string{"score", "check"} {
		code, out, errOut := skynet(cmd, "--metric", example+"metric.py", "--data", example)
		assert.Equal(t, exitUsage, code, errOut)
		assert.Equal(t, "skynet "+cmd+": --data "+example+" is a directory, not a case file (a directory of split files is a dataset: skynet eval reads it)\n", errOut)
		assert.Empty(t, out)
	}
}

// After --resume the run's own mean covers only what it scored; the summary
// also gives the mean of the whole results file, kept results included.
func TestResumeSummaryCoversTheWholeFile(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "results.jsonl")
	code, summary, errOut := skynet("score", "--metric", example+"metric.py", "--data", example+"cases.jsonl", "--out", out)
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, summary, "mean score: 0.6667")
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	first := strings.SplitAfter(string(b), "\n")[1] // t2, the one that scored 0
	require.Contains(t, first, `"id":"t2"`)
	require.NoError(t, os.WriteFile(out, []byte(first), 0o644))

	code, summary, errOut = skynet("score", "--metric", example+"metric.py", "--data", example+"cases.jsonl", "--out", out, "--resume")
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, summary, "scored 5 case(s)")
	assert.Contains(t, summary, "mean score: 0.8000", "the run's own: 4 of the 5 it scored")
	assert.Contains(t, summary, "resumed: 1 case(s) were already done and kept\nall 6 result(s), kept and new: mean score 0.6667 (failed cases count as 0)\n")

	// Everything already done: nothing scored, the file's mean all the same.
	code, summary, errOut = skynet("score", "--metric", example+"metric.py", "--data", example+"cases.jsonl", "--out", out, "--resume")
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, summary, "scored 0 case(s)")
	assert.Contains(t, summary, "all 6 result(s), kept and new: mean score 0.6667")
}

// A program that ends the Python process in eval is not blamed on the
// metric alone, and the crash names its case, as the engine's messages do.
func TestEvalCrashInRunNamesTheProgram(t *testing.T) {
	dir := t.TempDir()
	prog := writeFile(t, dir, "program.py", "import os\ndef run(artifact, input):\n    if input['message'] == 'boom':\n        os._exit(9)\n    return 'x'\n")
	data := writeFile(t, dir, "data.csv", "id,message,label\na,fine,x\nb,boom,x\nc,fine,x\n")
	code, out, errOut := skynet("eval", "--metric", example+"metric.py", "--program", prog, "--artifact", datasetDir+"keywords.txt",
		"--data", data, "--outputs", "label")
	assert.Equal(t, exitCheck, code, errOut)
	lines := resultLines(t, out)
	require.Len(t, lines, 3)
	require.NotNil(t, lines[1].Error)
	assert.Equal(t, "crash", string(lines[1].Error.Kind))
	assert.Equal(t, "case b: the program or the metric ended the Python process (exit code 9) while running and scoring this case alone", lines[1].Error.Message)
	assert.Nil(t, lines[0].Error)
	assert.Nil(t, lines[2].Error)
}

// Defects a newcomer met in merge, eval's columns and case lines.

// A column named in --outputs or --inputs that no row has is exit 2 at
// once, naming the dataset's columns and the one meant; every row got the
// same input error and the run ended "the metric was not called".
func TestEvalColumnNoRowHas(t *testing.T) {
	data := datasetDir + "tickets.csv"
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"--outputs", "labl"}, "skynet eval: --outputs labl: no row of " + data + ` has a column "labl" (its columns: id, message, label, split); did you mean "label"?` + "\n"},
		{[]string{"--outputs", "label", "--inputs", "message,nosuch"}, "skynet eval: --inputs message,nosuch: no row of " + data + ` has a column "nosuch" (its columns: id, message, label, split)` + "\n"},
		{[]string{"--outputs", "Label"}, `did you mean "label"?`},
	} {
		code, lines, errOut := evalLines(t, append([]string{"--data", data}, tc.args...)...)
		assert.Equal(t, exitUsage, code, errOut)
		assert.Contains(t, errOut, tc.says)
		assert.NotContains(t, errOut, "scored")
		assert.NotContains(t, errOut, "missing output column")
		assert.Empty(t, lines)
	}
}

// evalParts runs skynet eval on data in n shards (with --split, when not
// ""), and returns the parts' paths.
func evalParts(t *testing.T, dir, data, split string, n int) []string {
	t.Helper()
	var parts []string
	for k := 0; k < n; k++ {
		part := filepath.Join(dir, fmt.Sprintf("res-%d.jsonl", k))
		args := []string{"--data", data, "--outputs", "label", "--out", part, "--shard", fmt.Sprintf("%d/%d", k, n)}
		if split != "" {
			args = append(args, "--split", split)
		}
		code, _, errOut := skynet(append([]string{"eval", "--metric", example + "metric.py", "--program", keywordsProgram,
			"--artifact", datasetDir + "keywords.txt"}, args...)...)
		require.Equal(t, exitOK, code, errOut)
		parts = append(parts, part)
	}
	return parts
}

// merge --data DATASET without --eval read a CSV (or a directory, or a
// JSONL dataset's rows) as a case file, and reported results "for cases
// not in" the dataset and cases "without a result" that were neither: it
// is a usage error that says to pass --eval.
func TestMergeDatasetNeedsEval(t *testing.T) {
	dir := t.TempDir()
	csv := datasetDir + "tickets.csv"
	parts := evalParts(t, dir, csv, "", 2)
	const hint = "is a dataset: pass --eval (and --split S if the shards ran with one)\n"
	for _, data := range []string{csv, datasetDir + "splits"} {
		code, out, errOut := skynet(append([]string{"merge", "--data", data}, parts...)...)
		assert.Equal(t, exitUsage, code, errOut)
		assert.Equal(t, "skynet merge: --data "+data+" "+hint, errOut)
		assert.Empty(t, out)
	}
	code, out, errOut := skynet(append([]string{"merge", "--eval", "--data", csv}, parts...)...)
	require.Equal(t, exitOK, code, errOut)
	assert.Len(t, resultLines(t, out), 5)

	// A JSONL dataset's rows start like cases; the ids not found tell.
	jsonl := datasetDir + "tickets.jsonl"
	parts = evalParts(t, t.TempDir(), jsonl, "val", 1)
	code, _, errOut = skynet(append([]string{"merge", "--data", jsonl}, parts...)...)
	assert.Equal(t, exitUsage, code, errOut)
	assert.Equal(t, "skynet merge: --data "+jsonl+" holds dataset rows, not cases: pass --eval (and --split S if the shards ran with one)\n", errOut)
}

// merge --eval without the --split the parts ran with said their split's
// cases were there and the others' missing ("run it again with
// --resume"); it says to pass --split. Missing cases of the parts' own
// split are still listed.
func TestMergeEvalNeedsSplit(t *testing.T) {
	dir := t.TempDir()
	csv := datasetDir + "tickets.csv"
	parts := evalParts(t, dir, csv, "val", 2)
	code, _, errOut := skynet(append([]string{"merge", "--eval", "--data", csv}, parts...)...)
	assert.Equal(t, exitCheck, code, errOut)
	assert.Equal(t, `skynet merge: the parts hold only split "val"'s cases: pass --split val`+"\n", errOut)
	code, out, errOut := skynet(append([]string{"merge", "--eval", "--split", "val", "--data", csv}, parts...)...)
	require.Equal(t, exitOK, code, errOut)
	assert.Len(t, resultLines(t, out), 2)

	// One of val's two cases without a result: that is a missing shard.
	one := writeFile(t, dir, "one.jsonl", "")
	for _, p := range parts {
		if b, err := os.ReadFile(p); err == nil && len(b) > 0 {
			require.NoError(t, os.WriteFile(one, []byte(strings.SplitAfter(string(b), "\n")[0]), 0o644))
			break
		}
	}
	code, _, errOut = skynet("merge", "--eval", "--data", csv, one)
	assert.Equal(t, exitCheck, code, errOut)
	assert.NotContains(t, errOut, "pass --split")
	assert.Contains(t, errOut, "case(s) without a result")
}

// The same part named twice (or through a link) is refused up front: each
// of its results read as a case with two results, "in res-1.jsonl:1 and
// res-1.jsonl:1".
func TestMergePartNamedTwice(t *testing.T) {
	dir := t.TempDir()
	csv := datasetDir + "tickets.csv"
	parts := evalParts(t, dir, csv, "", 2)
	code, _, errOut := skynet("merge", "--eval", "--data", csv, parts[0], parts[1], parts[1])
	assert.Equal(t, exitUsage, code, errOut)
	assert.Equal(t, "skynet merge: the part "+parts[1]+" is named twice: name each part once\n", errOut)
	link := filepath.Join(dir, "link.jsonl")
	require.NoError(t, os.Symlink(parts[0], link))
	code, _, errOut = skynet("merge", "--eval", "--data", csv, parts[0], parts[1], link)
	assert.Equal(t, exitUsage, code, errOut)
	assert.Equal(t, "skynet merge: the parts "+parts[0]+" and "+link+" are the same file: name each part once\n", errOut)
	assert.NotContains(t, errOut, "two results")
}

// A results line's "scores" are in the order the metric returned them
// (they came back alphabetical); the summary's means stay sorted by name.
func TestResultsKeepTheMetricsScoreOrder(t *testing.T) {
	dir := t.TempDir()
	metric := writeFile(t, dir, "metric.py", `
def score(input, output, expected=None):
    side = {"feedback": "ok", "scores": {"zeta": 1.0, "alpha": 0.5, "mid": 0.25}}
    if input["n"] == 2:
        side["note"] = "another key: the general path"
    return 1.0, side
`)
	code, out, errOut := skynet("score", "--metric", metric, "--data", writeFile(t, dir, "cases.jsonl", casesText(2, "x")))
	require.Equal(t, exitOK, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 2)
	for _, l := range lines {
		assert.Contains(t, l, `"scores":{"zeta":1,"alpha":0.5,"mid":0.25}`)
	}
	assert.Contains(t, errOut, "named scores: alpha 0.5000 [0.5000, 0.5000] (2), mid 0.2500 [0.2500, 0.2500] (2), zeta 1.0000 [1.0000, 1.0000] (2)")
}

// A line that is not UTF-8, or longer than --max-line-bytes, is an input
// error named by the id read from it before the problem, and the message
// says where the bad byte is, or which flag raises the cap.
func TestBadLineIDsAndMessages(t *testing.T) {
	dir := t.TempDir()
	data := writeFile(t, dir, "cases.jsonl", `{"id": "a", "input": {}, "output": "x", "expected": {"label": "x"}}`+"\n"+
		`{"id": "latin", "input": {"m": "caf`+"\xe9"+`"}, "output": "x", "expected": {"label": "x"}}`+"\n"+
		`{"id": "long", "input": {"m": "`+strings.Repeat("x", 300)+`"}, "output": "x", "expected": {"label": "x"}}`+"\n"+
		`{"input": {"m": "`+strings.Repeat("x", 300)+`"}, "output": "x", "id": "late"}`+"\n")
	code, out, errOut := skynet("score", "--metric", example+"metric.py", "--data", data, "--max-line-bytes", "200")
	assert.Equal(t, exitOK, code, errOut)
	lines := resultLines(t, out)
	require.Len(t, lines, 4)
	assert.Equal(t, []string{"a", "latin", "long", "4"}, []string{lines[0].ID, lines[1].ID, lines[2].ID, lines[3].ID})
	require.NotNil(t, lines[1].Error)
	assert.Equal(t, "line 2: not valid UTF-8: byte 0xE9 at byte 36 of the line (a file saved in another encoding, such as Latin-1 or UTF-16? iconv -f LATIN1 -t UTF-8 converts one)", lines[1].Error.Message)
	for _, r := range lines[2:] {
		require.NotNil(t, r.Error)
		assert.Contains(t, r.Error.Message, "longer than 200 bytes, the case-line limit (--max-line-bytes raises it)")
	}
}

// eval without --outputs gives every case expected None: it says so at the
// start, and when cases raise, points to --outputs with the dataset's
// columns, since a TypeError about None says nothing of the flag.
func TestEvalWithoutOutputs(t *testing.T) {
	code, out, errOut := skynet("eval", "--program", "../../testdata/programs/keywords.py", "--artifact", datasetDir+"keywords.txt",
		"--metric", example+"metric.py", "--data", datasetDir+"tickets.csv")
	assert.Equal(t, exitCheck, code, errOut)
	assert.Contains(t, errOut, "skynet eval: note: no --outputs, so every case's expected is None")
	assert.Regexp(t, `skynet eval: \d+ case\(s\) raised, and no --outputs was given \(expected is None\): name the columns that hold the answers with --outputs, e\.g\. --outputs label \(the dataset's columns: message, label\)`, errOut)
	for _, r := range resultLines(t, out) {
		require.NotNil(t, r.Error)
		assert.Contains(t, r.Error.Message, "TypeError")
	}
}
