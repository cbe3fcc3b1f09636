package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skynetml/skynet/caseio"
	"github.com/skynetml/skynet/cpython"
	"github.com/skynetml/skynet/engine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const example = "../../testdata/exact_match/"

func skynet(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = run(args, &o, &e)
	return code, o.String(), e.String()
}

// resultLine and errorField are a results line as the tests read it back.
type (
	resultLine = caseio.ResultLine
	errorField = caseio.ErrorField
)

func resultLines(t *testing.T, out string) []resultLine { return jsonLines[resultLine](t, out) }

// resultFile reads a results file's lines.
func resultFile(t *testing.T, path string) []resultLine { return jsonFile[resultLine](t, path) }

// jsonLines decodes each line of a JSONL text as a T.
func jsonLines[T any](t *testing.T, text string) []T {
	t.Helper()
	var rows []T
	for _, l := range strings.Split(strings.TrimSpace(text), "\n") {
		var r T
		require.NoError(t, json.Unmarshal([]byte(l), &r), l)
		rows = append(rows, r)
	}
	return rows
}

// jsonFile decodes each line of a JSONL file as a T.
func jsonFile[T any](t *testing.T, path string) []T {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return jsonLines[T](t, string(b))
}

func TestScoreExample(t *testing.T) {
	code, out, errOut := skynet("score", "--metric", example+"metric.py", "--data", example+"cases.jsonl")
	require.Equal(t, exitOK, code, errOut)
	lines := resultLines(t, out)
	require.Len(t, lines, 6)
	var ids []string
	for _, l := range lines {
		ids = append(ids, l.ID)
		assert.Nil(t, l.Error)
	}
	assert.Equal(t, []string{"t1", "t2", "t3", "t4", "t5", "t6"}, ids, "results in input order")
	assert.Equal(t, "Expected 'bug', got 'other'.", lines[1].Feedback)
	assert.Contains(t, errOut, "scored 6 case(s)")
	assert.Contains(t, errOut, "mean score: 0.6667 (95% interval 0.1247 to 1.2086; standard error 0.2108; failed cases count as 0)")
	assert.Contains(t, errOut, "errors: none")
}

func TestScoreNamedScoresSummary(t *testing.T) {
	dir := "../../testdata/json_fields/"
	code, _, errOut := skynet("score", "--metric", dir+"metric.py", "--data", dir+"cases.jsonl")
	require.Equal(t, exitOK, code)
	assert.Contains(t, errOut, "named scores: fields 0.6250 [-0.1367, 1.3867] (4), format 0.7500 [-0.0456, 1.5456] (4)")
}

func TestScoreBadLinesAreResults(t *testing.T) {
	out := filepath.Join(t.TempDir(), "results.jsonl")
	code, summary, errOut := skynet("score", "--metric", example+"metric.py", "--data", example+"bad_lines.jsonl", "--out", out)
	require.Equal(t, exitOK, code, errOut)
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	lines := resultLines(t, string(b))
	require.Len(t, lines, 7, "one result per non-blank line")
	got := map[string]string{}
	for _, l := range lines {
		if l.Error != nil {
			got[l.ID] = string(l.Error.Kind) + ": " + l.Error.Message
		} else {
			got[l.ID] = "ok"
		}
	}
	assert.Equal(t, map[string]string{
		"ok1":     "ok",
		"broken":  "input: line 2: invalid JSON at byte 56: unexpected end of input, expected ',' or '}'", // its id, read before the line breaks off
		"noinput": `input: line 3: "input" is missing`,
		"5":       "input: line 5: a case must be a JSON object, got an array",
		"typo":    `input: line 6: unknown field "expexted" (a case has id, input, output, expected, observation)`,
		"strexp":  `input: line 7: "expected" must be an object of output columns or null, got a string`,
		"ok2":     "ok",
	}, got)
	assert.Contains(t, summary, "errors: 5 (input 5: broken, noinput, 5, ...)")
}

