package main

// The summary a run ends with, on stderr (or stdout beside --out), and as
// JSON with --summary-json: what was scored and what failed, the mean with
// its standard error and 95% interval (clustered with --cluster), each
// named score's, a histogram, errors by kind with their first cases, and
// the call time's percentiles with the slowest cases.

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/skynetml/skynet/cpython"
	"github.com/skynetml/skynet/engine"
	"github.com/skynetml/skynet/internal/stats"
)

// summaryIDs is how many case ids the summary names for an error kind, and
// how many of the slowest cases.
const summaryIDs = 3

// histogramBins is how many bins the score histogram has.
const histogramBins = 10

// summary is the run's summary, gathered result by result.
type summary struct {
	start      time.Time
	elapsed    time.Duration
	count      int // results counted, cancelled ones aside
	canceled   int
	score      stats.Mean
	cluster    string          // --cluster's field, when given
	clustered  stats.Clustered // by cluster, when given
	scores     []float64       // every score, for the histogram
	named      map[string]*stats.Mean
	errors     map[engine.ErrorKind]int
	errorIDs   map[engine.ErrorKind][]string // the first summaryIDs of each kind
	callMS     []float64                     // the score (and run) call's wall time, of cases that reached Python
	slowest    []slowCase                    // the summaryIDs slowest, slowest first
	runTimes   []float64                     // measured run times, ms
	runCost    float64                       // sum of the cases' measured run cost
	unmeasured int                           // cases without a measured run cost
	warnings   int
	parts      int // skynet merge's: the parts whose results it put together (nothing was scored)
}

type slowCase struct {
	ID string  `json:"id"`
	MS float64 `json:"ms"`
}

// mean is a sum and a count: the kept results' of a resumed file.
type mean struct {
	sum float64
	n   int
}

func newSummary() *summary {
	return &summary{start: time.Now(), named: map[string]*stats.Mean{}, errors: map[engine.ErrorKind]int{},
		errorIDs: map[engine.ErrorKind][]string{}}
}

// tally is what the summary counts of one result.
type tally struct {
	id                string
	score             float64
	kind              engine.ErrorKind // "" when scored
	ms                float64          // the call's wall time
	runMS, cost       float64
	hasRunMS, hasCost bool
	warned            bool
	cluster           string // its --cluster field's JSON text, when asked for
}

// tallyOf is what the summary counts of r.
func tallyOf(r engine.Result) tally {
	t := tally{id: r.ID, score: r.Score, warned: len(r.Warnings) > 0, ms: float64(r.Duration) / float64(time.Millisecond)}
	if r.Err != nil {
		t.kind = r.Err.Kind
	}
	if o := r.Observation; o.RunMS != nil {
		t.runMS, t.hasRunMS = *o.RunMS, true
	}
	if o := r.Observation; o.CostUSD != nil {
		t.cost, t.hasCost = *o.CostUSD, true
	}
	return t
}

func (s *summary) add(t tally) {
	if t.kind == engine.KindCanceled {
		s.canceled++
		return
	}
	s.count++
	if t.hasCost {
		s.runCost += t.cost
	} else {
		s.unmeasured++
	}
	if t.hasRunMS {
		s.runTimes = append(s.runTimes, t.runMS)
	}
	s.score.Add(t.score)
	s.scores = append(s.scores, t.score)
	if s.cluster != "" {
		s.clustered.Add(t.cluster, t.score)
	}
	if t.kind != "" {
		s.errors[t.kind]++
		if ids := s.errorIDs[t.kind]; len(ids) < summaryIDs {
			s.errorIDs[t.kind] = append(ids, t.id)
		}
	}
	if t.kind == "" || t.kind == engine.KindException || t.kind == engine.KindTimeout || t.kind == engine.KindContract {
		// A call that was made: not a line that was never a case, nor a
		// crash's or a cancellation's result.
		s.callMS = append(s.callMS, t.ms)
		if len(s.slowest) < summaryIDs || t.ms > s.slowest[len(s.slowest)-1].MS {
			i := sort.Search(len(s.slowest), func(i int) bool { return s.slowest[i].MS < t.ms })
			s.slowest = slices.Insert(s.slowest, i, slowCase{t.id, t.ms})
			s.slowest = s.slowest[:min(len(s.slowest), summaryIDs)]
		}
	}
	if t.warned {
		s.warnings++
	}
}

