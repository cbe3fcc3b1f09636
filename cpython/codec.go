package cpython

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"slices"
	"strconv"
	"unicode/utf8"
)

// The value buffer carries Python values across the cgo boundary in one piece.
// Each value is a tag byte followed by its payload; lengths and counts are
// unsigned LEB128 varints (encoding/binary's Uvarint), fixed-size numbers are
// 8 bytes little-endian:
//
//	'N' None   'T' True   'F' False
//	'i' int    int64
//	'I' int    varint length + ASCII decimal digits (beyond int64)
//	'H' int    (Python to Go only) an int too long for str(): a flags byte
//	           (1 negative, 2 digit count estimated), varint decimal digits
//	'f' float  float64 bits
//	's' str    varint length + UTF-8 (lone surrogates as WTF-8 from JSON escapes)
//	'y' bytes  varint length + bytes
//	'l' list, 't' tuple   varint count + that many values
//	'd' dict   varint count + that many key, value pairs, in insertion order
//	'o' other  (Python to Go only) type name and repr, each varint length + UTF-8
//	'R' score pair (Python to Go only): float64 score, feedback str, varint
//	    count + that many (name str, float64) named scores; see ScorePair
//
// Go encodes (Encoder) and C decodes (codec.c) the arguments of a call; C
// encodes and Go decodes (Decode) its result.

// Tuple is a Python tuple.
type Tuple []any

// Dict is a Python dict in insertion order; keys may be any decoded value.
type Dict struct {
	Keys   []any // the keys, in insertion order
	Values []any // Values[i] is the value of Keys[i]
}

// Get returns the value for a str key.
func (d *Dict) Get(key string) (any, bool) {
	for i, k := range d.Keys {
		if s, ok := k.(string); ok && s == key {
			return d.Values[i], true
		}
	}
	return nil, false
}

// Foreign is a Python value with no Go counterpart, known by its type name
// and a (bounded) repr.
type Foreign struct {
	Type string // the Python type's name, e.g. "set"
	Repr string // repr(value), cut to at most 200 bytes
}

// ScorePair is a score function's return value in its common shape,
// (number, {"feedback": str[, "scores": {str: number}]}) with every number
// finite, recognised and packed by C so the hot path skips a generic decode.
type ScorePair struct {
	Score    float64            // the first element
	Feedback string             // the side info's "feedback"
	Scores   map[string]float64 // nil when the side info has no "scores"
	Names    []string           // Scores' names in the order the metric gave them
}

// PythonType returns the Python type name, for messages.
func (f Foreign) PythonType() string { return f.Type }

// HugeInt is a Python int with more digits than Python converts to decimal
// text (sys.get_int_max_str_digits(), 4300 by default): only its sign and
// size cross the boundary. Past 300,000 digits the count may be off by one
// (String then says "about").
type HugeInt struct {
	Negative bool // the int is below zero
	Digits   int  // its count of decimal digits
	about    bool // Digits is an estimate, possibly off by one
}

// PythonType returns "int", for messages.
func (HugeInt) PythonType() string { return "int" }

// String describes the int: "an int of 100001 digits", "a negative int of
// about 1204120 digits".
func (h HugeInt) String() string {
	s := "an int of "
	if h.Negative {
		s = "a negative int of "
	}
	if h.about {
		s += "about "
	}
	return s + strconv.Itoa(h.Digits) + " digits"
}

// Plain converts decoded values to the shapes encoding/json and most Go code
// read: str-keyed dicts become map[string]any (other keys are dropped) and
// tuples become []any. Other values are returned as they are.
func Plain(v any) any {
	switch x := v.(type) {
	case *Dict:
		m := make(map[string]any, len(x.Keys))
		for i, k := range x.Keys {
			if s, ok := k.(string); ok {
				m[s] = Plain(x.Values[i])
			}
		}
		return m
	case []any:
		out := make([]any, len(x))
		for i := range x {
			out[i] = Plain(x[i])
		}
		return out
	case Tuple:
		return Plain([]any(x))
	}
	return v
}

// maxDepth bounds nesting on both sides; C uses the same limit.
const maxDepth = 256

// Encoder builds a value buffer: the encoded arguments of a call. The zero
// value is ready to use; Bytes returns what was built.
type Encoder struct {
	buf []byte
}

// Bytes returns the buffer built so far.
func (e *Encoder) Bytes() []byte { return e.buf }

