// Package reward implements REWARD_SPEC: it turns a metric's accuracy, the
// measured run time and the measured cost of one case into a single reward in
// [0, 1], plus feedback text that reflection can act on.
//
// A REWARD_SPEC, as it arrives from Python, looks like
//
//	{"weights": {"accuracy": 0.7, "speed": 0.2, "cost": 0.1},
//	 "accuracy": {}, "speed": {"reference": 2000}, "cost": {"reference": 0.01}}
//
// The weights are scaled to sum to 1. speed.reference is in milliseconds and
// cost.reference in USD. Without accuracy.reference, accuracy is a score in
// [0, 1] and is used as given; with it, accuracy is an error value (lower is
// better). Every other part uses one shape: for a value v >= 0 with reference
// r,
//
//	part = r / (r + v)
//
// which is 1 at v = 0, 1/2 at the reference, smooth and never negative. The
// reward is
//
//	total = wAccuracy*accuracy + wSpeed*speed + wCost*cost
//
// A part whose value could not be measured (run time or cost) is 0.
//
// Worked example with the spec above, accuracy 1.0, a run of 2000 ms costing
// $0.01:
//
//	accuracy = 1.0
//	speed    = 2000 / (2000 + 2000) = 0.5
//	cost     = 0.01 / (0.01 + 0.01) = 0.5
//	total    = 0.7*1.0 + 0.2*0.5 + 0.1*0.5 = 0.85
//
// With "accuracy": {"reference": 0.5} and an error of 0.25, the accuracy part
// would be 0.5 / (0.5 + 0.25) = 2/3.
//
// Parse validates the spec once, when the metric loads; Compute is then
// applied per case.
package reward

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Spec is a validated REWARD_SPEC with weights normalised to sum to 1.
// Build it with Parse; Compute relies on the invariants Parse checks.
type Spec struct {
	Weights           struct{ Accuracy, Speed, Cost float64 } // normalised, sum 1
	AccuracyReference *float64                                // nil: accuracy is a score in [0,1]; set: accuracy is an error value (lower is better), > 0
	SpeedReferenceMS  float64                                 // > 0
	CostReferenceUSD  float64                                 // > 0
}

// SpecError reports why a REWARD_SPEC was rejected. Error() reads like
//
//	REWARD_SPEC: weights.speed must be >= 0, got -0.2
//
// Key is the dotted key path ("" for the spec itself), Rule the rule that was
// broken and Got the offending value rendered Python-style ("-0.2",
// "str '0.5'", "bool True", "list"), or "" when there is no value to show.
type SpecError struct {
	Key  string // dotted key path, "" for the spec itself
	Rule string // the rule broken
	Got  string // the offending value, Python-style, or ""
}

// Error is the whole message, naming REWARD_SPEC: "REWARD_SPEC: weights.speed
// must be >= 0, got -0.2".
func (e *SpecError) Error() string {
	if e.Key == "" {
		return "REWARD_SPEC " + e.Detail()
	}
	return "REWARD_SPEC: " + e.Detail()
}

// Detail is the message without the leading "REWARD_SPEC", for a report
// that names the spec beside it (the engine's REWARD_SPEC check):
// "weights.speed must be >= 0, got -0.2", or "must be a dict, got list".
func (e *SpecError) Detail() string {
	var b strings.Builder
	if e.Key != "" {
		b.WriteString(e.Key)
		b.WriteString(" ")
	}
	b.WriteString(e.Rule)
	if e.Got != "" {
		b.WriteString(", got ")
		b.WriteString(e.Got)
	}
	return b.String()
}

// Allowed keys, in the order they are listed in error messages.
var (
	topKeys     = []string{"weights", "accuracy", "speed", "cost"}
	weightKeys  = []string{"accuracy", "speed", "cost"}
	sectionKeys = []string{"reference"}
)

