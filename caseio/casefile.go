package caseio

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/skynetml/skynet/cpython"
	"github.com/skynetml/skynet/engine"
)

// LineError is a case-file line that is not a valid case. Reading can go
// on after one: the caller gives the line an input error (engine.InvalidCase).
type LineError struct {
	Line int    // 1-based line number in the file
	Msg  string // what is wrong with the line
	// ID is the case's id when it could be read from the line before the
	// problem (a line past the cap whose "id" comes first); "" when not:
	// the case is then named by its line number.
	ID string
}

// CaseID is the id a run gives the line's case: ID, else the line number.
func (e *LineError) CaseID() string {
	if e.ID != "" {
		return e.ID
	}
	return strconv.Itoa(e.Line)
}

// Error is "line N: what is wrong".
func (e *LineError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Msg) }

// ParseCase reads one case-file line (SPEC §4):
//
//	{"id": "...", "input": {...}, "output": <any>, "expected": {...} | null,
//	 "observation": {"run_ms": n, "cost_usd": n}}
//
// id and observation are optional; a missing id becomes the line number.
// Values stay JSON text (json.RawMessage) until they are handed to Python:
// they are sub-slices of line, so line must not be reused while the Case
// is (Reader gives each line memory of its own).
func ParseCase(line []byte, lineNo int) (engine.Case, error) {
	return parseCase(line, lineNo, nil)
}

// Transcoder parses case lines as ParseCase does, transcoding the values
// Python is handed (input, output, expected) in the same pass: its Cases
// hold them as *cpython.Encoded, which the engine copies into a batch
// without reading the JSON again (a worker's cases). Their memory is shared
// in chunks, as Arena's; a Case's values stay valid while the Case is held.
// Not safe for concurrent use.
type Transcoder struct {
	out  []byte            // encodings, a chunk at a time
	vals []cpython.Encoded // what a Case's values point at, a chunk at a time
}

// ParseCase is ParseCase's Case, with Input, Output and Expected (when not
// null) transcoded. Its errors are ParseCase's.
func (t *Transcoder) ParseCase(line []byte, lineNo int) (engine.Case, error) {
	return parseCase(line, lineNo, t)
}

// transcoded names the members a Transcoder transcodes.
func transcoded(key string) bool { return key == "input" || key == "output" || key == "expected" }

// split is SplitObject, transcoding into t's chunk when t is set.
func (t *Transcoder) split(line []byte, members []cpython.Member) ([]cpython.Member, error) {
	if t == nil {
		return cpython.SplitObject(line, members)
	}
	const chunk = 64 << 10
	if 2*len(line) > chunk/4 {
		// A long line gets memory of its own, as in an Arena: the chunk
		// would keep it alive for all the short lines after it.
		members, _, err := cpython.SplitObjectEncoding(line, members, make([]byte, 0, 2*len(line)), transcoded)
		return members, err
	}
	if cap(t.out)-len(t.out) < 2*len(line) {
		// An encoding is seldom longer than its text; a longer one only
		// grows (copies) the chunk, whose earlier values keep the old one.
		t.out = make([]byte, 0, chunk)
	}
	members, out, err := cpython.SplitObjectEncoding(line, members, t.out, transcoded)
	t.out = out
	return members, err
}

// value is where a Case holds m's encoding.
func (t *Transcoder) value(m cpython.Member) *cpython.Encoded {
	if len(t.vals) == cap(t.vals) {
		t.vals = make([]cpython.Encoded, 0, 768)
	}
	t.vals = append(t.vals, m.Encoded)
	return &t.vals[len(t.vals)-1]
}

