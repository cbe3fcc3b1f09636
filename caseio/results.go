package caseio

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/skynetml/skynet/cpython"
	"github.com/skynetml/skynet/engine"
)

// ResultLine is one line of a results file (SPEC §4, plus logs, warnings
// and the side info's extra keys when there are any; output and
// observation for a program's cases), as AppendResult writes it.
type ResultLine struct {
	ID          string              `json:"id"`
	Score       float64             `json:"score"`
	Feedback    string              `json:"feedback"`
	Scores      map[string]float64  `json:"scores"`
	Error       *ErrorField         `json:"error"`
	MS          float64             `json:"ms"`
	Extra       map[string]any      `json:"extra,omitempty"`
	Warnings    []string            `json:"warnings,omitempty"`
	Logs        string              `json:"logs,omitempty"`
	Output      any                 `json:"output,omitempty"`
	Observation *engine.Observation `json:"observation,omitempty"`
}

// ErrorField is a results line's "error".
type ErrorField struct {
	Kind      engine.ErrorKind `json:"kind"`
	Message   string           `json:"message"`
	Traceback string           `json:"traceback,omitempty"`
}

// ParseResult reads a results line back into the Result it was written
// from; what JSON cannot hold (run's output as a Python object) comes
// back as JSON values.
func ParseResult(line []byte) (engine.Result, error) {
	var l ResultLine
	if err := json.Unmarshal(line, &l); err != nil {
		return engine.Result{}, fmt.Errorf("pool: a result line: %w", err)
	}
	r := engine.Result{ID: l.ID, Score: l.Score, Feedback: l.Feedback, Scores: l.Scores, Extra: l.Extra,
		Warnings: l.Warnings, Logs: l.Logs, Output: l.Output, Duration: time.Duration(math.Round(l.MS * 1e6))}
	if r.Scores == nil {
		r.Scores = map[string]float64{}
	}
	if len(r.Scores) > 0 {
		// The line holds them in the metric's order; the map does not.
		var named struct {
			Scores json.RawMessage `json:"scores"`
		}
		if json.Unmarshal(line, &named) == nil {
			if names := orderedNames(named.Scores); len(names) == len(r.Scores) {
				r.ScoreNames = names
			}
		}
	}
	if l.Error != nil {
		r.Err = &engine.CaseError{Kind: l.Error.Kind, Message: l.Error.Message, Traceback: l.Error.Traceback}
	}
	if l.Observation != nil {
		r.Observation = *l.Observation
	}
	return r, nil
}

// AppendResult writes one results line (the shape of ResultLine) without
// reflection: on a large file this is the CLI's hottest Go code.
func AppendResult(b []byte, r engine.Result, withRun bool) []byte {
	b = append(b, `{"id":`...)
	b = appendString(b, r.ID)
	b = append(b, `,"score":`...)
	b = appendFloat(b, r.Score)
	b = append(b, `,"feedback":`...)
	b = appendString(b, r.Feedback)
	b = append(b, `,"scores":{`...)
	for i, k := range ScoreNames(r) {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, k)
		b = append(b, ':')
		b = appendFloat(b, r.Scores[k])
	}
	b = append(b, `},"error":`...)
	if r.Err == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, `{"kind":`...)
		b = appendString(b, string(r.Err.Kind))
		b = append(b, `,"message":`...)
		b = appendString(b, r.Err.Message)
		if r.Err.Traceback != "" {
			b = append(b, `,"traceback":`...)
			b = appendString(b, r.Err.Traceback)
		}
		b = append(b, '}')
	}
	b = append(b, `,"ms":`...)
	b = appendFloat(b, math.Round(float64(r.Duration.Microseconds()))/1000)
	if len(r.Extra) > 0 {
		if extra, err := json.Marshal(r.Extra); err == nil {
			b = append(b, `,"extra":`...)
			b = append(b, extra...)
		}
	}
	if len(r.Warnings) > 0 {
		b = append(b, `,"warnings":[`...)
		for i, w := range r.Warnings {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, w)
		}
		b = append(b, ']')
	}
	if r.Logs != "" {
		b = append(b, `,"logs":`...)
		b = appendString(b, r.Logs)
	}
	if withRun {
		if out, err := json.Marshal(r.Output); err == nil {
			b = append(b, `,"output":`...)
			b = append(b, out...)
		}
		if obs, err := json.Marshal(observationJSON(r.Observation)); err == nil {
			b = append(b, `,"observation":`...)
			b = append(b, obs...)
		}
	}
	return append(b, '}')
}

