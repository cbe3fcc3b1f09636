package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// chromium is Debian's headless browser (make installs it when root), or
// the test skips saying so.
func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no chromium on PATH: sudo apt-get install -y chromium (make does, when root) to open the report in a real browser")
	return ""
}

// browse loads a page in headless Chromium and returns what it holds once
// its script ran (--dump-dom), or writes a screenshot of it.
func browse(t *testing.T, page, screenshot string) string {
	t.Helper()
	args := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + t.TempDir(), "--window-size=1280,1700"}
	if screenshot != "" {
		args = append(args, "--screenshot="+screenshot)
	} else {
		args = append(args, "--dump-dom")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromium(t), append(args, "file://"+page)...)
	out, err := cmd.Output()
	require.NoError(t, err, "chromium: %s", out)
	return string(out)
}

// dataValue is the data-value of the element with this id in a page.
func dataValue(t *testing.T, dom, id string) float64 {
	t.Helper()
	m := regexp.MustCompile(`id="` + regexp.QuoteMeta(id) + `" data-value="([^"]*)"`).FindStringSubmatch(dom)
	require.NotNil(t, m, "the page has no #%s with a data-value", id)
	v, err := strconv.ParseFloat(m[1], 64)
	require.NoError(t, err, "#%s", id)
	return v
}

// skynet report --base, opened in headless Chromium: the figures its DOM
// shows are skynet compare --json's and the summary's, its script fills the
// table of cases, and it fetches nothing (no http(s) address in it).
func TestReportInBrowser(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(9, 9))
	var base, nw []string
	for i := range 300 {
		id := fmt.Sprintf("case-%03d", i)
		b, n := float64(rng.IntN(2)), float64(rng.IntN(3)/2)
		kind := ""
		if i%50 == 7 {
			kind, n = "exception", 0
		}
		base = append(base, resultText(id, b, "base says "+id, map[string]float64{"acc": b}, ""))
		nw = append(nw, resultText(id, n, "new <b>says</b> "+id, map[string]float64{"acc": n}, kind))
	}
	bp, np := resultsFile(t, dir, "base.jsonl", base), resultsFile(t, dir, "new.jsonl", nw)
	page := filepath.Join(dir, "report.html")
	code, out, errOut := skynet("report", np, "--base", bp, "-o", page)
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "wrote "+page+": 300 case(s), compared with "+bp)
	html, err := os.ReadFile(page)
	require.NoError(t, err)
	assert.NotRegexp(t, `(src|href)="?https?:`, string(html), "the page fetches nothing")
	assert.NotContains(t, string(html), "<b>says</b>", "feedback is text, not markup")

	code, cmpOut, errOut := skynet("compare", bp, np, "--json")
	require.Equal(t, exitOK, code, errOut)
	var c comparison
	require.NoError(t, json.Unmarshal([]byte(cmpOut), &c))

	dom := browse(t, page, "")
	for id, want := range map[string]float64{
		"paired": float64(c.Paired), "base-mean": c.Base.Mean, "new-mean": c.New.Mean,
		"diff-mean": c.Diff.Mean, "diff-low": c.Diff.Low, "diff-high": c.Diff.High, "mcnemar-p": c.McNemar.P,
		"mean": c.New.Mean, "cases": 300, "failed": 6,
	} {
		assert.InDelta(t, want, dataValue(t, dom, id), 1e-12, "#%s", id)
	}
	tbody := regexp.MustCompile(`(?s)<table id="cases-table">.*?<tbody>(.*?)</tbody>`).FindStringSubmatch(dom)
	require.NotNil(t, tbody, "the table of cases")
	assert.Equal(t, 300, strings.Count(tbody[1], "<tr>"), "the script filled a row a case")
	assert.Contains(t, dom, "300 of 300 rows")
	assert.Contains(t, tbody[1], "new &lt;b&gt;says&lt;/b&gt; case-007", "feedback shows as text")

}

// What report refuses, exit 2: no -o, a missing file, an empty one, a line
// that is not a result (named by file and line).
func TestReportRefuses(t *testing.T) {
	dir := t.TempDir()
	good := resultsFile(t, dir, "good.jsonl", []string{resultText("a", 1, "", nil, "")})
	bad := writeFile(t, dir, "bad.jsonl", resultText("a", 1, "", nil, "")+"\n"+"not json\n")
	empty := writeFile(t, dir, "empty.jsonl", "")
	out := filepath.Join(dir, "r.html")
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{good}, "-o is required"},
		{[]string{filepath.Join(dir, "missing.jsonl"), "-o", out}, "missing.jsonl: no such file or directory"},
		{[]string{empty, "-o", out}, empty + " holds no results"},
		{[]string{bad, "-o", out}, bad + ":2: not a results line"},
		{[]string{good, "--base", empty, "-o", out}, "BASE (" + empty + ") has no results to compare"},
	} {
		code, _, errOut := skynet(append([]string{"report"}, tc.args...)...)
		assert.Equal(t, exitUsage, code, "%v: %s", tc.args, errOut)
		assert.Contains(t, errOut, tc.says)
		assert.NoFileExists(t, out)
	}
}
