package engine

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"

	"github.com/skynetml/skynet/cpython"
)

// returnValue is a score return value that passed the contract.
type returnValue struct {
	score    float64
	feedback string
	scores   map[string]float64
	names    []string // scores' names, in the metric's order
	extra    map[string]any
	warnings []string
}

// contractError is a return value that breaks the contract: the rule and
// what was found, and the metric's fix when the shape is wrong (Check.Fix).
type contractError struct{ msg, fix string }

func (e *contractError) Error() string { return e.msg }

// The fixes shown for a wrong shape: the contract's own line, and for a
// score that is not a number, the conversion.
const (
	pairFix   = `return score, {"feedback": "..."}`
	numberFix = `return float(score), {"feedback": "..."}`
)

func badShape(fix, format string, args ...any) error {
	return &contractError{msg: fmt.Sprintf(format, args...), fix: fix}
}

// validateReturn applies the contract of SPEC §1 to a decoded return value.
// The error message is the rule and what was found; callers add the case.
func validateReturn(v any) (returnValue, error) {
	var rv returnValue
	var pair []any
	switch x := v.(type) {
	case cpython.Tuple:
		pair = x
	case []any:
		pair = x
	default:
		if _, isNum := number(v); isNum {
			return rv, badShape(pairFix, "must return a pair (score, side info), got %s: no side info", describe(v))
		}
		return rv, badShape(pairFix, "must return a pair (score, side info), got %s", describe(v))
	}
	if len(pair) != 2 {
		return rv, badShape(pairFix, "must return a pair (score, side info), got %s", describe(v))
	}
	score, err := finiteNumber(pair[0])
	if err != nil {
		fix := ""
		if _, isNum := number(pair[0]); !isNum { // a str or bool converts; nan and inf have no fix to show
			fix = numberFix
		}
		return rv, badShape(fix, "score %v", err)
	}
	rv.score = score
	side, ok := pair[1].(*cpython.Dict)
	if !ok {
		return rv, badShape(pairFix, "side info must be a dict, got %s", describe(pair[1]))
	}
	fb, ok := side.Get("feedback")
	if !ok {
		return rv, badShape(pairFix, `side info has no "feedback" string`)
	}
	if rv.feedback, ok = fb.(string); !ok {
		return rv, badShape(pairFix, `side info "feedback" must be a str, got %s`, describe(fb))
	}
	if s, ok := side.Get("scores"); ok {
		named, isDict := s.(*cpython.Dict)
		if !isDict {
			return rv, fmt.Errorf(`side info "scores" must be a dict of name -> number, got %s`, describe(s))
		}
		rv.scores = make(map[string]float64, len(named.Keys))
		for i, k := range named.Keys {
			name, isStr := k.(string)
			if !isStr {
				return rv, fmt.Errorf(`side info "scores" names must be str, got %s`, describe(k))
			}
			f, err := finiteNumber(named.Values[i])
			if err != nil {
				return rv, fmt.Errorf("named score %q %w", name, err)
			}
			if _, dup := rv.scores[name]; !dup {
				rv.names = append(rv.names, name)
			}
			rv.scores[name] = f
		}
	}
	for i, k := range side.Keys {
		name, isStr := k.(string)
		if !isStr {
			rv.warnings = append(rv.warnings, fmt.Sprintf("side info key %s dropped: keys must be str", describe(k)))
			continue
		}
		if name == "feedback" || name == "scores" {
			continue
		}
		val, why := jsonValue(side.Values[i], 0)
		if why != "" {
			rv.warnings = append(rv.warnings, fmt.Sprintf("side info key %q dropped: %s", name, why))
			continue
		}
		if rv.extra == nil {
			rv.extra = map[string]any{}
		}
		rv.extra[name] = val
	}
	return rv, nil
}

// number returns v as a float64 when it is a Python int or float (not bool).
func number(v any) (float64, bool) {
	switch x := v.(type) {
	case int64:
		return float64(x), true
	case float64:
		return x, true
	case *big.Int:
		f, _ := new(big.Float).SetInt(x).Float64()
		return f, true
	case cpython.HugeInt: // past any float
		if x.Negative {
			return math.Inf(-1), true
		}
		return math.Inf(1), true
	}
	return 0, false
}

// bigInt sizes an int too large for a float, for messages.
func bigInt(v any) (cpython.HugeInt, bool) {
	switch x := v.(type) {
	case cpython.HugeInt:
		return x, true
	case *big.Int:
		digits := len(x.String())
		if x.Sign() < 0 {
			digits--
		}
		return cpython.HugeInt{Negative: x.Sign() < 0, Digits: digits}, true
	}
	return cpython.HugeInt{}, false
}

