package main

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skynetml/skynet/internal/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// resultsFile writes results lines as skynet score writes them.
func resultsFile(t *testing.T, dir, name string, lines []string) string {
	return writeFile(t, dir, name, strings.Join(lines, "\n")+"\n")
}

func resultText(id string, score float64, feedback string, named map[string]float64, kind string) string {
	b, _ := json.Marshal(feedback)
	scores := []string{}
	for _, k := range []string{"acc", "fmt"} {
		if v, ok := named[k]; ok {
			scores = append(scores, fmt.Sprintf("%q:%v", k, v))
		}
	}
	errText := "null"
	if kind != "" {
		errText = fmt.Sprintf(`{"kind":%q,"message":"m"}`, kind)
	}
	return fmt.Sprintf(`{"id":%q,"score":%v,"feedback":%s,"scores":{%s},"error":%s,"ms":0.01}`, id, score, b, strings.Join(scores, ","), errText)
}

// skynet compare on two generated runs: its --json figures are SciPy's
// paired t interval and statsmodels' McNemar p for the same pairs, it names
// the ids only one side has, lists the changed cases largest first with
// both feedbacks, reads a side split in parts, and leaves out cancelled
// results.
func TestCompareAgainstSciPy(t *testing.T) {
	venv := testenv.Venv(t, "")
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(3, 5))
	var base, newA, newB []string
	var bs, ns []float64
	for i := range 400 {
		b, n := float64(rng.IntN(2)), float64(rng.IntN(2))
		if rng.IntN(5) == 0 {
			n = b
		}
		id := fmt.Sprintf("q%d", i)
		base = append(base, resultText(id, b, "base "+id, map[string]float64{"acc": b, "fmt": 1}, ""))
		line := resultText(id, n, "new "+id, map[string]float64{"acc": n, "fmt": 0.5}, "")
		if i%2 == 0 {
			newA = append(newA, line)
		} else {
			newB = append(newB, line)
		}
		bs, ns = append(bs, b), append(ns, n)
	}
	base = append(base, resultText("only-base", 1, "", nil, ""))
	newB = append(newB, resultText("only-new", 0, "", nil, ""), `{"id":"q1","score":0,"feedback":"x","scores":{},"error":{"kind":"canceled","message":"interrupted"},"ms":0}`)
	bp := resultsFile(t, dir, "base.jsonl", base)
	na, nb := resultsFile(t, dir, "new-0.jsonl", newA), resultsFile(t, dir, "new-1.jsonl", newB)

	code, out, errOut := skynet("compare", "--base", bp, "--new", na, "--new", nb, "--json", "--show", "3")
	require.Equal(t, exitOK, code, errOut)
	var c comparison
	require.NoError(t, json.Unmarshal([]byte(out), &c), out)
	assert.Equal(t, 400, c.Paired)
	assert.Equal(t, idsJSON{Count: 1, First: []string{"only-base"}}, c.OnlyBase)
	assert.Equal(t, idsJSON{Count: 1, First: []string{"only-new"}}, c.OnlyNew)
	require.NotNil(t, c.McNemar)

	data, err := json.Marshal(map[string]any{"base": bs, "new": ns})
	require.NoError(t, err)
	in := filepath.Join(dir, "pairs.json")
	require.NoError(t, os.WriteFile(in, data, 0o644))
	ref, err := exec.Command(filepath.Join(venv, "bin", "python"), "-W", "ignore", "-c", `
import json, sys
import numpy as np, scipy.stats as st
from statsmodels.stats.contingency_tables import mcnemar
d = json.load(open(sys.argv[1]))
b, n = np.array(d["base"]), np.array(d["new"])
ci = st.ttest_rel(n, b).confidence_interval(0.95)
worse, better = int(((b == 1) & (n == 0)).sum()), int(((b == 0) & (n == 1)).sum())
print(json.dumps([float((n - b).mean()), ci.low, ci.high, worse, better, mcnemar([[0, worse], [better, 0]], exact=True).pvalue]))
`, in).Output()
	require.NoError(t, err)
	var want []float64
	require.NoError(t, json.Unmarshal(ref, &want))
	for i, got := range []float64{c.Diff.Mean, c.Diff.Low, c.Diff.High, float64(c.McNemar.Worse), float64(c.McNemar.Better), c.McNemar.P} {
		assert.InDelta(t, want[i], got, 1e-9*math.Max(1, math.Abs(want[i])), "figure %d", i)
	}
	assert.InDelta(t, -0.5, c.Named["fmt"].Mean, 1e-12)

	require.Len(t, c.Worse, 3)
	for _, w := range c.Worse {
		assert.Equal(t, -1.0, w.Diff)
		assert.Equal(t, "base "+w.ID, w.BaseFeedback)
		assert.Equal(t, "new "+w.ID, w.NewFeedback)
	}

	// The text says the same, and the verdict.
	code, text, _ := skynet("compare", bp, na, "--allow-partial")
	assert.Equal(t, exitOK, code)
	assert.Contains(t, text, "paired by id")
	assert.Regexp(t, `(?m)^verdict: `, text)
}