// One rule for a line that is not a case, in score and check alike: it is
// an input error of its case, never the end of the command. score writes
// it as the case's result and goes on; check says so (a note) and samples
// the next cases; both exit 0 when the metric passes. Only a file in
// which no line is a case is exit 2, for both.
func TestBrokenLineOneRule(t *testing.T) {
	dir := t.TempDir()
	data := writeFile(t, dir, "cases.jsonl", `{"id": "a", "input": {}, "output": "x", "expected": {"label": "x"}}`+"\n"+
		`{"id": "b", "input": {}, "output": "x", "expected": {"label": "x"}`+"\n"+
		`{"id": "c", "input": {}, "output": "y", "expected": {"label": "x"}}`+"\n")
	code, out, errOut := skynet("score", "--metric", example+"metric.py", "--data", data)
	require.Equal(t, exitOK, code, errOut)
	lines := resultLines(t, out)
	require.Len(t, lines, 3)
	require.NotNil(t, lines[1].Error)
	assert.Equal(t, "b", lines[1].ID)
	assert.Equal(t, engine.KindInput, lines[1].Error.Kind)

	code, out, errOut = skynet("check", "--metric", example+"metric.py", "--data", data)
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "ok      metric's return value: 2 sample case(s) returned valid (score, side info) pairs")
	assert.Contains(t, out, "note    case file: 1 line(s) read for the samples are not cases, so the samples are the next ones (skynet score gives each an \"input\" error result and goes on): line 2: invalid JSON")
	code, out, _ = skynet("check", "--metric", example+"metric.py", "--data", data, "--json")
	require.Equal(t, exitOK, code)
	var report struct {
		OK     bool           `json:"ok"`
		Checks []engine.Check `json:"checks"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &report))
	assert.True(t, report.OK)
	assert.Equal(t, "case file", report.Checks[len(report.Checks)-1].Name)

	none := writeFile(t, dir, "none.jsonl", "[1]\n{\"id\": \"z\", \"inp\n")
	code, _, errOut = skynet("score", "--metric", example+"metric.py", "--data", none)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "no line of "+none+" is a case")
	code, _, errOut = skynet("check", "--metric", example+"metric.py", "--data", none)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "skynet check: "+none+": no line is a case (line 1: a case must be a JSON object, got an array)")
}

func TestScoreMetricFailsToLoad(t *testing.T) {
	code, _, errOut := skynet("score", "--metric", "../../testdata/signature/one_arg.py", "--data", example+"cases.jsonl")
	assert.Equal(t, exitCheck, code)
	assert.Contains(t, errOut, `check "score signature" failed: found score(input): 1 required parameter(s)`)
}

func TestCheckExitCodes(t *testing.T) {
	code, out, _ := skynet("check", "--metric", example+"metric.py", "--data", example+"cases.jsonl")
	assert.Equal(t, exitOK, code)
	assert.Contains(t, out, "ok      metric's return value: 3 sample case(s) returned valid")

	code, out, _ = skynet("check", "--metric", "../../testdata/contract/no_feedback.py", "--data", example+"cases.jsonl", "--samples", "1", "--json")
	assert.Equal(t, exitCheck, code)
	var report struct {
		OK     bool `json:"ok"`
		Checks []struct {
			Name, Case, Message string
			OK                  bool
		} `json:"checks"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &report))
	assert.False(t, report.OK)
	require.Len(t, report.Checks, 3)
	assert.Equal(t, "metric's return value", report.Checks[2].Name)
	assert.Equal(t, "t1", report.Checks[2].Case)
	assert.Equal(t, `side info has no "feedback" string`, report.Checks[2].Message, "the case and rule are Case and Name, not repeated in the message")

	code, _, errOut := skynet("check", "--metric", example+"metric.py", "--data", "no/such/file.jsonl")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "no/such/file.jsonl")
	code, _, errOut = skynet("check", "--data", example+"cases.jsonl")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "--metric is required")
	code, _, _ = skynet("check", "--bogus")
	assert.Equal(t, exitUsage, code)
	code, out, errOut = skynet("check", "--metric", example+"metric.py", "--data", example+"bad_lines.jsonl")
	assert.Equal(t, exitOK, code, "a bad line is an input error of its case, in check as in score: %s", errOut)
	assert.Contains(t, out, "note    case file: 5 line(s) read for the samples are not cases")
	code, _, errOut = skynet("check", "--metric", "../../testdata/no/metric.py", "--data", example+"cases.jsonl")
	assert.Equal(t, exitUsage, code, "a missing metric file is a file error, as a missing data file is")
	assert.Contains(t, errOut, "skynet check: --metric ../../testdata/no/metric.py: no such file")
}