// reset empties the buffer, keeping its memory.
func (e *Encoder) reset() { e.buf = e.buf[:0] }

// Value appends a Go value: nil, bool, integers, floats, string, []byte,
// []any, Tuple, map[string]any (keys sorted), *Dict, json.RawMessage (JSON
// text, key order kept), *Encoded (JSON already transcoded), json.Number,
// *big.Int, and slices and string-keyed maps of these.
func (e *Encoder) Value(v any) error {
	return e.value(v, 0)
}

// AppendValue appends the encoding of v to dst (see Encoder.Value). On
// error dst may hold part of it.
func AppendValue(dst []byte, v any) ([]byte, error) {
	e := Encoder{buf: dst}
	err := e.value(v, 0)
	return e.buf, err
}

// rawJSON appends one JSON text as a value, as Python's json.loads would build it.
func (e *Encoder) rawJSON(src []byte) error {
	out, err := AppendJSON(e.buf, src)
	if err != nil {
		return err
	}
	e.buf = out
	return nil
}

func (e *Encoder) tag(t byte) { e.buf = append(e.buf, t) }

func (e *Encoder) uvarint(n int) { e.buf = binary.AppendUvarint(e.buf, uint64(n)) }

func (e *Encoder) int64(v int64) {
	e.buf = append(e.buf, 'i')
	e.buf = binary.LittleEndian.AppendUint64(e.buf, uint64(v))
}

func (e *Encoder) float(v float64) {
	e.buf = append(e.buf, 'f')
	e.buf = binary.LittleEndian.AppendUint64(e.buf, math.Float64bits(v))
}

func (e *Encoder) str(tag byte, s string) {
	e.buf = append(e.buf, tag)
	e.uvarint(len(s))
	e.buf = append(e.buf, s...)
}

func (e *Encoder) value(v any, depth int) error {
	if depth > maxDepth {
		return errors.New("value nested too deeply")
	}
	switch x := v.(type) {
	case nil:
		e.tag('N')
	case bool:
		if x {
			e.tag('T')
		} else {
			e.tag('F')
		}
	case int:
		e.int64(int64(x))
	case int64:
		e.int64(x)
	case int32:
		e.int64(int64(x))
	case float64:
		e.float(x)
	case float32:
		e.float(float64(x))
	case string:
		if !utf8.ValidString(x) {
			return fmt.Errorf("string %q is not valid UTF-8", truncate(x, 40))
		}
		e.str('s', x)
	case []byte:
		e.str('y', string(x))
	case []any:
		e.tag('l')
		e.uvarint(len(x))
		for _, it := range x {
			if err := e.value(it, depth+1); err != nil {
				return err
			}
		}
	case Tuple:
		e.tag('t')
		e.uvarint(len(x))
		for _, it := range x {
			if err := e.value(it, depth+1); err != nil {
				return err
			}
		}
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys) // Go maps have no order; sorted keys keep runs repeatable
		e.tag('d')
		e.uvarint(len(keys))
		for _, k := range keys {
			if err := e.value(k, depth+1); err != nil {
				return err
			}
			if err := e.value(x[k], depth+1); err != nil {
				return fmt.Errorf("key %q: %w", k, err)
			}
		}
	case *Dict:
		if x == nil {
			e.tag('N')
			return nil
		}
		if len(x.Keys) != len(x.Values) {
			return errors.New("Dict has different numbers of keys and values")
		}
		e.tag('d')
		e.uvarint(len(x.Keys))
		for i := range x.Keys {
			if err := e.value(x.Keys[i], depth+1); err != nil {
				return err
			}
			if err := e.value(x.Values[i], depth+1); err != nil {
				return err
			}
		}
	case json.RawMessage:
		return e.rawJSON(x)
	case *Encoded:
		if x == nil || x.IsZero() {
			return errors.New("an empty cpython.Encoded")
		}
		e.buf = append(e.buf, x.b...)
	case json.Number:
		return e.number(string(x))
	case *big.Int:
		if x.IsInt64() {
			e.int64(x.Int64())
		} else {
			e.str('I', x.String())
		}
	case Foreign:
		return fmt.Errorf("cannot pass a %s value back into Python", x.Type)
	case HugeInt:
		return fmt.Errorf("cannot pass %s back into Python", x)
	default:
		return e.reflect(reflect.ValueOf(v), depth)
	}
	return nil
}