// --fail-if-worse exits 1 when NEW is worse with 95% confidence, 0 otherwise.
func TestCompareFailIfWorse(t *testing.T) {
	dir := t.TempDir()
	var base, worse []string
	for i := range 60 {
		id := fmt.Sprint(i)
		base = append(base, resultText(id, 1, "", nil, ""))
		s := 1.0
		if i%2 == 0 {
			s = 0
		}
		worse = append(worse, resultText(id, s, "", nil, ""))
	}
	bp, wp := resultsFile(t, dir, "base.jsonl", base), resultsFile(t, dir, "worse.jsonl", worse)
	code, out, errOut := skynet("compare", bp, wp, "--fail-if-worse")
	assert.Equal(t, exitCheck, code, errOut)
	assert.Contains(t, out, "verdict: NEW is worse, with 95% confidence")
	assert.Contains(t, errOut, "NEW is worse than BASE with 95% confidence")
	code, _, errOut = skynet("compare", wp, bp, "--fail-if-worse")
	assert.Equal(t, exitOK, code, errOut)
}

// What compare refuses, each with the file (and line) and exit 2: a
// missing file, an empty one, a line that is not a result, results of
// another dataset, a case twice on a side.
func TestCompareRefuses(t *testing.T) {
	dir := t.TempDir()
	good := resultsFile(t, dir, "good.jsonl", []string{resultText("a", 1, "", nil, ""), resultText("b", 0, "", nil, "")})
	other := resultsFile(t, dir, "other.jsonl", []string{resultText("x", 1, "", nil, ""), resultText("y", 0, "", nil, "")})
	bad := writeFile(t, dir, "bad.jsonl", resultText("a", 1, "", nil, "")+"\n"+`{"id": "b", "input": {}, "output": 1}`+"\n")
	empty := writeFile(t, dir, "empty.jsonl", "")
	twice := resultsFile(t, dir, "twice.jsonl", []string{resultText("a", 1, "", nil, ""), resultText("a", 0, "", nil, "")})
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{good, filepath.Join(dir, "missing.jsonl")}, "missing.jsonl: no such file or directory"},
		{[]string{good, empty}, "NEW (" + empty + ") has no results to compare"},
		{[]string{good, bad}, bad + `:2: not a results line (no "score": not a results line)`},
		{[]string{good, other}, "share no case id: they are results of different datasets"},
		{[]string{twice, good}, twice + `:2: case "a" has a second result in BASE`},
		{[]string{good}, "name two results files"},
	} {
		code, out, errOut := skynet(append([]string{"compare"}, tc.args...)...)
		assert.Equal(t, exitUsage, code, "%v: %s", tc.args, errOut)
		assert.Empty(t, out)
		assert.Contains(t, errOut, tc.says)
	}
}