// TestResultStreamSurvivesStrayWrites runs the real binary: what a metric
// writes to fd 1 or prints must never reach the results on stdout.
func TestResultStreamSurvivesStrayWrites(t *testing.T) {
	bin := skynetBin(t)
	metric := filepath.Join(t.TempDir(), "metric.py")
	require.NoError(t, os.WriteFile(metric, []byte(`
import os, sys
print("imported")
def score(input, output, expected=None):
    print("print inside score")
    os.write(1, b"raw write to fd 1\n")
    sys.__stdout__.write("via sys.__stdout__\n")
    return 1.0, {"feedback": "ok"}
`), 0o644))
	cmd := exec.Command(bin, "score", "--metric", metric, "--data", example+"cases.jsonl")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), stderr.String())
	lines := resultLines(t, stdout.String())
	require.Len(t, lines, 6)
	assert.Equal(t, "print inside score\n", lines[0].Logs)
	assert.Contains(t, stderr.String(), "raw write to fd 1")
}

func TestScoreRewardExampleSummary(t *testing.T) {
	dir := "../../testdata/reward/"
	code, out, errOut := skynet("score", "--metric", dir+"metric.py", "--data", dir+"cases.jsonl")
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, errOut, "named scores: accuracy 0.8333 [0.4049, 1.2618] (6), cost 0.5278 [0.0661, 0.9894] (6), speed 0.5583 [0.1595, 0.9571] (6)")
	lines := resultLines(t, out)
	assert.Equal(t, "Correct. Run time and cost were not measured, so the speed and cost parts are 0.", lines[4].Feedback)
}

func TestCheckRewardSpec(t *testing.T) {
	code, out, _ := skynet("check", "--metric", "../../testdata/reward_spec/negative_weight.py", "--data", "../../testdata/reward/cases.jsonl")
	assert.Equal(t, exitCheck, code)
	assert.Contains(t, out, "FAILED  REWARD_SPEC: weights.speed must be >= 0, got -0.2\n")
}

func TestStub(t *testing.T) {
	dir := t.TempDir()
	code, _, _ := skynet("stub", dir)
	require.Equal(t, exitOK, code)
	b, err := os.ReadFile(filepath.Join(dir, "skynet.pyi"))
	require.NoError(t, err)
	assert.Contains(t, string(b), "def reward(spec")
}