// reflect handles the remaining integer kinds and typed slices and maps.
func (e *Encoder) reflect(rv reflect.Value, depth int) error {
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		e.int64(rv.Int())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		u := rv.Uint()
		if u <= math.MaxInt64 {
			e.int64(int64(u))
		} else {
			e.str('I', strconv.FormatUint(u, 10))
		}
	case reflect.Float32, reflect.Float64:
		e.float(rv.Float())
	case reflect.String:
		return e.value(rv.String(), depth)
	case reflect.Bool:
		return e.value(rv.Bool(), depth)
	case reflect.Slice, reflect.Array:
		if rv.Kind() == reflect.Slice && rv.IsNil() {
			e.tag('N')
			return nil
		}
		e.tag('l')
		e.uvarint(rv.Len())
		for i := 0; i < rv.Len(); i++ {
			if err := e.value(rv.Index(i).Interface(), depth+1); err != nil {
				return err
			}
		}
	case reflect.Map:
		if rv.Type().Key().Kind() != reflect.String {
			return fmt.Errorf("cannot convert %s: map keys must be strings", rv.Type())
		}
		if rv.IsNil() {
			e.tag('N')
			return nil
		}
		keys := rv.MapKeys()
		slices.SortFunc(keys, func(a, b reflect.Value) int {
			if a.String() < b.String() {
				return -1
			}
			if a.String() > b.String() {
				return 1
			}
			return 0
		})
		e.tag('d')
		e.uvarint(len(keys))
		for _, k := range keys {
			if err := e.value(k.String(), depth+1); err != nil {
				return err
			}
			if err := e.value(rv.MapIndex(k).Interface(), depth+1); err != nil {
				return err
			}
		}
	case reflect.Pointer, reflect.Interface:
		if rv.IsNil() {
			e.tag('N')
			return nil
		}
		return e.value(rv.Elem().Interface(), depth)
	default:
		return fmt.Errorf("cannot convert a Go %s to a Python value", rv.Type())
	}
	return nil
}

// number appends a JSON number literal: an int when it has no fraction or
// exponent (any size, as Python's json does), else a float.
func (e *Encoder) number(lit string) error {
	isInt := true
	for i := 0; i < len(lit); i++ {
		if c := lit[i]; c == '.' || c == 'e' || c == 'E' {
			isInt = false
			break
		}
	}
	if isInt {
		if v, err := strconv.ParseInt(lit, 10, 64); err == nil {
			e.int64(v)
			return nil
		}
		if _, ok := new(big.Int).SetString(lit, 10); !ok || len(lit) > 4000 {
			return fmt.Errorf("invalid integer %q", truncate(lit, 40))
		}
		e.str('I', lit)
		return nil
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) { // out of range is ±inf, as in Python
		return fmt.Errorf("invalid number %q", truncate(lit, 40))
	}
	e.float(f)
	return nil
}

// Decode reads one value from a buffer written by C.
func Decode(b []byte) (any, error) {
	d := decoder{b: b}
	v, err := d.value(0)
	if err != nil {
		return nil, err
	}
	if d.i != len(d.b) {
		return nil, errors.New("value buffer: trailing bytes")
	}
	return v, nil
}

type decoder struct {
	b    []byte
	i    int
	strs func([]byte) string // makes strings (e.g. interning); nil: string(b)
}

var errTruncated = errors.New("value buffer: truncated")

func (d *decoder) uvarint() (int, error) {
	n, k := binary.Uvarint(d.b[d.i:])
	if k <= 0 || n > uint64(len(d.b)-d.i-k) {
		return 0, errTruncated
	}
	d.i += k
	return int(n), nil
}

func (d *decoder) str() (string, error) {
	n, err := d.uvarint()
	if err != nil {
		return "", err
	}
	var s string
	if d.strs != nil {
		s = d.strs(d.b[d.i : d.i+n])
	} else {
		s = string(d.b[d.i : d.i+n])
	}
	d.i += n
	return s, nil
}

func (d *decoder) u64() (uint64, error) {
	if len(d.b)-d.i < 8 {
		return 0, errTruncated
	}
	v := binary.LittleEndian.Uint64(d.b[d.i:])
	d.i += 8
	return v, nil
}