// Parse validates a REWARD_SPEC value as it arrives from Python, decoded to
// Go: dicts are map[string]any, numbers are int64, int or float64, bool is
// bool (not a number), str is string, None is nil and lists are []any.
// Every failure is a *SpecError. Checks run in a fixed order (unknown
// top-level keys, weights, accuracy, speed, cost), so the error for a given
// spec is deterministic.
func Parse(v any) (*Spec, error) {
	root, ok := v.(map[string]any)
	if !ok {
		return nil, &SpecError{Rule: "must be a dict", Got: describeType(v)}
	}
	if err := checkKeys(root, "", topKeys); err != nil {
		return nil, err
	}

	s := &Spec{}
	if err := parseWeights(root, s); err != nil {
		return nil, err
	}

	// The accuracy section is optional; its reference switches accuracy from
	// a score to an error value.
	acc, present, err := section(root, "accuracy", false)
	if err != nil {
		return nil, err
	}
	if present {
		if _, ok := acc["reference"]; ok {
			r, err := positive(acc, "reference", "accuracy.reference")
			if err != nil {
				return nil, err
			}
			s.AccuracyReference = &r
		}
	}

	if s.SpeedReferenceMS, err = reference(root, "speed"); err != nil {
		return nil, err
	}
	if s.CostReferenceUSD, err = reference(root, "cost"); err != nil {
		return nil, err
	}
	return s, nil
}

func parseWeights(root map[string]any, s *Spec) error {
	m, _, err := section(root, "weights", true)
	if err != nil {
		return err
	}
	var w [3]float64
	for i, k := range weightKeys {
		path := "weights." + k
		raw, f, err := finite(m, k, path)
		if err != nil {
			return err
		}
		if f < 0 {
			return &SpecError{Key: path, Rule: "must be >= 0", Got: formatNumber(raw)}
		}
		w[i] = f
	}
	if w[0] == 0 && w[1] == 0 && w[2] == 0 {
		return &SpecError{Key: "weights", Rule: "must not all be 0"}
	}
	sum := w[0] + w[1] + w[2]
	if math.IsInf(sum, 0) {
		// Huge weights overflow the sum; scaling by the largest first keeps
		// the ratios and brings the sum into [1, 3].
		m := math.Max(w[0], math.Max(w[1], w[2]))
		for i := range w {
			w[i] /= m
		}
		sum = w[0] + w[1] + w[2]
	}
	s.Weights.Accuracy = w[0] / sum
	s.Weights.Speed = w[1] / sum
	s.Weights.Cost = w[2] / sum
	return nil
}

// reference reads the required section name ("speed" or "cost") and its
// required positive reference.
func reference(root map[string]any, name string) (float64, error) {
	m, _, err := section(root, name, true)
	if err != nil {
		return 0, err
	}
	return positive(m, "reference", name+".reference")
}

// section returns root[name] as a dict whose keys are all known.
func section(root map[string]any, name string, required bool) (m map[string]any, present bool, err error) {
	raw, ok := root[name]
	if !ok {
		if required {
			return nil, false, &SpecError{Key: name, Rule: "is missing"}
		}
		return nil, false, nil
	}
	m, ok = raw.(map[string]any)
	if !ok {
		return nil, true, &SpecError{Key: name, Rule: "must be a dict", Got: describeType(raw)}
	}
	allowed := sectionKeys
	if name == "weights" {
		allowed = weightKeys
	}
	if err := checkKeys(m, name+".", allowed); err != nil {
		return nil, true, err
	}
	return m, true, nil
}