// ScoreNames are r's named scores' names in the order the metric returned
// them (Result.ScoreNames), or sorted when that is not known.
func ScoreNames(r engine.Result) []string {
	if len(r.ScoreNames) == len(r.Scores) {
		return r.ScoreNames
	}
	names := make([]string, 0, len(r.Scores))
	for k := range r.Scores {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// orderedNames reads the names of a JSON object's members in order; nil
// when raw is not an object.
func orderedNames(raw json.RawMessage) []string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	var names []string
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil
		}
		name, _ := t.(string)
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return nil
		}
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	return names
}

// observationJSON writes every field, null where not measured.
func observationJSON(o engine.Observation) map[string]any {
	m := map[string]any{"run_ms": nil, "cost_usd": nil, "model_calls": nil, "input_tokens": nil, "output_tokens": nil}
	if o.RunMS != nil {
		m["run_ms"] = math.Round(*o.RunMS*1000) / 1000
	}
	if o.CostUSD != nil {
		m["cost_usd"] = *o.CostUSD
	}
	if o.ModelCalls != nil {
		m["model_calls"] = *o.ModelCalls
	}
	if o.InputTokens != nil {
		m["input_tokens"] = *o.InputTokens
	}
	if o.OutputTokens != nil {
		m["output_tokens"] = *o.OutputTokens
	}
	return m
}

// appendFloat formats like encoding/json: shortest form, exponent only for
// very large or small magnitudes.
func appendFloat(b []byte, f float64) []byte {
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	return strconv.AppendFloat(b, f, format, -1, 64)
}

const hexDigits = "0123456789abcdef"

// appendString writes s as a JSON string; invalid UTF-8 becomes U+FFFD.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// caseLine is a case as a line of a case file, for a worker to parse.
type caseLine struct {
	ID          string              `json:"id"`
	Input       any                 `json:"input"`
	Output      any                 `json:"output"`
	Expected    any                 `json:"expected"`
	Observation *engine.Observation `json:"observation,omitempty"`
}

// CaseLine is c as a line of a case file (ParseCase reads it back),
// as a Task carries it to a worker. Values cross as JSON: a value JSON
// cannot hold is an error.
func CaseLine(c engine.Case) ([]byte, error) {
	l := caseLine{ID: c.ID, Input: c.Input, Output: c.Output, Expected: c.Expected}
	if o := c.Observation; o != (engine.Observation{}) {
		l.Observation = &o
	}
	return json.Marshal(l)
}

// AppendFloat writes f as encoding/json writes a float64 (the results
// lines' form); whole adds ".0" to a whole number, as Python's json writes a
// float (a reader that types 1 as an int, torch.tensor, must see 1.0).
func AppendFloat(b []byte, f float64, whole bool) []byte {
	at := len(b)
	b = appendFloat(b, f)
	if whole && bytes.IndexAny(b[at:], ".eE") < 0 && !math.IsInf(f, 0) && !math.IsNaN(f) {
		b = append(b, '.', '0')
	}
	return b
}

// AppendString writes s as a JSON string, as results lines do.
func AppendString(b []byte, s string) []byte { return appendString(b, s) }

// ResultFeedback is the "feedback" of a results line AppendResult wrote, as
// the JSON string it holds there (quotes and escapes kept), found without
// decoding the line: a reply that quotes it copies it as it is.
func ResultFeedback(line []byte) (raw []byte, ok bool) {
	const head, score, feedback = `{"id":`, `,"score":`, `,"feedback":`
	if !bytes.HasPrefix(line, []byte(head)) || len(line) <= len(head) || line[len(head)] != '"' {
		return nil, false
	}
	i := stringEnd(line, len(head))
	if i < 0 || !bytes.HasPrefix(line[i:], []byte(score)) {
		return nil, false
	}
	i += len(score)
	j := bytes.IndexByte(line[i:], ',')
	if j < 0 || !bytes.HasPrefix(line[i+j:], []byte(feedback)) {
		return nil, false
	}
	i += j + len(feedback)
	if i >= len(line) || line[i] != '"' {
		return nil, false
	}
	end := stringEnd(line, i)
	if end < 0 {
		return nil, false
	}
	return line[i:end], true
}