func (d *decoder) value(depth int) (any, error) {
	if depth > maxDepth+1 {
		return nil, errors.New("value buffer: nested too deeply")
	}
	if d.i >= len(d.b) {
		return nil, errTruncated
	}
	tag := d.b[d.i]
	d.i++
	switch tag {
	case 'N':
		return nil, nil
	case 'T':
		return true, nil
	case 'F':
		return false, nil
	case 'i':
		u, err := d.u64()
		return int64(u), err
	case 'f':
		u, err := d.u64()
		return math.Float64frombits(u), err
	case 'I':
		s, err := d.str()
		if err != nil {
			return nil, err
		}
		n, ok := new(big.Int).SetString(s, 10)
		if !ok {
			return nil, fmt.Errorf("value buffer: bad big int %q", truncate(s, 40))
		}
		return n, nil
	case 'H':
		if len(d.b)-d.i < 1 {
			return nil, errTruncated
		}
		flags := d.b[d.i]
		d.i++
		n, k := binary.Uvarint(d.b[d.i:])
		if k <= 0 || flags > 3 || n > math.MaxInt {
			return nil, errors.New("value buffer: bad huge int")
		}
		d.i += k
		return HugeInt{Negative: flags&1 != 0, Digits: int(n), about: flags&2 != 0}, nil
	case 's':
		return d.str()
	case 'y':
		s, err := d.str()
		return []byte(s), err
	case 'l', 't':
		n, err := d.uvarint()
		if err != nil {
			return nil, err
		}
		items := make([]any, n)
		for i := range items {
			if items[i], err = d.value(depth + 1); err != nil {
				return nil, err
			}
		}
		if tag == 't' {
			return Tuple(items), nil
		}
		return items, nil
	case 'd':
		n, err := d.uvarint()
		if err != nil {
			return nil, err
		}
		dict := &Dict{Keys: make([]any, n), Values: make([]any, n)}
		for i := 0; i < n; i++ {
			if dict.Keys[i], err = d.value(depth + 1); err != nil {
				return nil, err
			}
			if dict.Values[i], err = d.value(depth + 1); err != nil {
				return nil, err
			}
		}
		return dict, nil
	case 'R':
		p, err := d.scorePair()
		if err != nil {
			return nil, err
		}
		return &p, nil
	case 'o':
		t, err := d.str()
		if err != nil {
			return nil, err
		}
		r, err := d.str()
		return Foreign{Type: t, Repr: r}, err
	}
	return nil, fmt.Errorf("value buffer: unknown tag %q", tag)
}

// DecodeScorePair reads an outcome holding a ScorePair record without
// boxing it; ok is false when b holds another value. strs, when set, makes
// the feedback and score-name strings, so repeated ones can be shared.
func DecodeScorePair(b []byte, strs func([]byte) string) (p ScorePair, ok bool, err error) {
	if len(b) == 0 || b[0] != 'R' {
		return p, false, nil
	}
	// The usual record, a short feedback and no named scores, read directly:
	// this runs once per case on the stream's thread.
	if len(b) >= 11 && b[9] < 0x80 && int(b[9])+11 == len(b) && b[len(b)-1] == 0 {
		p.Score = math.Float64frombits(binary.LittleEndian.Uint64(b[1:9]))
		if text := b[10 : len(b)-1]; strs != nil {
			p.Feedback = strs(text)
		} else {
			p.Feedback = string(text)
		}
		return p, true, nil
	}
	d := decoder{b: b, i: 1, strs: strs}
	if p, err = d.scorePair(); err != nil {
		return p, false, err
	}
	if d.i != len(b) {
		return p, false, errors.New("value buffer: trailing bytes")
	}
	return p, true, nil
}

func (d *decoder) scorePair() (p ScorePair, err error) {
	bits, err := d.u64()
	if err != nil {
		return p, err
	}
	p.Score = math.Float64frombits(bits)
	if p.Feedback, err = d.str(); err != nil {
		return p, err
	}
	n, err := d.uvarint()
	if err != nil {
		return p, err
	}
	if n > 0 {
		p.Scores = make(map[string]float64, n)
		p.Names = make([]string, 0, min(n, len(d.b)))
		for i := 0; i < n; i++ {
			name, err := d.str()
			if err != nil {
				return p, err
			}
			v, err := d.u64()
			if err != nil {
				return p, err
			}
			if _, dup := p.Scores[name]; !dup {
				p.Names = append(p.Names, name)
			}
			p.Scores[name] = math.Float64frombits(v)
		}
	}
	return p, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}