// The seed's judge metric end to end from the CLI, against a fake
// OpenAI-compatible server on loopback.
func TestScoreJudgeAgainstFakeServer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		verdict := "FAIL. Wrong."
		if strings.Contains(string(body), "Answer: 4") || strings.Contains(string(body), "Answer: Yes") {
			verdict = "PASS. Right."
		}
		fmt.Fprintf(w, `{"choices": [{"message": {"content": %q}}], "usage": {"prompt_tokens": 100, "completion_tokens": 10}}`, verdict)
	}))
	defer srv.Close()
	prices := filepath.Join(t.TempDir(), "prices.json")
	require.NoError(t, os.WriteFile(prices, []byte(`{"openai/gpt-4o-mini": {"input_per_mtok": 0.15, "output_per_mtok": 0.6}}`), 0o644))
	dir := "../../testdata/judge/"
	code, out, errOut := skynet("score", "--metric", dir+"metric.py", "--data", dir+"cases.jsonl",
		"--reflection-model", "openai/gpt-4o-mini", "--llm-base-url", srv.URL+"/v1", "--prices", prices)
	require.Equal(t, exitOK, code, errOut)
	lines := resultLines(t, out)
	require.Len(t, lines, 3)
	assert.Equal(t, []float64{1, 0, 1}, []float64{lines[0].Score, lines[1].Score, lines[2].Score})
	assert.Equal(t, "FAIL. Wrong.", lines[1].Feedback)
	assert.Contains(t, errOut, "metric model openai/gpt-4o-mini: 3 call(s), 0 failed, 0 retries, 0 cache hit(s), 300 input + 30 output tokens, cost $0.000063")

	code, _, errOut = skynet("score", "--metric", dir+"metric.py", "--data", dir+"cases.jsonl", "--prices", "no/such.json")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "price file")
}

func TestEvalKeywordsProgram(t *testing.T) {
	code, out, errOut := skynet("eval", "--program", "../../testdata/programs/keywords.py",
		"--artifact", "../../testdata/dataset/keywords.txt", "--metric", "../../testdata/reward/metric.py",
		"--data", "../../testdata/dataset/tickets.csv", "--outputs", "label", "--inputs", "message")
	require.Equal(t, exitOK, code, errOut)
	type evalLine struct {
		Output      any            `json:"output"`
		Observation map[string]any `json:"observation"`
		Error       *errorField    `json:"error"`
	}
	var lines []evalLine
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var r evalLine
		require.NoError(t, json.Unmarshal([]byte(l), &r), l)
		lines = append(lines, r)
	}
	require.Len(t, lines, 5)
	var outputs []any
	for _, l := range lines {
		outputs = append(outputs, l.Output)
		assert.Nil(t, l.Error)
		assert.NotNil(t, l.Observation["run_ms"], "run time is measured")
		assert.Equal(t, 0.0, l.Observation["cost_usd"], "no model calls: cost 0")
	}
	assert.Equal(t, []any{"billing", "bug", "account", "billing", "other"}, outputs)
	assert.Contains(t, errOut, "scored 5 case(s)")
	assert.Contains(t, errOut, "run time: p50 ")
	assert.Contains(t, errOut, "named scores: accuracy 0.8000 [0.2447, 1.3553] (5)")

	code, _, errOut = skynet("eval", "--program", "../../testdata/programs/keywords.py",
		"--artifact", "../../testdata/dataset/keywords.txt", "--metric", "../../testdata/reward/metric.py",
		"--data", "../../testdata/dataset/splits", "--outputs", "label")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "choose one (--split train|val|test)")
}