// SplitArray appends the raw texts of the elements of the JSON array raw to
// elems. raw must be valid JSON (cpython.SplitObject validated the document
// it is part of): this only finds where each element ends. ok is false when
// raw is not an array.
func SplitArray(raw []byte, elems [][]byte) ([][]byte, bool) {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '[' {
		return elems, false
	}
	i = skipSpace(raw, i+1)
	if i < len(raw) && raw[i] == ']' {
		return elems, true
	}
	for i < len(raw) {
		start := i
		switch raw[i] {
		case '"', '{', '[':
			var ok bool
			if i, ok = skipValue(raw, i); !ok {
				return elems, false
			}
		default: // a number or a literal: up to a delimiter
			for i < len(raw) && raw[i] != ',' && raw[i] != ']' && raw[i] != ' ' && raw[i] != '\t' && raw[i] != '\r' && raw[i] != '\n' {
				i++
			}
		}
		elems = append(elems, raw[start:i])
		i = skipSpace(raw, i)
		if i < len(raw) && raw[i] == ',' {
			i = skipSpace(raw, i+1)
			continue
		}
		return elems, i < len(raw) && raw[i] == ']'
	}
	return elems, false
}

// ResultFields is what a reader of many results lines needs of one, read
// in one pass without building the whole engine.Result (ParseResult's):
// the id, score, error kind and call time, with the feedback and named
// scores left as the line holds them.
type ResultFields struct {
	ID       string
	Score    float64
	Kind     engine.ErrorKind // "" when scored
	MS       float64
	Feedback []byte // the JSON string, quotes and escapes kept; nil when absent
	Scores   []byte // the JSON object of named scores; nil when absent
}

// ParseResultFields reads a results line: a JSON object with a string or
// number "id" and a number "score" at least, as every results line has.
func ParseResultFields(line []byte) (ResultFields, error) {
	var f ResultFields
	var buf [8]cpython.Member
	members, err := cpython.SplitObject(line, buf[:0])
	if err != nil {
		return f, err
	}
	hasID, hasScore := false, false
	for _, m := range members {
		switch m.Key {
		case "id":
			id, msg := caseID(m.Value, 0)
			if msg != "" || jsonKind(m.Value) == "null" {
				return f, fmt.Errorf(`"id" must be a string or a number, got %s`, jsonKind(m.Value))
			}
			f.ID, hasID = id, true
		case "score":
			if jsonKind(m.Value) != "a number" {
				return f, fmt.Errorf(`"score" must be a number, got %s`, jsonKind(m.Value))
			}
			f.Score, err = strconv.ParseFloat(string(m.Value), 64)
			if err != nil {
				return f, fmt.Errorf(`"score": %v`, err)
			}
			hasScore = true
		case "ms":
			f.MS, _ = strconv.ParseFloat(string(m.Value), 64)
		case "feedback":
			if jsonKind(m.Value) == "a string" {
				f.Feedback = m.Value
			}
		case "scores":
			if jsonKind(m.Value) == "an object" {
				f.Scores = m.Value
			}
		case "error":
			if jsonKind(m.Value) != "an object" {
				continue
			}
			fields, err := cpython.SplitObject(m.Value, nil)
			if err != nil {
				return f, err
			}
			for _, e := range fields {
				if e.Key == "kind" && jsonKind(e.Value) == "a string" {
					var k string
					if json.Unmarshal(e.Value, &k) == nil {
						f.Kind = engine.ErrorKind(k)
					}
				}
			}
			if f.Kind == "" {
				f.Kind = "error"
			}
		}
	}
	switch {
	case !hasID:
		return f, errors.New(`no "id": not a results line`)
	case !hasScore:
		return f, errors.New(`no "score": not a results line`)
	}
	return f, nil
}

// EachNamedScore calls fn with each named score of a ResultFields.Scores
// object (name unescaped), in the line's order; a value that is not a
// number is passed over.
func EachNamedScore(scores []byte, fn func(name string, v float64)) error {
	members, err := cpython.SplitObject(scores, nil)
	if err != nil {
		return err
	}
	for _, m := range members {
		if jsonKind(m.Value) != "a number" {
			continue
		}
		if v, err := strconv.ParseFloat(string(m.Value), 64); err == nil {
			fn(m.Key, v)
		}
	}
	return nil
}