func (s *summary) addScore(name []byte, v float64) {
	m := s.named[string(name)]
	if m == nil {
		m = &stats.Mean{}
		s.named[string(name)] = m
	}
	m.Add(v)
}

// scoreSum is the sum of the scores counted.
func (s *summary) scoreSum() float64 {
	if s.count == 0 {
		return 0
	}
	return s.score.Mean() * float64(s.count)
}

// failed is how many counted results are errors.
func (s *summary) failed() int {
	n := 0
	for _, k := range s.errors {
		n += k
	}
	return n
}

func (s *summary) print(w io.Writer, interrupted bool) {
	head := "scored"
	if interrupted {
		head = "INTERRUPTED after scoring"
	}
	rate := 0.0
	if s.elapsed > 0 {
		rate = float64(s.count) / s.elapsed.Seconds()
	}
	failed := s.failed()
	switch {
	case s.parts > 0:
		fmt.Fprintf(w, "merged %d result(s) from %d part(s)\n", s.count, s.parts)
	case failed > 0:
		// How many have a score, and how many failed: "scored 3 case(s)"
		// of 3 that all failed read as 3 scores.
		fmt.Fprintf(w, "%s %d of %d case(s) in %.2fs (%.0f cases/s); %d failed\n", head, s.count-failed, s.count, s.elapsed.Seconds(), rate, failed)
	default:
		fmt.Fprintf(w, "%s %d case(s) in %.2fs (%.0f cases/s)\n", head, s.count, s.elapsed.Seconds(), rate)
	}
	if s.canceled > 0 {
		fmt.Fprintf(w, "cancelled: %d case(s) read but not scored (--resume scores them)\n", s.canceled)
	}
	if s.count == 0 {
		return
	}
	fmt.Fprintf(w, "mean score: %s (%s; failed cases count as 0)\n", summaryNumber(s.score.Mean()), s.meanSpread())
	if len(s.named) > 0 {
		names := make([]string, 0, len(s.named))
		for k := range s.named {
			names = append(names, k)
		}
		sort.Strings(names)
		parts := make([]string, 0, min(len(names), summaryNames)+1)
		for _, k := range names[:min(len(names), summaryNames)] {
			m := s.named[k]
			parts = append(parts, fmt.Sprintf("%s %s%s (%d)", summaryName(k), summaryNumber(m.Mean()), intervalText(*m), m.N()))
		}
		if more := len(names) - summaryNames; more > 0 {
			parts = append(parts, fmt.Sprintf("and %d more (in the results)", more))
		}
		fmt.Fprintf(w, "named scores: %s\n", strings.Join(parts, ", "))
	}
	if h := s.histogram(); h.lo < h.hi {
		counts := make([]string, len(h.counts))
		for i, c := range h.counts {
			counts[i] = strconv.Itoa(c)
		}
		fmt.Fprintf(w, "histogram (%d bins from %s to %s): %s\n", len(h.counts), strconv.FormatFloat(h.lo, 'g', 5, 64), strconv.FormatFloat(h.hi, 'g', 5, 64), strings.Join(counts, " "))
	}
	if failed == 0 {
		fmt.Fprintln(w, "errors: none")
	} else {
		kinds := make([]string, 0, len(s.errors))
		for k, n := range s.errors {
			ids := make([]string, len(s.errorIDs[k]))
			for i, id := range s.errorIDs[k] {
				ids[i] = summaryName(id)
			}
			more := ""
			if n > len(ids) {
				more = ", ..."
			}
			kinds = append(kinds, fmt.Sprintf("%s %d: %s%s", k, n, strings.Join(ids, ", "), more))
		}
		slices.Sort(kinds)
		fmt.Fprintf(w, "errors: %d (%s)\n", failed, strings.Join(kinds, "; "))
	}
	if n := len(s.callMS); n > 0 {
		slow := make([]string, len(s.slowest))
		for i, c := range s.slowest {
			slow[i] = fmt.Sprintf("%s %s", summaryName(c.ID), msText(c.MS))
		}
		p50, p99 := percentile(s.callMS, 0.5), percentile(s.callMS, 0.99)
		fmt.Fprintf(w, "call time: p50 %s, p99 %s; slowest: %s\n", msText(p50), msText(p99), strings.Join(slow, ", "))
	}
	if n := len(s.runTimes); n > 0 {
		fmt.Fprintf(w, "run time: p50 %.1f ms, p95 %.1f ms over %d case(s)\n", percentile(s.runTimes, 0.5), percentile(s.runTimes, 0.95), n)
	}
	if s.unmeasured < s.count {
		fmt.Fprintf(w, "run cost: $%.6f over %d case(s) with a measured cost (%d without)\n", s.runCost, s.count-s.unmeasured, s.unmeasured)
	}
	if s.warnings > 0 {
		fmt.Fprintf(w, "warnings: %d case(s) had side-info keys dropped (see \"warnings\" in the results)\n", s.warnings)
	}
}