func parseCase(line []byte, lineNo int, t *Transcoder) (engine.Case, error) {
	var c engine.Case
	hasID := false // else the id is the line number, made only then
	fail := func(format string, args ...any) (engine.Case, error) {
		if !hasID {
			c.ID = strconv.Itoa(lineNo)
		}
		return c, &LineError{Line: lineNo, Msg: fmt.Sprintf(format, args...)}
	}
	// Only a line that fails can be other than UTF-8: SplitObject accepts
	// none (its strings are checked, and nothing else may be non-ASCII).
	if kind := jsonKind(line); kind != "an object" {
		if at := invalidUTF8(line); at >= 0 {
			return fail("%s", utf8Message(line, at))
		}
		if _, err := cpython.AppendJSON(nil, line); err != nil {
			return fail("%v", err)
		}
		return fail("a case must be a JSON object, got %s", kind)
	}
	var buf [5]cpython.Member
	members, err := t.split(line, buf[:0])
	if err != nil {
		// Not a case, but its result still carries the id when one can be
		// read before the problem, so that fixing the line and resuming
		// finds the case by it.
		end, msg := len(line), err.Error()
		if at := invalidUTF8(line); at >= 0 {
			end, msg = at, utf8Message(line, at)
		}
		if id := IDBefore(line[:end], lineNo); id != "" {
			c.ID, hasID = id, true
		}
		return fail("%s", msg)
	}
	// The id first, so that a bad line's error carries it wherever it is
	// in the line (QuickID finds the same one).
	for _, m := range members {
		if m.Key == "id" {
			id, msg := caseID(m.Value, lineNo)
			if msg != "" {
				return fail("%s", msg)
			}
			c.ID, hasID = id, true
		}
	}
	if !hasID {
		c.ID, hasID = strconv.Itoa(lineNo), true
	}
	var input, output, expected, observation json.RawMessage
	var inputAt, outputAt, expectedAt int // their members, for a Transcoder
	for i, m := range members {
		switch m.Key {
		case "id":
		case "input":
			input, inputAt = m.Value, i
		case "output":
			output, outputAt = m.Value, i
		case "expected":
			expected, expectedAt = m.Value, i
		case "observation":
			observation = m.Value
		default:
			return fail("unknown field %q (a case has id, input, output, expected, observation)", m.Key)
		}
	}
	if input == nil {
		return fail(`"input" is missing`)
	}
	if jsonKind(input) != "an object" {
		return fail(`"input" must be an object of input fields, got %s`, jsonKind(input))
	}
	if output == nil {
		return fail(`"output" is missing`)
	}
	hasExpected := expected != nil && jsonKind(expected) != "null"
	if hasExpected && jsonKind(expected) != "an object" {
		return fail(`"expected" must be an object of output columns or null, got %s`, jsonKind(expected))
	}
	if t != nil {
		c.Input, c.Output = t.value(members[inputAt]), t.value(members[outputAt])
		if hasExpected {
			c.Expected = t.value(members[expectedAt])
		}
	} else {
		c.Input, c.Output = input, output
		if hasExpected {
			c.Expected = expected
		}
	}
	if observation != nil && jsonKind(observation) != "null" {
		o, msg := parseObservation(observation)
		if msg != "" {
			return fail("%s", msg)
		}
		c.Observation = o
	}
	return c, nil
}

// obsField is an observation field of a case line: its unit, for
// messages, and whether it counts (a whole number).
type obsField struct {
	name, unit string
	count      bool
}

var observationFields = []obsField{
	{"run_ms", "a number of milliseconds", false},
	{"cost_usd", "a number of US dollars", false},
	{"model_calls", "a whole number of calls", true},
	{"input_tokens", "a whole number of tokens", true},
	{"output_tokens", "a whole number of tokens", true},
}

