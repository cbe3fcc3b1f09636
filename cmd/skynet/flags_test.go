package main

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var helpTyped = regexp.MustCompile(`(?m)^  --([a-z0-9-]+) (DURATION|N)\s`)

// typedFlags are the flags of cmd whose -h shows them as a duration or a
// whole number.
func typedFlags(t *testing.T, cmd string) map[string]string {
	t.Helper()
	code, out, errOut := skynet(cmd, "-h")
	require.Equal(t, exitOK, code, errOut)
	flags := map[string]string{}
	for _, m := range helpTyped.FindAllStringSubmatch(out, -1) {
		flags[m[1]] = m[2]
	}
	require.NotEmpty(t, flags, "no typed flags in skynet %s -h:\n%s", cmd, out)
	return flags
}

// usageError runs skynet and wants exit 2 and exactly the two lines of a
// flag problem: what is wrong, and where the flags are listed.
func usageError(t *testing.T, cmd string, args ...string) string {
	t.Helper()
	code, out, errOut := skynet(append([]string{cmd}, args...)...)
	require.Equal(t, exitUsage, code, "skynet %s %v: %s", cmd, args, errOut)
	assert.Empty(t, out)
	lines := strings.Split(strings.TrimSuffix(errOut, "\n"), "\n")
	require.Len(t, lines, 2, "one line and the -h pointer, not a flag dump: %q", errOut)
	assert.Equal(t, "run 'skynet "+cmd+" -h' for the flags", lines[1])
	return lines[0]
}

// Every duration and whole-number flag of every command refuses 0 with a
// message that names it and what it takes (--timeout 0 used to mean the
// 60s default, --limit 0 every row, and each command said it differently);
// a duration without a unit says to add one.
func TestFlagsZeroAndBareNumbers(t *testing.T) {
	for _, cmd := range []string{"check", "score", "eval", "bench", "merge", "serve"} {
		for name, typ := range typedFlags(t, cmd) {
			switch {
			case typ == "N" && name == "seed":
				continue // any seed
			case typ == "DURATION":
				assert.Equal(t, "skynet "+cmd+": --"+name+" must be a positive duration, got 0", usageError(t, cmd, "--"+name, "0"))
				assert.Equal(t, "skynet "+cmd+": --"+name+" must be a positive duration, got -1s", usageError(t, cmd, "--"+name, "-1s"))
				assert.Equal(t, "skynet "+cmd+": --"+name+" 5: a duration needs a unit, such as 5s or 500ms", usageError(t, cmd, "--"+name, "5"))
			default:
				msg := usageError(t, cmd, "--"+name, "0")
				assert.Regexp(t, `^skynet `+cmd+`: --`+name+` must be at least 1, got 0( \(.+\))?$`, msg)
				assert.Equal(t, "skynet "+cmd+": --"+name+" x: want a whole number of at least 1", usageError(t, cmd, "--"+name, "x"))
			}
		}
	}
}

func TestFlagsLimits(t *testing.T) {
	assert.Equal(t, "skynet score: --timeout must be at most 600s, got 601s", usageError(t, "score", "--timeout", "601s"))
	assert.Equal(t, "skynet check: --timeout must be at most 600s, got 11m", usageError(t, "check", "--timeout", "11m"))
	assert.Equal(t, "skynet eval: --run-timeout must be at most 600s, got 601s", usageError(t, "eval", "--run-timeout", "601s"))
	assert.Equal(t, "skynet eval: --limit must be at least 1, got 0 (leave it out to evaluate every row)", usageError(t, "eval", "--limit", "0"))
	assert.Equal(t, "skynet score: --processes 0: want \"auto\" or a count from 1 to 256", usageError(t, "score", "--processes", "0"))
	assert.Equal(t, "skynet bench: --worker-timeout 1.5: a duration needs a unit, such as 1.5s or 500ms", usageError(t, "bench", "--worker-timeout", "1.5"))
	assert.Equal(t, "skynet check: --timeout needs a value", usageError(t, "check", "--timeout"))
	// The largest value is accepted: this run goes on to the next problem.
	code, _, errOut := skynet("score", "--timeout", "600s", "--load-timeout", "1h")
	assert.Equal(t, exitUsage, code)
	assert.Equal(t, "skynet score: --metric is required\n", errOut)
}

func TestFlagsUnknownSuggestsClosest(t *testing.T) {
	assert.Equal(t, "skynet score: unknown flag --wokers (did you mean --workers?)", usageError(t, "score", "--wokers", "2"))
	assert.Equal(t, "skynet eval: unknown flag --metirc (did you mean --metric?)", usageError(t, "eval", "-metirc=m.py"))
	assert.Equal(t, "skynet check: unknown flag --sample (did you mean --samples?)", usageError(t, "check", "--sample", "2"))
	assert.Equal(t, "skynet score: unknown flag --json", usageError(t, "score", "--json"), "nothing close: no guess")
	assert.Equal(t, "skynet merge: unknown flag --zzz", usageError(t, "merge", "--zzz"))
}