// meanSpread is what the mean line says of its spread: the interval and
// standard error, clustered when asked, or why there is none.
func (s *summary) meanSpread() string {
	if s.cluster != "" {
		lo, hi := s.clustered.Interval(0.95)
		if math.IsNaN(lo) {
			return fmt.Sprintf("clustered by input %q: %d cluster(s), no interval under 2", s.cluster, s.clustered.Clusters())
		}
		return fmt.Sprintf("95%% interval %s to %s; standard error %s, clustered by input %q in %d clusters",
			summaryNumber(lo), summaryNumber(hi), summaryNumber(s.clustered.SE()), s.cluster, s.clustered.Clusters())
	}
	lo, hi := s.score.Interval(0.95)
	if math.IsNaN(lo) {
		return "one case: no interval"
	}
	return fmt.Sprintf("95%% interval %s to %s; standard error %s", summaryNumber(lo), summaryNumber(hi), summaryNumber(s.score.SE()))
}

// intervalText is a named score's interval for the summary, " [lo, hi]",
// or "" under two values.
func intervalText(m stats.Mean) string {
	lo, hi := m.Interval(0.95)
	if math.IsNaN(lo) {
		return ""
	}
	return fmt.Sprintf(" [%s, %s]", summaryNumber(lo), summaryNumber(hi))
}

// histogram is the scores in histogramBins equal bins from their least to
// their greatest ([0, 1] when they all lie in it); the last bin holds its
// upper end.
type histogram struct {
	lo, hi float64
	counts []int
}

func (s *summary) histogram() histogram {
	if len(s.scores) == 0 {
		return histogram{}
	}
	lo, hi := slices.Min(s.scores), slices.Max(s.scores)
	if lo >= 0 && hi <= 1 {
		lo, hi = 0, 1
	}
	h := histogram{lo: lo, hi: hi, counts: make([]int, histogramBins)}
	if !(lo < hi) {
		return h
	}
	for _, v := range s.scores {
		i := int(float64(histogramBins) * (v - lo) / (hi - lo))
		h.counts[min(max(i, 0), histogramBins-1)]++
	}
	return h
}

// percentile is the q quantile of v by nearest rank; v is not empty. It
// sorts v, once: the summary asks for p50, p99 and again for the JSON.
func percentile(v []float64, q float64) float64 {
	if !slices.IsSorted(v) {
		sort.Float64s(v)
	}
	return v[min(len(v)-1, max(0, int(math.Ceil(q*float64(len(v))))-1))]
}

// msText writes a duration in milliseconds readably: "12.1 ms", "1.23 s",
// "4.2 µs".
func msText(ms float64) string {
	switch {
	case ms >= 1000:
		return strconv.FormatFloat(ms/1000, 'f', 2, 64) + " s"
	case ms >= 1:
		return strconv.FormatFloat(ms, 'f', 1, 64) + " ms"
	}
	return strconv.FormatFloat(ms*1000, 'f', 1, 64) + " µs"
}

// summaryJSON is --summary-json's document: the summary's figures.
type summaryJSON struct {
	Interrupted bool                   `json:"interrupted,omitempty"`
	Elapsed     float64                `json:"elapsed_s"`
	Cases       int                    `json:"cases"`
	Scored      int                    `json:"scored"`
	Failed      int                    `json:"failed"`
	Cancelled   int                    `json:"cancelled"`
	Mean        *spreadJSON            `json:"mean,omitempty"`
	Named       map[string]*spreadJSON `json:"named_scores,omitempty"`
	Histogram   *histogramJSON         `json:"histogram,omitempty"`
	Errors      map[string]errorsJSON  `json:"errors"`
	CallMS      *callJSON              `json:"call_ms,omitempty"`
}

type spreadJSON struct {
	N        int         `json:"n"`
	Mean     float64     `json:"mean"`
	SE       *float64    `json:"se"`
	CI95     *[2]float64 `json:"ci95"`
	Cluster  string      `json:"cluster,omitempty"` // the input field the SE is clustered by
	Clusters int         `json:"clusters,omitempty"`
}