// parseObservation reads a case line's "observation" object; msg says,
// in the case file's terms (not Go's), what is wrong with it.
func parseObservation(raw []byte) (o engine.Observation, msg string) {
	known := make([]string, len(observationFields))
	for i, f := range observationFields {
		known[i] = f.name
	}
	if kind := jsonKind(raw); kind != "an object" {
		return o, fmt.Sprintf(`"observation" must be an object (of %s), got %s`, strings.Join(known, ", "), kind)
	}
	members, err := cpython.SplitObject(raw, nil)
	if err != nil {
		return o, fmt.Sprintf(`"observation": %v`, err)
	}
	for _, m := range members {
		i := slices.IndexFunc(observationFields, func(f obsField) bool { return f.name == m.Key })
		if i < 0 {
			return o, fmt.Sprintf("unknown field observation.%s (known fields: %s)", m.Key, strings.Join(known, ", "))
		}
		f := observationFields[i]
		kind := jsonKind(m.Value)
		if kind == "null" {
			continue // not measured
		}
		bad := func(got string) (engine.Observation, string) {
			return engine.Observation{}, fmt.Sprintf("observation.%s must be %s, got %s", f.name, f.unit, got)
		}
		if kind != "a number" {
			return bad(kind)
		}
		if f.count {
			v, err := strconv.ParseInt(string(m.Value), 10, 64)
			if err != nil {
				return bad(string(m.Value))
			}
			if v < 0 {
				return bad(fmt.Sprintf("%d (it must be >= 0)", v))
			}
			switch f.name {
			case "model_calls":
				o.ModelCalls = &v
			case "input_tokens":
				o.InputTokens = &v
			default:
				o.OutputTokens = &v
			}
			continue
		}
		v, err := strconv.ParseFloat(string(m.Value), 64)
		if err != nil || math.IsInf(v, 0) {
			return bad(string(m.Value) + " (out of range)")
		}
		if v < 0 {
			return bad(fmt.Sprintf("%v (it must be >= 0)", v))
		}
		if f.name == "run_ms" {
			o.RunMS = &v
		} else {
			o.CostUSD = &v
		}
	}
	return o, ""
}

// loneSurrogate returns the first \uXXXX escape in a JSON string that is a
// UTF-16 surrogate outside a high-low pair, as written, or "".
func loneSurrogate(str []byte) string {
	hex4 := func(i int) (rune, bool) { // the escape \uXXXX at str[i:]
		if i+6 > len(str) || str[i] != '\\' || str[i+1] != 'u' {
			return 0, false
		}
		v, err := strconv.ParseUint(string(str[i+2:i+6]), 16, 16)
		return rune(v), err == nil
	}
	for i := 0; i < len(str); i++ {
		if str[i] != '\\' {
			continue
		}
		r, ok := hex4(i)
		if !ok {
			i++ // a one-character escape: \" \\ \n ...
			continue
		}
		switch {
		case r >= 0xD800 && r < 0xDC00:
			if lo, ok := hex4(i + 6); ok && lo >= 0xDC00 && lo < 0xE000 {
				i += 11 // a pair
				continue
			}
			return string(str[i : i+6])
		case r >= 0xDC00 && r < 0xE000:
			return string(str[i : i+6])
		}
		i += 5
	}
	return ""
}

// IDBefore is the id a line gives in its first bytes, prefix (all of a
// line that breaks off, the part of one before a bad byte or past the
// cap), or "" when no whole "id" member is read there.
func IDBefore(prefix []byte, lineNo int) string {
	raw, _ := scanID(prefix)
	if raw == nil || !json.Valid(raw) {
		return ""
	}
	// A number at the very end may go on past the prefix: 12 of 123.
	if end := cap(prefix) - cap(raw) + len(raw); end >= len(prefix) && jsonKind(raw) == "a number" {
		return ""
	}
	id, msg := caseID(raw, lineNo)
	if msg != "" {
		return ""
	}
	return id
}