func TestFlagsPositionalArgumentHint(t *testing.T) {
	code, out, errOut := skynet("score", "metric.py", "cases.jsonl")
	assert.Equal(t, exitUsage, code)
	assert.Empty(t, out)
	assert.Equal(t, "skynet score: unexpected argument \"metric.py\" (pass files as --metric metric.py --data cases.jsonl)\n", errOut)
	code, _, errOut = skynet("check", "--samples", "2", "my_metric.py", "data/x.jsonl")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "(pass files as --metric my_metric.py --data data/x.jsonl)")
}

// skynet help CMD prints what skynet CMD -h prints, on stdout, exit 0.
func TestFlagsHelpCommand(t *testing.T) {
	for _, cmd := range commandNames {
		code, out, errOut := skynet("help", cmd)
		require.Equal(t, exitOK, code, "skynet help %s: %s", cmd, errOut)
		hCode, hOut, hErr := skynet(cmd, "-h")
		assert.Equal(t, exitOK, hCode, "skynet %s -h: %s", cmd, hErr)
		assert.Equal(t, hOut, out, "skynet help %s", cmd)
		assert.Empty(t, errOut)
		assert.NotContains(t, out, "Usage:\n  skynet check", "skynet help %s printed the general usage", cmd)
	}
	code, out, _ := skynet("help", "score")
	assert.Equal(t, exitOK, code)
	assert.True(t, strings.HasPrefix(out, "usage: skynet score --metric metric.py --data CASES.jsonl"), out)
	assert.Contains(t, out, "\nScore a case file")
	assert.Contains(t, out, "\n  --processes N|auto ")
	assert.Regexp(t, `(?m)^  --processes N\|auto .*\(default auto\)$`, out)
	assert.Regexp(t, `(?m)^  --timeout DURATION .*\(default 60s\)$`, out)
	assert.NotRegexp(t, `(?m)^  -[a-z]`, out, "flags are shown as they are typed, --name")
	assert.Contains(t, out, "old names, still accepted: --interpreters (now --processes), --workers (now --threads)")
	code, out, _ = skynet("help")
	assert.Equal(t, exitOK, code)
	assert.Equal(t, usage, out)
}

// No command, or an unknown one, lists the commands and exits 2.
func TestFlagsNoOrUnknownCommand(t *testing.T) {
	for _, args := range [][]string{{}, {"nosuchcmd"}, {"help", "nosuchcmd"}, {"scor"}} {
		code, out, errOut := skynet(args...)
		assert.Equal(t, exitUsage, code, "%v", args)
		assert.Empty(t, out)
		for _, c := range []string{"check", "score", "eval", "bench", "merge", "stub", "version"} {
			assert.Contains(t, errOut, "\n  skynet "+c+" ", "%v lists %s", args, c)
		}
	}
	_, _, errOut := skynet("nosuchcmd")
	assert.True(t, strings.HasPrefix(errOut, "skynet: unknown command \"nosuchcmd\"\n"), errOut)
	_, _, errOut = skynet("scor")
	assert.True(t, strings.HasPrefix(errOut, "skynet: unknown command \"scor\" (did you mean score?)\n"), errOut)
}

// jsonError wants exit code and, on stdout, only {"ok": false, "error"}
// with the message that stderr has too.
func jsonError(t *testing.T, code int, want string, args ...string) {
	t.Helper()
	got, out, errOut := skynet(args...)
	assert.Equal(t, code, got, "%v: %s", args, errOut)
	var rep map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &rep), "%v printed non-JSON on stdout: %q", args, out)
	assert.Equal(t, map[string]any{"ok": false, "error": want}, rep, "%v", args)
	assert.Contains(t, errOut, want, "the human message stays on stderr")
}

// skynet check --json and bench --json used to print their errors as plain
// text only, so a tool parsing stdout as JSON got nothing to parse.
func TestFlagsJSONErrors(t *testing.T) {
	empty := writeFile(t, t.TempDir(), "empty.jsonl", "")
	jsonError(t, exitUsage, empty+": no cases", "check", "--json", "--metric", example+"metric.py", "--data", empty)
	jsonError(t, exitUsage, "--samples must be at least 1, got 0", "check", "--metric", example+"metric.py", "--data", example+"cases.jsonl", "--samples", "0", "--json")
	jsonError(t, exitUsage, "--metric no_such.py: no such file", "check", "--json", "--metric", "no_such.py", "--data", example+"cases.jsonl")
	jsonError(t, exitUsage, "unknown flag --smaples (did you mean --samples?)", "check", "--json", "--smaples", "2")
	jsonError(t, exitUsage, "price file: open /no/such/prices.json: no such file or directory",
		"check", "--json", "--metric", example+"metric.py", "--data", example+"cases.jsonl", "--prices", "/no/such/prices.json")
	jsonError(t, exitUsage, empty+": no cases", "bench", "--json", "--metric", example+"metric.py", "--data", empty)
	jsonError(t, exitUsage, "--metric no_such.py: no such file", "bench", "--json", "--metric", "no_such.py")

	// Without --json, or with --json=false, errors stay plain text.
	code, out, errOut := skynet("check", "--json=false", "--metric", example+"metric.py", "--data", empty)
	assert.Equal(t, exitUsage, code)
	assert.Empty(t, out)
	assert.Equal(t, "skynet check: "+empty+": no cases\n", errOut)
	// A failed check is the checks report, not an error object.
	code, out, _ = skynet("check", "--json", "--metric", "../../testdata/contract/no_feedback.py", "--data", example+"cases.jsonl", "--samples", "1")
	assert.Equal(t, exitCheck, code)
	var rep map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	assert.Equal(t, false, rep["ok"])
	assert.NotContains(t, rep, "error")
	assert.Contains(t, rep, "checks")
}