// TestBenchReport runs a small `skynet bench` as its own process (with
// --file it runs `skynet score` on itself): every path runs, each subprocess
// baseline checked score for score against the engine inside the command,
// and the JSON report has the shape the issue names.
func TestBenchReport(t *testing.T) {
	big := filepath.Join(t.TempDir(), "big.jsonl")
	data, err := os.ReadFile(example + "cases.jsonl")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(big, uniqueIDs(t, data, 20), 0o644))
	rep := benchJSON(t, "--metric", example+"metric.py", "--cases", "300", "--runs", "1",
		"--per-process-cases", "2", "--file", big)
	assert.Equal(t, 300, rep.Cases)
	paths := []string{"engine", "python_loop", "python_loop_shared", "subprocess_lockstep",
		"subprocess_pipelined", "subprocess_per_case", "skynet_score_file", "python_script_file"}
	if rep.Processes > 1 {
		paths = append(paths, "skynet_score_file_1", "python_pool_file")
	}
	for _, k := range paths {
		assert.Greater(t, rep.NSPerCase[k], 0.0, k)
	}
	assert.Len(t, rep.NSPerCase, len(paths))
	for _, bar := range benchBars {
		if rep.Processes == 1 && (bar.name == "processes_speedup" || bar.name == "python_pool_vs_skynet_score") {
			assert.NotContains(t, rep.Ratios, bar.name, "one process: nothing to compare")
			continue
		}
		assert.Contains(t, rep.Ratios, bar.name)
		// The per-case bars are for a trivial metric: on a loaded machine
		// the example's loop can take longer than that, and then the
		// report says why the bar has no verdict instead of giving one.
		if perCaseBar(bar.name) && rep.NSPerCase["python_loop"] > trivialMetricNS {
			assert.NotContains(t, rep.Bars, bar.name)
			assert.Contains(t, rep.NoBar[bar.name], "for a trivial metric", bar.name)
			continue
		}
		assert.Contains(t, rep.Bars, bar.name)
		assert.NotContains(t, rep.NoBar, bar.name)
	}
	assert.NotEmpty(t, rep.Python)
	for _, k := range []string{"skynet_score_file", "python_script_file"} {
		assert.Greater(t, rep.PeakRSSMB[k], 1.0, "peak RSS of %s", k)
	}
	assert.InDelta(t, rep.NSPerCase["engine"]/rep.NSPerCase["python_loop"], rep.Ratios["engine_vs_python_loop"], 1e-9)
	if _, ok := coreRoundTrip(); ok { // this machine can measure it, so the command did too
		require.Len(t, rep.CoreRoundTripNS, rep.Runs)
		assert.Greater(t, rep.CoreRoundTripNS[0], 0.0)
	}
}

// The CPU-heavy comparison: file paths only, every one checked score for
// score against the first inside the command.
func TestBenchFileOnly(t *testing.T) {
	rep := benchJSON(t, "--metric", "../../testdata/difflib/metric.py", "--runs", "1",
		"--file", "../../testdata/difflib/cases.jsonl", "--file-only", "--processes", "1")
	assert.Equal(t, 1, rep.Processes)
	assert.ElementsMatch(t, []string{"skynet_score_file", "python_script_file"}, slices.Collect(maps.Keys(rep.NSPerCase)))
	assert.ElementsMatch(t, []string{"python_script_vs_skynet_score", "python_script_vs_skynet_score_1", "skynet_score_cpu_vs_python_script"}, slices.Collect(maps.Keys(rep.Ratios)))
	for _, k := range []string{"skynet_score_file", "python_script_file"} {
		assert.Greater(t, rep.CPUNSPerCase[k], 0.0, "CPU of %s", k)
		assert.Len(t, rep.CPUSamples[k], 1, "CPU of %s, every run", k)
	}
	assert.InDelta(t, rep.CPUNSPerCase["skynet_score_file"]/rep.CPUNSPerCase["python_script_file"], rep.Ratios["skynet_score_cpu_vs_python_script"], 1e-9)
	code, _, errOut := skynet("bench", "--metric", "../../testdata/difflib/metric.py", "--file-only")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "--file-only needs --file")
}

// benchJSON runs `skynet bench ARGS --json` as its own process and decodes its report.
func benchJSON(t *testing.T, args ...string) benchReport {
	t.Helper()
	cmd := exec.Command(skynetBin(t), append(append([]string{"bench"}, args...), "--json")...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, stderr.String())
	var rep benchReport
	require.NoError(t, json.Unmarshal(out, &rep), string(out))
	return rep
}