// invalidUTF8 is the offset of line's first byte that is not valid UTF-8, or -1.
func invalidUTF8(line []byte) int {
	for i := 0; i < len(line); {
		if line[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, size := utf8.DecodeRune(line[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return -1
}

// utf8Message says where a line stops being UTF-8, and the likely cause.
func utf8Message(line []byte, at int) string {
	return fmt.Sprintf("not valid UTF-8: byte 0x%02X at byte %d of the line (a file saved in another encoding, such as Latin-1 or UTF-16? iconv -f LATIN1 -t UTF-8 converts one)", line[at], at+1)
}

// caseID is the id a case line's "id" value gives: a string's text, a
// number's digits, the line number for null; msg says why it is not one.
func caseID(v []byte, lineNo int) (id, msg string) {
	switch jsonKind(v) {
	case "a string":
		if raw := v[1 : len(v)-1]; bytes.IndexByte(raw, '\\') < 0 {
			return string(raw), "" // without escapes it is its own text
		}
		if esc := loneSurrogate(v); esc != "" {
			// encoding/json would make it U+FFFD: two such ids would
			// collide, and the results would not hold the data's id.
			return "", fmt.Sprintf(`"id" is not valid Unicode: it holds a lone surrogate %s (half of a UTF-16 pair), which results cannot write back as it is`, esc)
		}
		var id string
		if err := json.Unmarshal(v, &id); err != nil {
			return "", fmt.Sprintf(`"id": %v`, err)
		}
		return id, ""
	case "a number":
		return string(v), ""
	case "null":
		return strconv.Itoa(lineNo), ""
	}
	return "", fmt.Sprintf(`"id" must be a string or a number, got %s`, jsonKind(v))
}

// QuickID finds the id ParseCase gives a line, without reading the rest of
// it, for a reader that keeps ids apart while another process parses the
// cases (pool.LineTask). ok is false when the line is not plainly
// an object with a usable id (ParseCase then says why); a line it finds an
// id in may still be a bad case.
func QuickID(line []byte, lineNo int) (id string, ok bool) {
	value, whole := scanID(line)
	if !whole {
		return "", false
	}
	if value == nil {
		return strconv.Itoa(lineNo), true
	}
	id, msg := caseID(value, lineNo)
	return id, msg == ""
}

// LineID is the id a run gives the case of a line Reader.NextLine
// returned (raw), or of one it returned a *LineError for (lineErr): the
// line's id, else its number, as the case's result is named.
func LineID(raw []byte, lineNo int, lineErr error) string {
	if le, ok := lineErr.(*LineError); ok {
		return le.CaseID()
	}
	if id, ok := QuickID(raw, lineNo); ok {
		return id
	}
	c, _ := ParseCase(raw, lineNo)
	return c.ID
}

// scanID finds the raw JSON value of a line's top-level "id" member
// (nil if it has none before the scan stops) and says whether the line is
// plainly a whole object. value can be set while whole is false: the id
// of a line that breaks off after it.
func scanID(line []byte) (value []byte, whole bool) {
	n := len(line)
	i := skipSpace(line, 0)
	if i >= n || line[i] != '{' {
		return nil, false
	}
	i++
	for first := true; ; first = false {
		i = skipSpace(line, i)
		if first && i < n && line[i] == '}' {
			break
		}
		if i >= n || line[i] != '"' {
			return value, false
		}
		k := i + 1
		if i = stringEnd(line, i); i < 0 {
			return value, false
		}
		key := line[k : i-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			return value, false // an escaped key: leave it to ParseCase
		}
		i = skipSpace(line, i)
		if i >= n || line[i] != ':' {
			return value, false
		}
		i = skipSpace(line, i+1)
		v := i
		var ok bool
		if i, ok = skipValue(line, i); !ok {
			return value, false
		}
		if string(key) == "id" {
			value = line[v:i]
		}
		i = skipSpace(line, i)
		if i < n && line[i] == ',' {
			i++
			continue
		}
		if i < n && line[i] == '}' {
			break
		}
		return value, false
	}
	return value, true
}

// skipSpace is the offset of the first byte from i that is not JSON space.
func skipSpace(line []byte, i int) int {
	for i < len(line) && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r' || line[i] == '\n') {
		i++
	}
	return i
}

// skipValue passes over the value at i, as scanID sees one (strings whole,
// containers by their brackets, anything else up to a delimiter), and says
// whether it looked whole; at the line's end when it did not.
func skipValue(line []byte, i int) (int, bool) {
	n := len(line)
	if i >= n {
		return n, false
	}
	switch line[i] {
	case '"':
		if i = stringEnd(line, i); i < 0 {
			return n, false
		}
		return i, true
	case '{', '[':
		depth := 0
		for ; i < n; i++ {
			switch line[i] {
			case '"':
				if i = stringEnd(line, i); i < 0 {
					return n, false
				}
				i-- // the loop steps past the closing quote
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1, true
				}
			}
		}
		return n, false
	}
	start := i
	for i < n && line[i] != ',' && line[i] != '}' && line[i] != ' ' && line[i] != '\t' && line[i] != '\r' && line[i] != '\n' {
		i++
	}
	return i, i > start
}

// stringEnd is the offset just past the JSON string whose opening quote is
// at line[i], or -1 when the line ends first. A quote closes it when an even
// number of backslashes come before it; IndexByte finds the quotes, several
// bytes at a time (a case's strings are most of its line).
func stringEnd(line []byte, i int) int {
	for j := i + 1; ; {
		k := bytes.IndexByte(line[j:], '"')
		if k < 0 {
			return -1
		}
		q := j + k
		b := q - 1
		for b > i && line[b] == '\\' {
			b--
		}
		if j = q + 1; (q-1-b)%2 == 0 {
			return j
		}
	}
}

// jsonKind names the kind of a valid JSON text by its first byte.
func jsonKind(raw json.RawMessage) string {
	for len(raw) > 0 && (raw[0] == ' ' || raw[0] == '\t' || raw[0] == '\r' || raw[0] == '\n') {
		raw = raw[1:] // bytes.TrimLeft builds its set of bytes each call
	}
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 'n':
		return "null"
	case 't', 'f':
		return "a boolean"
	}
	return "a number"
}

// DefaultMaxLineBytes is the longest case line a Reader reads when its
// MaxLineBytes is not set: 64 MiB.
const DefaultMaxLineBytes = 64 << 20

// utf8BOM is the byte order mark some editors put at the start of a file.
var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// Reader reads a JSONL case file line by line. A UTF-8 byte order mark
// at the start of the stream is skipped. Blank lines (nothing but JSON
// whitespace: space, tab, CR, LF) are not cases and are passed over; every
// other line yields an engine.Case or a *LineError.
type Reader struct {
	// MaxLineBytes caps the length of a line, its newline not counted; 0
	// means DefaultMaxLineBytes. A longer line is a *LineError, returned as
	// soon as the cap is passed; the rest of the line is then discarded, in
	// bounded memory, by the next call of Next. Set it before the first Next.
	MaxLineBytes int

	r        *bufio.Reader
	line     int
	long     []byte // a line longer than the bufio buffer, gathered here
	skipping bool   // the current line passed the cap: skip to its newline
	lines    Arena  // the lines' own memory
}

// NewReader reads cases from r.
func NewReader(r io.Reader) *Reader {
	size := 1 << 16
	// Bytes in memory (a request's body) need no more buffer than they
	// are: a one-case request should not cost a 64 KiB allocation.
	if m, ok := r.(interface{ Len() int }); ok && m.Len() < size {
		size = m.Len() + 1
	}
	return &Reader{r: bufio.NewReaderSize(r, size), lines: Arena{Size: size}}
}

// Arena copies byte strings into shared chunks, so that copying many short
// lines costs an allocation a chunk rather than one a line (a tenth of a
// cheap case's allocations). A chunk stays in memory while any copy made in
// it does. Not safe for concurrent use.
type Arena struct {
	Size  int // of a chunk; 0 means 64 KiB. A string over a quarter of it gets memory of its own
	chunk []byte
}

// Copy returns a copy of b, as append([]byte(nil), b...) does. Its
// capacity is its length: appending to it never writes over the next copy.
func (a *Arena) Copy(b []byte) []byte {
	size := a.Size
	if size <= 0 {
		size = 64 << 10
	}
	if len(b) == 0 || len(b) > size/4 {
		return append([]byte(nil), b...)
	}
	if cap(a.chunk)-len(a.chunk) < len(b) {
		a.chunk = make([]byte, 0, size)
	}
	start := len(a.chunk)
	a.chunk = append(a.chunk, b...)
	return a.chunk[start:len(a.chunk):len(a.chunk)]
}

// Next returns the next case. At the end it returns io.EOF; a read failure is
// returned as is (a line it cuts short is not parsed); a bad line is a
// *LineError, with the engine.Case's ID as far as it was read (else the line
// number), and reading can go on.
//
// A line that never ends (reading /dev/zero) gives its *LineError once
// MaxLineBytes have been read; calling Next again then discards the line
// for as long as it goes on, in bounded memory, so a caller that wants to
// stop should stop on that error.
func (cr *Reader) Next() (engine.Case, error) {
	line, err := cr.NextLine()
	if le, ok := err.(*LineError); ok {
		return engine.Case{ID: le.CaseID()}, le
	}
	if err != nil {
		return engine.Case{}, err
	}
	return ParseCase(line, cr.line)
}

// NextLine is Next without parsing: the next line that is not blank,
// without its surrounding whitespace (a *LineError when it is too long),
// for ParseCase or QuickID with Line.
func (cr *Reader) NextLine() ([]byte, error) {
	for {
		if cr.skipping {
			if err := cr.skipLine(); err != nil {
				return nil, err
			}
		}
		line, err := cr.readLine()
		if _, ok := err.(*LineError); ok {
			return nil, err
		}
		if line == nil {
			return nil, err
		}
		trimmed := trimJSONSpace(line) // a U+00A0 line is a bad case, not blank
		if len(trimmed) == 0 {
			if err != nil {
				return nil, err
			}
			continue
		}
		return trimmed, nil
	}
}

// readLine reads the next line, newline included, into memory of its own
// (ParseCase's engine.Case points into it). It returns a nil line with the error
// at the end of input or on a read failure, a *LineError when the line
// passes the cap, and the last line with io.EOF when it has no newline.
func (cr *Reader) readLine() ([]byte, error) {
	max := cr.MaxLineBytes
	if max <= 0 {
		max = DefaultMaxLineBytes
	}
	cr.long = cr.long[:0]
	for first := true; ; first = false {
		frag, err := cr.r.ReadSlice('\n')
		if first && cr.line == 0 {
			frag = bytes.TrimPrefix(frag, utf8BOM) // at the start of the stream only
		}
		if err != nil && err != bufio.ErrBufferFull && (err != io.EOF || first && len(frag) == 0) {
			return nil, err // a read failure cuts the line short: it is not a line
		}
		if first {
			cr.line++
		}
		n := len(cr.long) + len(frag)
		if err == nil {
			n-- // the newline does not count
		}
		if n > max {
			// Say so now, before the rest of the line arrives (if it ever
			// does); the next Next skips it. Its id, when it comes first,
			// still names its result.
			cr.skipping = err == bufio.ErrBufferFull
			prefix := frag
			if len(cr.long) > 0 {
				prefix = append(cr.long, frag...)
			}
			id := IDBefore(trimJSONSpace(prefix[:min(len(prefix), max)]), cr.line)
			cr.long = cr.long[:0]
			cr.shrink()
			return nil, &LineError{Line: cr.line, ID: id, Msg: fmt.Sprintf("longer than %d bytes, the case-line limit (--max-line-bytes raises it)", max)}
		}
		if err == bufio.ErrBufferFull {
			cr.long = append(cr.long, frag...)
			continue
		}
		if len(cr.long) == 0 {
			return cr.lines.Copy(frag), err // the usual line: a share of a chunk
		}
		line := append(append(make([]byte, 0, len(cr.long)+len(frag)), cr.long...), frag...)
		cr.shrink()
		return line, err
	}
}

// skipLine discards the rest of a line that passed the cap, up to and
// including its newline, in the bufio buffer's memory.
func (cr *Reader) skipLine() error {
	for {
		_, err := cr.r.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			continue
		}
		cr.skipping = false
		return err // nil at the newline; io.EOF when the line was the last
	}
}

// shrink lets go of a long line's gathering buffer once it is large, so one
// long line does not keep its memory for the rest of the file.
func (cr *Reader) shrink() {
	if cap(cr.long) > 4<<20 {
		cr.long = nil
	}
}

// trimJSONSpace cuts JSON's whitespace (space, tab, CR, LF) from both ends;
// bytes.TrimSpace would cut Unicode spaces too.
func trimJSONSpace(b []byte) []byte {
	isSpace := func(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	return b
}

// Line is the number of the line Next returned last.
func (cr *Reader) Line() int { return cr.line }