// checkKeys rejects keys outside allowed, so a typo such as "refrence" is
// not silently ignored. The alphabetically first unknown key is reported.
func checkKeys(m map[string]any, prefix string, allowed []string) error {
	var unknown []string
	for k := range m {
		known := false
		for _, a := range allowed {
			if k == a {
				known = true
				break
			}
		}
		if !known {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	sort.Strings(unknown)
	return &SpecError{
		Key:  prefix + unknown[0],
		Rule: "is not a known key (allowed: " + strings.Join(allowed, ", ") + ")",
	}
}

// positive reads m[key] as a finite number > 0.
func positive(m map[string]any, key, path string) (float64, error) {
	raw, f, err := finite(m, key, path)
	if err != nil {
		return 0, err
	}
	if f <= 0 {
		return 0, &SpecError{Key: path, Rule: "must be > 0", Got: formatNumber(raw)}
	}
	return f, nil
}

// finite reads m[key] as a finite number, returning the raw value too so
// messages can print an int64 as an integer.
func finite(m map[string]any, key, path string) (any, float64, error) {
	raw, ok := m[key]
	if !ok {
		return nil, 0, &SpecError{Key: path, Rule: "is missing"}
	}
	f, ok := toFloat(raw)
	if !ok {
		return nil, 0, &SpecError{Key: path, Rule: "must be a number", Got: describeType(raw)}
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, 0, &SpecError{Key: path, Rule: "must be finite", Got: formatNumber(raw)}
	}
	return raw, f, nil
}

// toFloat accepts Python int and float; bool is deliberately not a number.
func toFloat(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case int:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}

// formatNumber renders a number for a message: integers as integers, floats
// with the shortest exact representation (-0.2, 2000, 1e-05).
func formatNumber(v any) string {
	switch n := v.(type) {
	case int64:
		return strconv.FormatInt(n, 10)
	case int:
		return strconv.Itoa(n)
	case float64:
		return strconv.FormatFloat(n, 'g', -1, 64)
	}
	return fmt.Sprint(v)
}

// describeType names a value's Python type, with the value where it helps:
// "None", "bool True", "str '0.5'", "int 5", "float 0.5", "list", "dict".
func describeType(v any) string {
	switch x := v.(type) {
	case nil:
		return "None"
	case bool:
		if x {
			return "bool True"
		}
		return "bool False"
	case string:
		return "str " + pyRepr(x)
	case int64, int:
		return "int " + formatNumber(x)
	case float64:
		return "float " + formatNumber(x)
	case []any:
		return "list"
	case map[string]any:
		return "dict"
	case interface{ PythonType() string }: // values with no Go counterpart, e.g. a set
		return x.PythonType()
	}
	return fmt.Sprintf("%T", v)
}

// pyRepr quotes s the way Python's repr does for ordinary strings: single
// quotes, with backslashes, quotes and non-printables escaped.
func pyRepr(s string) string {
	q := strconv.Quote(s)
	inner := q[1 : len(q)-1]
	inner = strings.ReplaceAll(inner, `\"`, `"`)
	inner = strings.ReplaceAll(inner, `'`, `\'`)
	return "'" + inner + "'"
}

// Observation is what was measured for a case; nil pointer = not measured.
type Observation struct {
	RunMS   *float64 // run time in milliseconds: the speed part's value
	CostUSD *float64 // run cost in USD: the cost part's value
}

// Parts is the outcome of Compute.
type Parts struct {
	Accuracy, Speed, Cost float64 // each in [0,1]
	Total                 float64 // sum of normalised weight x part
	Feedback              string  // metric feedback + one sentence on time and cost
}

// Compute applies the spec to one case. accuracy must be finite; without an
// accuracy reference it must be in [0,1], with one it must be >= 0. Measured
// run time and cost must be finite and >= 0. Any violation is an error and
// no Parts are produced.
//
// Feedback is the metric feedback, then a single space (only when feedback
// is non-empty and does not already end in whitespace), then exactly one
// sentence on time and cost. The four forms are:
//
//	Run took 1500 ms (reference 2000 ms) and cost $0.004 (reference $0.01).
//	Run took 1500 ms (reference 2000 ms); cost was not measured, so the cost part is 0.
//	Run time was not measured, so the speed part is 0; run cost $0.004 (reference $0.01).
//	Run time and cost were not measured, so the speed and cost parts are 0.
//
// Milliseconds are shown with at most one decimal ("1500", "1234.6"). Dollars
// are shown with 4 significant digits in plain decimal notation, trailing
// zeros trimmed ("$0.004", "$0.01", "$12.35", "$0.0001235").
func (s *Spec) Compute(accuracy float64, feedback string, obs Observation) (Parts, error) {
	var p Parts
	if math.IsNaN(accuracy) || math.IsInf(accuracy, 0) {
		return p, fmt.Errorf("reward: accuracy must be finite, got %s", formatNumber(accuracy))
	}
	if s.AccuracyReference == nil {
		if accuracy < 0 || accuracy > 1 {
			return p, fmt.Errorf("reward: accuracy must be a score in [0, 1] (REWARD_SPEC has no accuracy.reference), got %s", formatNumber(accuracy))
		}
		p.Accuracy = accuracy
	} else {
		if accuracy < 0 {
			return p, fmt.Errorf("reward: accuracy must be an error value >= 0 (REWARD_SPEC has accuracy.reference), got %s", formatNumber(accuracy))
		}
		p.Accuracy = shape(*s.AccuracyReference, accuracy)
	}

	if obs.RunMS != nil {
		if err := checkMeasured("run time", "ms", *obs.RunMS); err != nil {
			return Parts{}, err
		}
		p.Speed = shape(s.SpeedReferenceMS, *obs.RunMS)
	}
	if obs.CostUSD != nil {
		if err := checkMeasured("cost", "USD", *obs.CostUSD); err != nil {
			return Parts{}, err
		}
		p.Cost = shape(s.CostReferenceUSD, *obs.CostUSD)
	}

	p.Total = s.Weights.Accuracy*p.Accuracy + s.Weights.Speed*p.Speed + s.Weights.Cost*p.Cost
	// Normalised weights can sum to 1 plus a rounding error; keep the promise.
	p.Total = math.Min(1, math.Max(0, p.Total))
	p.Feedback = joinFeedback(feedback, s.timeCostSentence(obs))
	return p, nil
}

// shape maps v >= 0 to (0, 1]: 1 at 0, 1/2 at the reference r.
func shape(r, v float64) float64 {
	return r / (r + v)
}

func checkMeasured(what, unit string, v float64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return fmt.Errorf("reward: measured %s must be finite and >= 0 %s, got %s", what, unit, formatNumber(v))
	}
	return nil
}

func joinFeedback(feedback, sentence string) string {
	if feedback == "" {
		return sentence
	}
	last, _ := utf8.DecodeLastRuneInString(feedback)
	if unicode.IsSpace(last) {
		return feedback + sentence
	}
	return feedback + " " + sentence
}

// timeCostSentence states measured vs reference time and cost, or that they
// were not measured, in one sentence (see Compute for the four forms).
func (s *Spec) timeCostSentence(obs Observation) string {
	refMS := formatMS(s.SpeedReferenceMS)
	refUSD := formatUSD(s.CostReferenceUSD)
	switch {
	case obs.RunMS != nil && obs.CostUSD != nil:
		return fmt.Sprintf("Run took %s ms (reference %s ms) and cost $%s (reference $%s).",
			formatMS(*obs.RunMS), refMS, formatUSD(*obs.CostUSD), refUSD)
	case obs.RunMS != nil:
		return fmt.Sprintf("Run took %s ms (reference %s ms); cost was not measured, so the cost part is 0.",
			formatMS(*obs.RunMS), refMS)
	case obs.CostUSD != nil:
		return fmt.Sprintf("Run time was not measured, so the speed part is 0; run cost $%s (reference $%s).",
			formatUSD(*obs.CostUSD), refUSD)
	default:
		return "Run time and cost were not measured, so the speed and cost parts are 0."
	}
}

// formatMS shows milliseconds with at most one decimal: 1500, 1234.6.
func formatMS(ms float64) string {
	return trimZeros(strconv.FormatFloat(ms, 'f', 1, 64))
}

// formatUSD shows dollars with 4 significant digits in plain decimal
// notation (never 4e-03), trailing zeros trimmed: 0.004, 0.01, 12.35.
func formatUSD(usd float64) string {
	if usd == 0 {
		return "0"
	}
	// The exponent of the value rounded to 4 significant digits decides how
	// many decimals keep 4 of them; taking it from 'e' formatting makes the
	// rounding (9.9996 -> 10.00) consistent.
	e := strconv.FormatFloat(usd, 'e', 3, 64)
	exp, err := strconv.Atoi(e[strings.IndexByte(e, 'e')+1:])
	if err != nil {
		return strconv.FormatFloat(usd, 'f', -1, 64)
	}
	decimals := 3 - exp
	if decimals < 0 {
		decimals = 0
	}
	return trimZeros(strconv.FormatFloat(usd, 'f', decimals, 64))
}

// trimZeros drops trailing fractional zeros and a dangling point.
func trimZeros(s string) string {
	if !strings.Contains(s, ".") {
		return s
	}
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}