// TestProcessesFlag: --processes takes "auto" or a count; the old names
// --interpreters and --workers still work, each with a note.
func TestProcessesFlag(t *testing.T) {
	code, _, errOut := skynet("score", "--metric", example+"metric.py", "--data", example+"cases.jsonl", "--processes", "0")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, `skynet score: --processes 0: want "auto" or a count from 1 to 256`)
	code, out, errOut := skynet("score", "--metric", example+"metric.py", "--data", example+"cases.jsonl", "--processes", "3")
	require.Equal(t, exitOK, code, errOut)
	assert.Len(t, resultLines(t, out), 6)
	assert.NotContains(t, errOut, "note:")

	code, out, errOut = skynet("score", "--metric", example+"metric.py", "--data", example+"cases.jsonl", "--interpreters", "2", "--workers", "2")
	require.Equal(t, exitOK, code, errOut)
	assert.Len(t, resultLines(t, out), 6)
	assert.Contains(t, errOut, "skynet score: note: --interpreters is now --processes")
	assert.Contains(t, errOut, "skynet score: note: --workers is now --threads")
}

// TestVersion checks that "skynet version" names the CPython the build
// chose: pkg-config's python3-embed in this environment (Debian's, or the
// PYTHON= one through build/pyenv.sh), and with SKYNET_PYTHON set, a
// libpython from that python's LIBDIR. The built binary must load it on its
// own (the rpath), so --version runs it as a separate process.
func TestVersion(t *testing.T) {
	mod, err := exec.Command("pkg-config", "--modversion", "python3-embed").Output()
	require.NoError(t, err)
	want := strings.TrimSpace(string(mod)) // "3.12"

	code, out, errOut := skynet("version")
	require.Equal(t, exitOK, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3, out)
	assert.Regexp(t, `^skynet \S+`, lines[0])
	assert.True(t, strings.HasPrefix(lines[1], "CPython "+want+"."), "%q should name CPython %s", lines[1], want)
	if cpython.StaticLibpython() {
		assert.Regexp(t, `^libpython: linked into the skynet binary \(built against Python\.h `+regexp.QuoteMeta(want)+`\.`, lines[2])
	} else {
		assert.Regexp(t, `^libpython: .*/libpython`+regexp.QuoteMeta(want)+`[^/]*\.so[^/]* \(built against Python\.h `+regexp.QuoteMeta(want)+`\.`, lines[2])
	}

	if python := os.Getenv("SKYNET_PYTHON"); python != "" && !cpython.StaticLibpython() {
		libdir, err := exec.Command(python, "-c", `import sysconfig; print(sysconfig.get_config_var("LIBDIR"))`).Output()
		require.NoError(t, err)
		dir, err := filepath.EvalSymlinks(strings.TrimSpace(string(libdir)))
		require.NoError(t, err)
		lib, _, _ := strings.Cut(strings.TrimPrefix(lines[2], "libpython: "), " (built against")
		lib, err = filepath.EvalSymlinks(lib)
		require.NoError(t, err)
		assert.Equal(t, dir, filepath.Dir(lib), "libpython comes from %s's LIBDIR", python)
	}

	cmd := exec.Command(skynetBin(t), "--version")
	cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH=")
	bin, err := cmd.CombinedOutput()
	require.NoError(t, err, string(bin))
	built := strings.SplitN(string(bin), "\n", 2)
	assert.Equal(t, strings.SplitN(out, "\n", 2)[1], built[1], "the binary loads the same libpython as the test")
	// Built as make build builds it, it names the revision it was built from.
	if head, err := exec.Command("git", "rev-parse", "HEAD").Output(); err == nil {
		assert.Regexp(t, `^skynet `+string(head[:12])+` \(\d{4}-\d\d-\d\d(, modified)?\) go`, built[0])
	}
}

// uniqueIDs repeats a case file n times, each case with an id of its own
// (skynet score refuses repeated ids).
func uniqueIDs(t *testing.T, data []byte, n int) []byte {
	var out bytes.Buffer
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	for i := 0; i < n*len(lines); i++ {
		var c map[string]any
		require.NoError(t, json.Unmarshal([]byte(lines[i%len(lines)]), &c))
		c["id"] = fmt.Sprintf("c%d", i)
		b, err := json.Marshal(c)
		require.NoError(t, err)
		out.Write(b)
		out.WriteByte('\n')
	}
	return out.Bytes()
}