// A metric whose score calls skynet.observation() failed the bench with
// the RuntimeError's "only available while Skynet is calling score",
// which the call was: inside score, but in the pure-Python baseline. The
// bench now says the baselines cannot run such a metric, naming the
// function, and reports the engine's figure alone (exit 1: no ratios).
func TestFlagsBenchMetricUsingPerCaseFunction(t *testing.T) {
	metric := benchMetric(t, `
import skynet
def score(input, output, expected=None):
    obs = skynet.observation()
    return (1.0 if output == expected["label"] else 0.0), {"feedback": str(obs["run_ms"])}
`)
	code, out, errOut := skynet("bench", "--metric", metric, "--cases", "50", "--runs", "1", "--json")
	assert.Equal(t, exitCheck, code, errOut)
	var rep benchReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	assert.Greater(t, rep.NSPerCase["engine"], 0.0, "the engine path's figure is reported")
	assert.NotContains(t, rep.NSPerCase, "python_loop")
	assert.NotContains(t, rep.NSPerCase, "subprocess_lockstep")
	assert.Empty(t, rep.Ratios)
	assert.Contains(t, rep.Error, "plain-Python baselines cannot run this metric: its score calls skynet.observation()")
	assert.Contains(t, errOut, "skynet bench: the plain-Python baselines cannot run this metric: its score calls skynet.observation()")
	assert.NotContains(t, errOut, "is only available while Skynet is calling score", "the false claim is gone")

	code, out, errOut = skynet("bench", "--metric", metric, "--cases", "50", "--runs", "2")
	assert.Equal(t, exitCheck, code, errOut)
	assert.Regexp(t, `(?m)^  engine +\d+ ns/case$`, out)
	assert.Contains(t, out, "the baselines did not run")
	assert.Contains(t, errOut, "skynet.observation()")
}

// A metric returning 1e300 made the summary print a 300-digit mean; huge
// and tiny means are written with an exponent, scores in [0, 1] as before.
func TestFlagsSummaryNumbers(t *testing.T) {
	for v, want := range map[float64]string{
		0: "0.0000", 1: "1.0000", 0.66666: "0.6667", 1e-9: "0.0000", 0.5: "0.5000",
		42.125: "42.1250", -0.25: "-0.2500", 1e300: "1e+300", -1e300: "-1e+300",
		1234567: "1.2346e+06", -1e-300: "-1e-300", math.Inf(1): "+Inf", math.NaN(): "NaN",
	} {
		assert.Equal(t, want, summaryNumber(v), "%v", v)
	}
	dir := t.TempDir()
	metric := writeFile(t, dir, "metric.py", `
def score(input, output, expected=None):
    return 1e300, {"feedback": "huge", "scores": {"big": 1e300, "tiny": -1e-300}}
`)
	data := writeFile(t, dir, "cases.jsonl", casesText(2, "x"))
	code, _, errOut := skynet("score", "--metric", metric, "--data", data)
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, errOut, "\nmean score: 1e+300 (95% interval 1e+300 to 1e+300; standard error 0.0000; failed cases count as 0)\n")
	assert.Contains(t, errOut, "\nnamed scores: big 1e+300 [1e+300, 1e+300] (2), tiny -1e-300 [-1e-300, -1e-300] (2)\n")
}

// skynet merge scored nothing, but its summary said "scored 11 case(s) in
// 0.00s (0 cases/s)"; it says what it did, without a rate.
func TestFlagsMergeSummary(t *testing.T) {
	dir := t.TempDir()
	data := writeFile(t, dir, "cases.jsonl", casesText(11, "billing"))
	metric := writeFile(t, dir, "metric.py", "def score(input, output, expected=None):\n    return 0.5, {'feedback': 'half'}\n")
	var parts []string
	for k := 0; k < 3; k++ {
		out := filepath.Join(dir, fmt.Sprintf("part-%d.jsonl", k))
		code, _, errOut := skynet("score", "--metric", metric, "--data", data, "--out", out, "--shard", fmt.Sprintf("%d/3", k))
		require.Equal(t, exitOK, code, errOut)
		parts = append(parts, out)
	}
	code, stdout, errOut := skynet(append([]string{"merge", "--data", data, "--out", filepath.Join(dir, "all.jsonl")}, parts...)...)
	require.Equal(t, exitOK, code, errOut)
	assert.True(t, strings.HasPrefix(stdout, "merged 11 result(s) from 3 part(s)\nmean score: 0.5000 "), stdout)
	assert.NotContains(t, stdout, "scored")
	assert.NotContains(t, stdout, "cases/s")
}
