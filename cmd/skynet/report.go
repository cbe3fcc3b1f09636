package main

// skynet report: one self-contained HTML file (inline CSS, SVG and
// script; nothing fetched) to look at a run, and with --base at its
// comparison with another: the summary, histograms, named scores with
// their intervals, errors by kind, call times, and a table of cases to sort
// and filter. At a million cases it stays a few hundred kilobytes: the
// figures are aggregates, and the table keeps the lowest-scored cases and a
// random sample of the rest, and says so.

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"flag"
	"fmt"
	"html/template"
	"io"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"time"

	"github.com/skynetml/skynet/caseio"
	"github.com/skynetml/skynet/engine"
)

//go:embed report.html
var reportTemplate string

// reportRows is how many of the lowest-scored cases the table keeps, and
// how many more it samples from the rest.
const reportRows = 500

func runReport(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	var base stringsFlag
	fs.Var(&base, "base", "a results file of a run to compare with (again for each part)")
	out := fs.String("out", "", "the HTML file to write, e.g. report.html (-o for short)")
	fs.StringVar(out, "o", "", "--out")
	pos, code, ok := parseFlagsAnywhere(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	if len(pos) == 0 {
		fmt.Fprintln(stderr, "skynet report: name the results file(s): skynet report RESULTS.jsonl [--base BASE.jsonl] -o report.html")
		return exitUsage
	}
	if *out == "" {
		fmt.Fprintln(stderr, "skynet report: -o is required: the HTML file to write (e.g. -o report.html)")
		return exitUsage
	}
	data, err := buildReport(pos, base)
	if err != nil {
		fmt.Fprintf(stderr, "skynet report: %v\n", err)
		return exitUsage
	}
	if err := replaceFile(*out, func(w io.Writer) error { return renderReport(w, data) }); err != nil {
		fmt.Fprintf(stderr, "skynet report: %v\n", err)
		return exitUsage
	}
	fmt.Fprintf(stdout, "wrote %s: %d case(s)%s\n", *out, data.Summary.Cases, map[bool]string{true: ", compared with " + base.String(), false: ""}[len(base) > 0])
	return exitOK
}

// reportData is what the page shows, also embedded in it as JSON (the
// table's rows, the figures a test reads back).
type reportData struct {
	Files     []string      `json:"files"`
	Generated string        `json:"generated"`
	Summary   summaryJSON   `json:"summary"`
	CallHist  []callBin     `json:"call_histogram"`
	Rows      []reportRow   `json:"rows"`
	RowsNote  string        `json:"rows_note"`
	Compare   *comparison   `json:"compare,omitempty"`
	Changed   []changedCase `json:"changed,omitempty"`
}

type callBin struct {
	UpTo  float64 `json:"up_to_ms"`
	Count int     `json:"count"`
}

type reportRow struct {
	ID       string  `json:"id"`
	Score    float64 `json:"score"`
	Feedback string  `json:"feedback"`
	Error    string  `json:"error"`
	MS       float64 `json:"ms"`
	Why      string  `json:"why"` // "lowest" or "sample"
}

// buildReport reads the run (and base) for the page.
func buildReport(files, base []string) (*reportData, error) {
	sum := newSummary()
	var lowest lowestRows
	rng := rand.New(rand.NewPCG(1, 2))
	var sample []reportRow
	seen := 0
	var names namesSeen
	rowOf := func(rf caseio.ResultFields) reportRow {
		var feedback string
		json.Unmarshal(rf.Feedback, &feedback)
		return reportRow{ID: rf.ID, Score: rf.Score, Feedback: feedback, Error: string(rf.Kind), MS: rf.MS}
	}
	err := eachResult(files, &names, func(rf caseio.ResultFields, named []namedValue, _ int, _ int64, _ lineAt) error {
		if rf.Kind == engine.KindCanceled {
			sum.add(tally{kind: engine.KindCanceled})
			return nil
		}
		sum.add(tally{id: rf.ID, score: rf.Score, kind: rf.Kind, ms: rf.MS})
		for _, nv := range named {
			sum.addScore([]byte(names.list[nv.name]), nv.v)
		}
		// The lowest scores (failed cases first), and a reservoir sample
		// of every case.
		if key := rowKey(rf); lowest.wants(key) {
			lowest.push(key, rowOf(rf))
		}
		seen++
		if len(sample) < reportRows {
			sample = append(sample, rowOf(rf))
		} else if j := rng.IntN(seen); j < reportRows {
			sample[j] = rowOf(rf)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if sum.count == 0 {
		return nil, fmt.Errorf("%s holds no results", files[0])
	}
	d := &reportData{Files: files, Generated: time.Now().UTC().Format("2006-01-02 15:04 UTC")}
	var js bytes.Buffer
	sum.writeJSON(&js, false)
	if err := json.Unmarshal(js.Bytes(), &d.Summary); err != nil {
		return nil, err
	}
	d.CallHist = callHistogram(sum.callMS)
	rows := map[string]bool{}
	for _, r := range lowest.sorted() {
		r.Why = "lowest"
		d.Rows = append(d.Rows, r)
		rows[r.ID] = true
	}
	for _, r := range sample {
		if !rows[r.ID] {
			r.Why = "sample"
			d.Rows = append(d.Rows, r)
		}
	}
	d.RowsNote = fmt.Sprintf("all %d case(s)", len(d.Rows))
	if len(d.Rows) < sum.count {
		d.RowsNote = fmt.Sprintf("%d of %d case(s): the %d lowest-scored (failed first) and a random sample of the rest", len(d.Rows), sum.count, len(lowest.rows))
	}
	if len(base) > 0 {
		c, err := compareRuns(compareFlags{base: base, new: files, show: reportRows, allowPartial: true})
		if err != nil {
			return nil, err
		}
		d.Compare = c
		d.Changed = append(append(d.Changed, c.Worse...), c.Better...)
	}
	return d, nil
}

// rowKey orders cases for the table's lowest: a failed one before any
// score, then by score.
func rowKey(rf caseio.ResultFields) float64 {
	if rf.Kind != "" {
		return math.Inf(-1)
	}
	return rf.Score
}

// lowestRows keeps the reportRows cases of the lowest keys: a max-heap, its
// top the highest key kept, which a lower one replaces.
type lowestRows struct {
	keys []float64
	rows []reportRow
}

func (l *lowestRows) wants(key float64) bool { return len(l.keys) < reportRows || key < l.keys[0] }

func (l *lowestRows) push(key float64, r reportRow) {
	if len(l.keys) < reportRows {
		l.keys, l.rows = append(l.keys, key), append(l.rows, r)
		for i := len(l.keys) - 1; i > 0; { // sift up
			p := (i - 1) / 2
			if l.keys[p] >= l.keys[i] {
				break
			}
			l.swap(i, p)
			i = p
		}
		return
	}
	l.keys[0], l.rows[0] = key, r
	for i := 0; ; { // sift down
		big, a, b := i, 2*i+1, 2*i+2
		if a < len(l.keys) && l.keys[a] > l.keys[big] {
			big = a
		}
		if b < len(l.keys) && l.keys[b] > l.keys[big] {
			big = b
		}
		if big == i {
			return
		}
		l.swap(i, big)
		i = big
	}
}

func (l *lowestRows) swap(i, j int) {
	l.keys[i], l.keys[j] = l.keys[j], l.keys[i]
	l.rows[i], l.rows[j] = l.rows[j], l.rows[i]
}

// sorted is the rows kept, lowest key first (ties by id).
func (l *lowestRows) sorted() []reportRow {
	idx := make([]int, len(l.rows))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool {
		ka, kb := l.keys[idx[a]], l.keys[idx[b]]
		if ka != kb {
			return ka < kb
		}
		return l.rows[idx[a]].ID < l.rows[idx[b]].ID
	})
	out := make([]reportRow, len(idx))
	for i, j := range idx {
		out[i] = l.rows[j]
	}
	return out
}

// callHistogram bins call times on a log scale, a bin a factor of about 3.
func callHistogram(ms []float64) []callBin {
	if len(ms) == 0 {
		return nil
	}
	edges := []float64{0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1, 3, 10, 30, 100, 300, 1000, 3000, 10000, 30000, 100000, math.Inf(1)}
	bins := make([]callBin, len(edges))
	for i, e := range edges {
		bins[i].UpTo = e
	}
	for _, v := range ms {
		i := sort.SearchFloat64s(edges, v)
		bins[min(i, len(bins)-1)].Count++
	}
	lo, hi := 0, len(bins)
	for lo < hi && bins[lo].Count == 0 {
		lo++
	}
	for hi > lo && bins[hi-1].Count == 0 {
		hi--
	}
	out := bins[lo:hi]
	for i := range out {
		if math.IsInf(out[i].UpTo, 1) {
			out[i].UpTo = -1 // JSON: more than the last edge
		}
	}
	return out
}

// renderReport writes the page.
func renderReport(w io.Writer, d *reportData) error {
	data, err := json.Marshal(d)
	if err != nil {
		return err
	}
	t, err := template.New("report").Funcs(template.FuncMap{
		"num":      summaryNumber,
		"signed":   signed,
		"ms":       msText,
		"bars":     scoreBars,
		"callBars": callBars,
		"pct":      func(v float64) string { return strconv.FormatFloat(100*v, 'f', 1, 64) },
	}).Parse(reportTemplate)
	if err != nil {
		return err
	}
	return t.Execute(w, struct {
		*reportData
		JSON template.JS
	}{d, template.JS(bytes.ReplaceAll(data, []byte("</"), []byte(`<\/`)))})
}

// bar is one bar of an inline SVG histogram.
type bar struct {
	X, Y, W, H float64
	Label      string
	Count      int
}

// scoreBars lays the score histogram out in a 400 x 120 box.
func scoreBars(h *histogramJSON) []bar {
	if h == nil {
		return nil
	}
	return layBars(h.Counts, func(i int) string {
		step := (h.Hi - h.Lo) / float64(len(h.Counts))
		return fmt.Sprintf("%s to %s", strconv.FormatFloat(h.Lo+step*float64(i), 'g', 3, 64), strconv.FormatFloat(h.Lo+step*float64(i+1), 'g', 3, 64))
	})
}

func callBars(bins []callBin) []bar {
	counts := make([]int, len(bins))
	for i, b := range bins {
		counts[i] = b.Count
	}
	return layBars(counts, func(i int) string {
		if bins[i].UpTo < 0 {
			return "over 100 s"
		}
		return "up to " + msText(bins[i].UpTo)
	})
}

func layBars(counts []int, label func(int) string) []bar {
	most := 1
	for _, c := range counts {
		most = max(most, c)
	}
	const width, height = 400.0, 120.0
	bw := width / float64(max(len(counts), 1))
	out := make([]bar, len(counts))
	for i, c := range counts {
		h := height * float64(c) / float64(most)
		out[i] = bar{X: float64(i) * bw, Y: height - h, W: bw - 2, H: h, Label: label(i), Count: c}
	}
	return out
}