// QuickResultFields is ParseResultFields for a line AppendResult wrote, its
// members in that order, read without validating the rest of the line: a
// reader of a million results lines pays a scan of each, not a parse.
// ok is false for any other line; ParseResultFields then reads it.
func QuickResultFields(line []byte) (f ResultFields, ok bool) {
	const head = `{"id":`
	n := len(line)
	if n < 2 || !bytes.HasPrefix(line, []byte(head)) || line[n-1] != '}' {
		return f, false
	}
	i := len(head)
	switch {
	case i < n && line[i] == '"':
		end := stringEnd(line, i)
		if end < 0 {
			return f, false
		}
		raw := line[i:end]
		if bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
			f.ID = string(raw[1 : len(raw)-1])
		} else if json.Unmarshal(raw, &f.ID) != nil {
			return f, false
		}
		i = end
	default:
		j := bytes.IndexByte(line[i:], ',')
		if j <= 0 || jsonKind(line[i:i+j]) != "a number" {
			return f, false
		}
		f.ID, i = string(line[i:i+j]), i+j
	}
	number := func(key string) (float64, bool) {
		if !bytes.HasPrefix(line[i:], []byte(key)) {
			return 0, false
		}
		i += len(key)
		j := i
		for j < n && line[j] != ',' && line[j] != '}' {
			j++
		}
		v, err := strconv.ParseFloat(string(line[i:j]), 64)
		i = j
		return v, err == nil
	}
	var okScore bool
	if f.Score, okScore = number(`,"score":`); !okScore {
		return f, false
	}
	const fb, sc, er = `,"feedback":`, `,"scores":`, `,"error":`
	if !bytes.HasPrefix(line[i:], []byte(fb)) || i+len(fb) >= n || line[i+len(fb)] != '"' {
		return f, false
	}
	i += len(fb)
	end := stringEnd(line, i)
	if end < 0 {
		return f, false
	}
	f.Feedback, i = line[i:end], end
	if !bytes.HasPrefix(line[i:], []byte(sc)) || i+len(sc) >= n || line[i+len(sc)] != '{' {
		return f, false
	}
	i += len(sc)
	end, okObj := skipValue(line, i)
	if !okObj {
		return f, false
	}
	f.Scores, i = line[i:end], end
	if !bytes.HasPrefix(line[i:], []byte(er)) {
		return f, false
	}
	i += len(er)
	switch {
	case bytes.HasPrefix(line[i:], []byte("null")):
		i += 4
	case i < n && line[i] == '{':
		end, okObj := skipValue(line, i)
		if !okObj {
			return f, false
		}
		const kind = `{"kind":"`
		obj := line[i:end]
		if !bytes.HasPrefix(obj, []byte(kind)) {
			return f, false
		}
		k := bytes.IndexByte(obj[len(kind):], '"')
		if k < 0 {
			return f, false
		}
		f.Kind, i = engine.ErrorKind(obj[len(kind):len(kind)+k]), end
	default:
		return f, false
	}
	if f.MS, ok = number(`,"ms":`); !ok {
		return f, false
	}
	return f, true
}

// EachQuickScore calls fn with each named score of a QuickResultFields
// Scores object as AppendResult wrote it: the name as the line holds it (a
// JSON string, quotes kept) and its value; ok is false when the object is
// not plainly that (EachNamedScore then reads it).
func EachQuickScore(scores []byte, fn func(rawName []byte, v float64)) (ok bool) {
	n := len(scores)
	if n < 2 || scores[0] != '{' || scores[n-1] != '}' {
		return false
	}
	for i := 1; i < n-1; {
		if scores[i] != '"' {
			return false
		}
		end := stringEnd(scores, i)
		if end < 0 || end >= n || scores[end] != ':' {
			return false
		}
		name := scores[i:end]
		j := end + 1
		for j < n-1 && scores[j] != ',' {
			j++
		}
		v, err := strconv.ParseFloat(string(scores[end+1:j]), 64)
		if err != nil {
			return false
		}
		fn(name, v)
		i = j + 1
	}
	return true
}