type histogramJSON struct {
	Lo     float64 `json:"lo"`
	Hi     float64 `json:"hi"`
	Counts []int   `json:"counts"`
}

type errorsJSON struct {
	Count    int      `json:"count"`
	FirstIDs []string `json:"first_ids"`
}

type callJSON struct {
	P50     float64    `json:"p50"`
	P99     float64    `json:"p99"`
	Slowest []slowCase `json:"slowest"`
}

// spreadOf is m's figures, NaN ones as null.
func spreadOf(m stats.Mean) *spreadJSON {
	sp := &spreadJSON{N: m.N(), Mean: m.Mean()}
	if se := m.SE(); !math.IsNaN(se) {
		lo, hi := m.Interval(0.95)
		sp.SE, sp.CI95 = &se, &[2]float64{lo, hi}
	}
	return sp
}

// writeJSON writes the summary as --summary-json's document.
func (s *summary) writeJSON(w io.Writer, interrupted bool) error {
	failed := s.failed()
	d := summaryJSON{Interrupted: interrupted, Elapsed: s.elapsed.Seconds(), Cases: s.count, Scored: s.count - failed,
		Failed: failed, Cancelled: s.canceled, Errors: map[string]errorsJSON{}}
	if s.count > 0 {
		d.Mean = spreadOf(s.score)
		if s.cluster != "" {
			d.Mean.Cluster, d.Mean.Clusters, d.Mean.SE, d.Mean.CI95 = s.cluster, s.clustered.Clusters(), nil, nil
			if se := s.clustered.SE(); !math.IsNaN(se) {
				lo, hi := s.clustered.Interval(0.95)
				d.Mean.SE, d.Mean.CI95 = &se, &[2]float64{lo, hi}
			}
		}
		h := s.histogram()
		d.Histogram = &histogramJSON{Lo: h.lo, Hi: h.hi, Counts: h.counts}
	}
	if len(s.named) > 0 {
		d.Named = map[string]*spreadJSON{}
		for k, m := range s.named {
			d.Named[k] = spreadOf(*m)
		}
	}
	for k, n := range s.errors {
		d.Errors[string(k)] = errorsJSON{Count: n, FirstIDs: s.errorIDs[k]}
	}
	if len(s.callMS) > 0 {
		d.CallMS = &callJSON{P50: percentile(s.callMS, 0.5), P99: percentile(s.callMS, 0.99), Slowest: s.slowest}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(d)
}

// summaryNames is how many named scores the summary lists by name.
const summaryNames = 32

// summaryName is a named score as the summary shows it: as it is when it is
// short and printable; quoted when it holds a control character (a NUL, a
// newline, an escape sequence for the terminal) or a quote, and cut to its
// first 40 characters when longer than 60, saying how long it is.
func summaryName(k string) string {
	cut := ""
	if utf8.RuneCountInString(k) > 60 {
		n := 0
		for i := range k {
			if n == 40 {
				cut = fmt.Sprintf("... (%d bytes)", len(k))
				k = k[:i]
				break
			}
			n++
		}
	}
	for _, r := range k {
		if !unicode.IsPrint(r) || r == '"' || r == '\\' {
			return strconv.Quote(k) + cut
		}
	}
	return k + cut
}

// summaryNumber writes a mean for the summary: 4 decimals for a score in
// [0, 1] and other moderate magnitudes, %g's 5 significant digits with an
// exponent for huge or tiny ones (a metric returning 1e300 printed 300
// digits).
func summaryNumber(v float64) string {
	if a := math.Abs(v); (v >= 0 && v <= 1) || (a >= 1e-3 && a < 1e6) {
		return strconv.FormatFloat(v, 'f', 4, 64)
	}
	return strconv.FormatFloat(v, 'g', 5, 64)
}

// inputField is the JSON text of the field key of a case line's input,
// "" when it has none: the --cluster label of its result.
func inputField(line []byte, key string) string {
	members, err := cpython.SplitObject(line, nil)
	if err != nil {
		return ""
	}
	for _, m := range members {
		if m.Key != "input" {
			continue
		}
		fields, err := cpython.SplitObject(m.Value, nil)
		if err != nil {
			return ""
		}
		for _, f := range fields {
			if f.Key == key {
				return string(f.Value)
			}
		}
	}
	return ""
}