// The summary's model use is the whole of it: every call's tokens, cost,
// retries and failure, also those that come after the last call is counted.
func TestModelUseCountsRetriesFailuresAndTokens(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), "refused") {
			http.Error(w, "bad request", http.StatusBadRequest) // not retried: a failed call
			return
		}
		mu.Lock()
		first := !seen[string(body)]
		seen[string(body)] = true
		mu.Unlock()
		if first {
			http.Error(w, "busy", http.StatusInternalServerError) // each call's first request: one retry
			return
		}
		// Slower than the child's first report (every 0.5 s), made once every
		// call has started: the tokens and cost come after the calls are counted.
		time.Sleep(time.Second)
		fmt.Fprint(w, `{"choices": [{"message": {"content": "PASS. Fine."}}], "usage": {"prompt_tokens": 1000, "completion_tokens": 500}}`)
	}))
	defer srv.Close()
	dir := t.TempDir()
	prices := writeFile(t, dir, "prices.json", `{"openai/gpt-4o-mini": {"input_per_mtok": 1000, "output_per_mtok": 2000}}`)
	var cases strings.Builder
	for i := 1; i <= 6; i++ {
		fmt.Fprintf(&cases, `{"id": "q%d", "input": {"question": "q%d"}, "output": "a"}`+"\n", i, i)
	}
	cases.WriteString(`{"id": "r", "input": {"question": "refused"}, "output": "a"}` + "\n")
	data := writeFile(t, dir, "cases.jsonl", cases.String())
	code, out, errOut := skynet("score", "--metric", "../../testdata/judge/metric.py", "--data", data, "--workers", "8",
		"--reflection-model", "openai/gpt-4o-mini", "--llm-base-url", srv.URL+"/v1", "--prices", prices)
	require.Equal(t, exitOK, code, errOut)
	require.Len(t, resultLines(t, out), 7)
	// 6 good calls of 1000 + 500 tokens at $1 + $1, each retried once; one refused.
	assert.Contains(t, errOut, "metric model openai/gpt-4o-mini: 7 call(s), 1 failed, 6 retries, 0 cache hit(s), 6000 input + 3000 output tokens, cost $12.000000")
}

// An async judge keeps --threads cases in flight on one worker's loop;
// --llm-max-inflight is what bounds the model requests made at once.
func TestScoreAsyncJudgeModelRequestsInFlight(t *testing.T) {
	var now, peak atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := now.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(100 * time.Millisecond)
		now.Add(-1)
		fmt.Fprint(w, `{"choices": [{"message": {"content": "PASS. fine"}}]}`)
	}))
	defer srv.Close()
	var cases strings.Builder
	for i := range 48 {
		fmt.Fprintf(&cases, `{"id": "c%d", "input": {"question": "2+2?"}, "output": "4"}`+"\n", i)
	}
	data := filepath.Join(t.TempDir(), "cases.jsonl")
	require.NoError(t, os.WriteFile(data, []byte(cases.String()), 0o644))
	for _, tc := range []struct {
		limit    []string
		min, max int64
	}{{[]string{"--llm-max-inflight", "4"}, 4, 4}, {nil, 24, 48}} {
		peak.Store(0)
		args := append([]string{"score", "--metric", "../../testdata/async_judge/metric.py", "--data", data,
			"--processes", "1", "--threads", "48", "--metric-model", "openai/j", "--llm-base-url", srv.URL + "/v1"}, tc.limit...)
		code, out, errOut := skynet(args...)
		require.Equal(t, exitOK, code, errOut)
		for _, l := range resultLines(t, out) {
			require.Nil(t, l.Error, l.ID)
			assert.Equal(t, 1.0, l.Score)
		}
		assert.GreaterOrEqual(t, peak.Load(), tc.min, tc.limit)
		assert.LessOrEqual(t, peak.Load(), tc.max, tc.limit)
	}
}