// finiteNumber returns "must be ..." errors so callers can prefix the subject.
func finiteNumber(v any) (float64, error) {
	if b, isBool := v.(bool); isBool {
		return 0, fmt.Errorf("must be a number, got bool %s (bool is not a number here)", pyBool(b))
	}
	f, ok := number(v)
	if !ok {
		return 0, fmt.Errorf("must be a number, got %s", describe(v))
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		if h, isInt := bigInt(v); isInt {
			return 0, fmt.Errorf("must be a finite number, got %s (too large for a float)", h)
		}
		return 0, fmt.Errorf("must be a finite number, got %s", describe(v))
	}
	return f, nil
}

// jsonValue converts a decoded value to one encoding/json writes as Python's
// json.dumps would, or says why it cannot.
func jsonValue(v any, depth int) (any, string) {
	if depth > 64 {
		return nil, "nested too deeply"
	}
	switch x := v.(type) {
	case nil, bool, string, int64:
		return x, ""
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, fmt.Sprintf("%s is not valid JSON", describe(x))
		}
		return x, ""
	case *big.Int:
		return json.Number(x.String()), ""
	case cpython.HugeInt:
		return nil, fmt.Sprintf("%s is longer than Python writes as text (sys.get_int_max_str_digits())", x)
	case []any:
		return jsonList(x, depth)
	case cpython.Tuple:
		return jsonList(x, depth)
	case *cpython.Dict:
		m := make(map[string]any, len(x.Keys))
		for i, k := range x.Keys {
			name, ok := k.(string)
			if !ok {
				return nil, fmt.Sprintf("a dict key is %s, not str", describe(k))
			}
			val, why := jsonValue(x.Values[i], depth+1)
			if why != "" {
				return nil, why
			}
			m[name] = val
		}
		return m, ""
	}
	return nil, fmt.Sprintf("%s is not JSON-serialisable", typeName(v))
}

func jsonList(items []any, depth int) (any, string) {
	out := make([]any, len(items))
	for i, it := range items {
		val, why := jsonValue(it, depth+1)
		if why != "" {
			return nil, why
		}
		out[i] = val
	}
	return out, ""
}

// typeName is the Python type name of a decoded value.
func typeName(v any) string {
	switch x := v.(type) {
	case nil:
		return "NoneType"
	case bool:
		return "bool"
	case int64, *big.Int, cpython.HugeInt:
		return "int"
	case float64:
		return "float"
	case string:
		return "str"
	case []byte:
		return "bytes"
	case []any:
		return "list"
	case cpython.Tuple:
		return "tuple"
	case *cpython.Dict:
		return "dict"
	case cpython.Foreign:
		return x.Type
	}
	return fmt.Sprintf("%T", v)
}

// describe names a value for a message the way a Python user reads it:
// "str '0.8'", "float 0.8", "tuple of 3 items", "dict with keys 'a', 'b'".
func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "None"
	case bool:
		return "bool " + pyBool(x)
	case int64:
		return "int " + strconv.FormatInt(x, 10)
	case *big.Int:
		return "int " + truncate(x.String(), 40)
	case cpython.HugeInt: // "int of 100001 digits", as "tuple of 3 items"
		s := x.String()
		return s[strings.IndexByte(s, ' ')+1:]
	case float64:
		return "float " + pyFloat(x)
	case string:
		return "str " + pyRepr(truncate(x, 60))
	case []byte:
		return fmt.Sprintf("bytes of length %d", len(x))
	case []any:
		return fmt.Sprintf("list of %d item%s", len(x), plural(len(x)))
	case cpython.Tuple:
		return fmt.Sprintf("tuple of %d item%s", len(x), plural(len(x)))
	case *cpython.Dict:
		if len(x.Keys) == 0 {
			return "empty dict"
		}
		keys := make([]string, 0, 4)
		for i, k := range x.Keys {
			if i == 4 {
				keys = append(keys, "...")
				break
			}
			if s, ok := k.(string); ok {
				keys = append(keys, pyRepr(truncate(s, 30)))
			} else {
				keys = append(keys, typeName(k))
			}
		}
		return "dict with keys " + strings.Join(keys, ", ")
	case cpython.Foreign:
		return x.Type + " " + truncate(x.Repr, 60)
	}
	return fmt.Sprintf("%T", v)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func pyBool(b bool) string {
	if b {
		return "True"
	}
	return "False"
}

// pyFloat prints a float as Python's repr does for the common cases.
func pyFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".eIn") {
		s += ".0"
	}
	return s
}

// pyRepr quotes s as Python's repr does for ordinary strings.
func pyRepr(s string) string {
	q := strconv.Quote(s)
	inner := q[1 : len(q)-1]
	if !strings.Contains(s, "'") {
		inner = strings.ReplaceAll(inner, `\"`, `"`)
		return "'" + inner + "'"
	}
	if !strings.Contains(s, `"`) {
		return q
	}
	return "'" + strings.ReplaceAll(strings.ReplaceAll(inner, `\"`, `"`), "'", `\'`) + "'"
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "..."
}
