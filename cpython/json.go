package cpython

import (
	"encoding/binary"
	"fmt"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// AppendJSON transcodes one JSON text straight into the value buffer, keeping
// object key order and building what Python's json.loads builds (ints stay
// ints, "\ud800" stays a lone surrogate), without an intermediate Go tree.
// The text must be valid UTF-8, in every string alike: a lone surrogate
// comes only from a \u escape.
func AppendJSON(dst, src []byte) ([]byte, error) {
	p := jsonParser{src: src, out: dst}
	p.space()
	if err := p.value(0); err != nil {
		return dst, err
	}
	p.space()
	if p.i != len(p.src) {
		return dst, p.errorf("unexpected %s after the JSON value", p.char())
	}
	return p.out, nil
}

// jsonError is a JSON syntax error at a byte offset of the input.
type jsonError struct {
	offset int
	msg    string
}

// Error says where the input went wrong and how.
func (e *jsonError) Error() string {
	return fmt.Sprintf("invalid JSON at byte %d: %s", e.offset, e.msg)
}

type jsonParser struct {
	src  []byte
	i    int
	out  []byte
	skip bool // validate only: out stays empty but for escaped strings, cut back
}

func (p *jsonParser) errorf(format string, args ...any) error {
	return &jsonError{offset: p.i, msg: fmt.Sprintf(format, args...)}
}

// char names the character at the offset for an error message: a printable
// one quoted ('x', 'é' U+00E9), another by its code point (U+00A0), and a
// byte that does not start valid UTF-8 as that byte, never as the Latin-1
// character it would be on its own ('Â' for the first byte of U+00A0).
func (p *jsonParser) char() string {
	r, size := utf8.DecodeRune(p.src[p.i:])
	switch {
	case r == utf8.RuneError && size <= 1:
		return fmt.Sprintf("byte 0x%02X (not UTF-8)", p.src[p.i])
	case r < utf8.RuneSelf && unicode.IsPrint(r):
		return fmt.Sprintf("%q", r)
	case unicode.IsPrint(r):
		return fmt.Sprintf("%q (U+%04X)", r, r)
	}
	return fmt.Sprintf("U+%04X", r)
}

func (p *jsonParser) space() {
	for p.i < len(p.src) {
		switch p.src[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *jsonParser) literal(word string, tag byte) error {
	if len(p.src)-p.i < len(word) || string(p.src[p.i:p.i+len(word)]) != word {
		return p.errorf("invalid literal")
	}
	p.i += len(word)
	if !p.skip {
		p.out = append(p.out, tag)
	}
	return nil
}

func (p *jsonParser) value(depth int) error {
	if depth > maxDepth {
		return p.errorf("nested too deeply (more than %d levels)", maxDepth)
	}
	if p.i >= len(p.src) {
		return p.errorf("unexpected end of input")
	}
	switch c := p.src[p.i]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		if !p.skip {
			p.out = append(p.out, 's')
		}
		return p.string()
	case c == 't':
		return p.literal("true", 'T')
	case c == 'f':
		return p.literal("false", 'F')
	case c == 'n':
		return p.literal("null", 'N')
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	case c == 'N':
		return p.errorf("NaN is not JSON")
	default:
		return p.errorf("unexpected %s", p.char())
	}
}

// countAt reserves room for a count to be patched in later: containers are
// written in one pass, so the count is fixed up once known.
func (p *jsonParser) container(tag byte, depth int, close byte, member func() error) error {
	if !p.skip {
		p.out = append(p.out, tag)
	}
	at := len(p.out)
	p.i++ // opening bracket
	p.space()
	n := 0
	if p.i < len(p.src) && p.src[p.i] == close {
		p.i++
		if !p.skip {
			p.out = binary.AppendUvarint(p.out, 0)
		}
		return nil
	}
	for {
		if err := member(); err != nil {
			return err
		}
		n++
		p.space()
		if p.i >= len(p.src) {
			return p.errorf("unexpected end of input, expected ',' or %q", close)
		}
		if p.src[p.i] == ',' {
			p.i++
			p.space()
			continue
		}
		if p.src[p.i] == close {
			p.i++
			break
		}
		return p.errorf("unexpected %s, expected ',' or %q", p.char(), close)
	}
	if p.skip {
		return nil
	}
	// Insert the count before the members now that it is known.
	var tmp [binary.MaxVarintLen64]byte
	k := binary.PutUvarint(tmp[:], uint64(n))
	p.out = append(p.out, tmp[:k]...)
	copy(p.out[at+k:], p.out[at:len(p.out)-k])
	copy(p.out[at:], tmp[:k])
	return nil
}

func (p *jsonParser) array(depth int) error {
	return p.container('l', depth, ']', func() error { return p.value(depth + 1) })
}

func (p *jsonParser) object(depth int) error {
	return p.container('d', depth, '}', func() error {
		if p.i >= len(p.src) || p.src[p.i] != '"' {
			return p.errorf("expected a string key")
		}
		if !p.skip {
			p.out = append(p.out, 's')
		}
		if err := p.string(); err != nil {
			return err
		}
		p.space()
		if p.i >= len(p.src) || p.src[p.i] != ':' {
			return p.errorf("expected ':' after an object key")
		}
		p.i++
		p.space()
		return p.value(depth + 1)
	})
}

func (p *jsonParser) number() error {
	start := p.i
	if p.src[p.i] == '-' {
		p.i++
	}
	digits := func() int {
		n := 0
		for p.i < len(p.src) && p.src[p.i] >= '0' && p.src[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	intStart := p.i
	if digits() == 0 {
		return p.errorf("invalid number")
	}
	if p.src[intStart] == '0' && p.i-intStart > 1 {
		return p.errorf("invalid number: leading zero")
	}
	if p.i < len(p.src) && p.src[p.i] == '.' {
		p.i++
		if digits() == 0 {
			return p.errorf("invalid number: no digits after '.'")
		}
	}
	if p.i < len(p.src) && (p.src[p.i] == 'e' || p.src[p.i] == 'E') {
		p.i++
		if p.i < len(p.src) && (p.src[p.i] == '+' || p.src[p.i] == '-') {
			p.i++
		}
		if digits() == 0 {
			return p.errorf("invalid number: no digits in exponent")
		}
	}
	e := Encoder{buf: p.out}
	if err := e.number(string(p.src[start:p.i])); err != nil {
		return &jsonError{offset: start, msg: err.Error()}
	}
	if !p.skip {
		p.out = e.buf
	}
	return nil
}

// string writes a varint length and the unescaped bytes of a JSON string.
func (p *jsonParser) string() error {
	p.i++ // opening quote
	start := p.i
	end, ascii := plainEnd(p.src, p.i)
	if end < len(p.src) && p.src[end] == '"' {
		// Fast path: no escapes, the bytes are copied as they are.
		s := p.src[start:end]
		if !ascii && !utf8.Valid(s) {
			return &jsonError{offset: start, msg: "string is not valid UTF-8"}
		}
		p.i = end + 1
		if p.skip {
			return nil
		}
		p.out = binary.AppendUvarint(p.out, uint64(len(s)))
		p.out = append(p.out, s...)
		return nil
	}
	if p.skip && ascii {
		if done, err := p.skipEscaped(end); done {
			return err
		}
	}
	// Escapes: decoded straight into the output, behind a one-byte length
	// that is widened at the end if the string turns out longer. The runs
	// between escapes must be UTF-8 as they are (a run ends at an ASCII
	// byte, so no character is cut); only a \u escape makes a surrogate.
	badText := !ascii && !utf8.Valid(p.src[start:end])
	mark := len(p.out)
	p.out = append(p.out, 0)
	p.out = append(p.out, p.src[start:end]...)
	p.i = end
	for {
		if p.i >= len(p.src) {
			return p.errorf("unterminated string")
		}
		c := p.src[p.i]
		switch {
		case c == '"':
			p.i++
			if badText {
				return &jsonError{offset: start, msg: "string is not valid UTF-8"}
			}
			s := p.out[mark+1:]
			if p.skip {
				p.out = p.out[:mark]
				return nil
			}
			var n [binary.MaxVarintLen64]byte
			w := binary.PutUvarint(n[:], uint64(len(s)))
			if w > 1 {
				p.out = append(p.out, n[:w-1]...) // room; the string moves up
				copy(p.out[mark+w:], p.out[mark+1:len(p.out)-(w-1)])
			}
			copy(p.out[mark:], n[:w])
			return nil
		case c < 0x20:
			return p.errorf("control character %q in string", c)
		case c != '\\':
			e, runASCII := plainEnd(p.src, p.i)
			badText = badText || !runASCII && !utf8.Valid(p.src[p.i:e])
			p.out = append(p.out, p.src[p.i:e]...)
			p.i = e
			continue
		}
		if p.i+1 >= len(p.src) {
			return p.errorf("unterminated escape")
		}
		esc := p.src[p.i+1]
		p.i += 2
		switch esc {
		case '"', '\\', '/':
			p.out = append(p.out, esc)
		case 'b':
			p.out = append(p.out, '\b')
		case 'f':
			p.out = append(p.out, '\f')
		case 'n':
			p.out = append(p.out, '\n')
		case 'r':
			p.out = append(p.out, '\r')
		case 't':
			p.out = append(p.out, '\t')
		case 'u':
			r, ok := p.hex4()
			if !ok {
				return p.errorf("invalid \\u escape")
			}
			if utf16.IsSurrogate(r) && r < 0xDC00 && p.i+1 < len(p.src) && p.src[p.i] == '\\' && p.src[p.i+1] == 'u' {
				save := p.i
				p.i += 2
				if r2, ok := p.hex4(); ok && r2 >= 0xDC00 && r2 <= 0xDFFF {
					p.out = utf8.AppendRune(p.out, utf16.DecodeRune(r, r2))
					continue
				}
				p.i = save
			}
			p.out = appendWTF8(p.out, r)
		default:
			return p.errorf("invalid escape '\\%c'", esc)
		}
	}
}

// skipEscaped passes over the rest of a string from its first escape at i
// without decoding it, for a parser that only validates: while its plain
// runs are ASCII, the decoded text is valid WTF-8 whatever the escapes, so
// there is nothing to check it for (and nothing to allocate; a model's text
// with a newline in it is most strings). done is true when it reached the
// string's end or an error, which it reports as the decoding loop does;
// false, p.i unchanged, at a run that is not ASCII: the caller decodes the
// string then.
func (p *jsonParser) skipEscaped(i int) (done bool, err error) {
	src, from := p.src, p.i
	fail := func(at int, format string, args ...any) (bool, error) {
		p.i = at
		return true, p.errorf(format, args...)
	}
	for {
		if i >= len(src) {
			return fail(i, "unterminated string")
		}
		c := src[i]
		switch {
		case c == '"':
			p.i = i + 1
			return true, nil
		case c < 0x20:
			return fail(i, "control character %q in string", c)
		case c != '\\':
			e, ascii := plainEnd(src, i)
			if !ascii {
				p.i = from
				return false, nil
			}
			i = e
			continue
		}
		if i+1 >= len(src) {
			return fail(i, "unterminated escape")
		}
		esc := src[i+1]
		i += 2
		switch esc {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		case 'u':
			p.i = i
			if _, ok := p.hex4(); !ok {
				return fail(i, "invalid \\u escape")
			}
			i = p.i
		default:
			return fail(i, "invalid escape '\\%c'", esc)
		}
	}
}

// plainEnd is the offset of the first byte from i that ends a plain run of
// a string: '"', a backslash or a control character; len(src) when there is
// none. ascii says the run is all ASCII, so valid UTF-8 as it is. It tests
// eight bytes at a time (each test flags a byte exactly; a borrow reaches no
// byte above the first flagged one, which the byte loop then finds):
// strings are most of the bytes a case holds.
func plainEnd(src []byte, i int) (int, bool) {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	ascii := true
	for {
		for ; i+8 <= len(src); i += 8 {
			v := binary.LittleEndian.Uint64(src[i:])
			q, b := v^(ones*'"'), v^(ones*'\\')
			if (v|(q-ones)&^q|(b-ones)&^b|(v-ones*0x20)&^v)&highs != 0 {
				break
			}
		}
		stop := min(i+8, len(src))
		for ; i < stop; i++ {
			c := src[i]
			if c == '"' || c == '\\' || c < 0x20 {
				return i, ascii
			}
			if c >= 0x80 {
				ascii = false
			}
		}
		if i >= len(src) {
			return i, ascii
		}
	}
}

func (p *jsonParser) hex4() (rune, bool) {
	if len(p.src)-p.i < 4 {
		return 0, false
	}
	var r rune
	for _, c := range p.src[p.i : p.i+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	p.i += 4
	return r, true
}

// appendWTF8 encodes r as UTF-8, writing a lone surrogate as its three-byte
// form (which Python decodes with "surrogatepass").
func appendWTF8(b []byte, r rune) []byte {
	if r >= 0xD800 && r <= 0xDFFF {
		return append(b, byte(0xE0|r>>12), byte(0x80|(r>>6)&0x3F), byte(0x80|r&0x3F))
	}
	return utf8.AppendRune(b, r)
}

// Member is one key of a JSON object and the raw text of its value.
type Member struct {
	Key   string // the member's name, unescaped
	Value []byte // a sub-slice of the input
	// Encoded is the value transcoded (SplitObjectEncoding), or the zero
	// Encoded for a member that was not.
	Encoded Encoded
}

// Encoded is one JSON value transcoded as AppendJSON transcodes it: a batch
// copies it as it is. Only this package makes one, so it always holds one
// whole value.
type Encoded struct{ b []byte }

// IsZero reports whether e holds no value (a member not transcoded).
func (e Encoded) IsZero() bool { return len(e.b) == 0 }

// SplitObject validates a JSON object and returns its members in order,
// without building any value: the raw texts can be transcoded later (or
// never). It is how a case-file line is read without a map per line. What
// it accepts is UTF-8: outside strings JSON is ASCII, and strings are checked.
func SplitObject(src []byte, members []Member) ([]Member, error) {
	members, _, err := SplitObjectEncoding(src, members, nil, nil)
	return members, err
}

// SplitObjectEncoding is SplitObject that also transcodes, in the same pass,
// the value of each member whose key encode names, appending it to out (the
// returned slice: keep it, and do not write over what the Encodeds hold).
// Its errors are SplitObject's, at the same offsets: a line is read once
// whether its values are wanted now or later.
func SplitObjectEncoding(src []byte, members []Member, out []byte, encode func(key string) bool) ([]Member, []byte, error) {
	p := jsonParser{src: src, skip: true}
	p.space()
	if p.i >= len(p.src) || p.src[p.i] != '{' {
		return members, out, p.errorf("expected a JSON object")
	}
	p.i++
	p.space()
	if p.i < len(p.src) && p.src[p.i] == '}' {
		p.i++
	} else {
		for {
			if p.i >= len(p.src) || p.src[p.i] != '"' {
				return members, out, p.errorf("expected a string key")
			}
			var key []byte
			if end, ascii := plainEnd(src, p.i+1); ascii && end < len(src) && src[end] == '"' {
				key, p.i = src[p.i+1:end], end+1 // as it is: no escape to decode
			} else {
				p.out, p.skip = p.out[:0], false // the key, unescaped
				err := p.string()
				p.skip = true
				if err != nil {
					return members, out, err
				}
				key = p.out
				if n, k := binary.Uvarint(key); k > 0 && int(n) == len(key)-k {
					key = key[k:]
				}
			}
			p.space()
			if p.i >= len(p.src) || p.src[p.i] != ':' {
				return members, out, p.errorf("expected ':' after an object key")
			}
			p.i++
			p.space()
			start := p.i
			var keyStr string
			switch string(key) { // a case file's and a results file's keys, without allocating
			case "id":
				keyStr = "id"
			case "input":
				keyStr = "input"
			case "output":
				keyStr = "output"
			case "expected":
				keyStr = "expected"
			case "score":
				keyStr = "score"
			case "feedback":
				keyStr = "feedback"
			case "scores":
				keyStr = "scores"
			case "error":
				keyStr = "error"
			case "kind":
				keyStr = "kind"
			case "ms":
				keyStr = "ms"
			default:
				keyStr = string(key)
			}
			m := Member{Key: keyStr}
			if encode != nil && encode(keyStr) {
				// Transcoded into out as it is validated; the parser's
				// own scratch (escaped keys, skipped strings) set aside.
				// A value made before out grew keeps the old array,
				// which still holds it.
				scratch := p.out
				p.out, p.skip = out, false
				from := len(out)
				err := p.value(1)
				out, p.out, p.skip = p.out, scratch[:0], true
				if err != nil {
					return members, out, err
				}
				m.Encoded = Encoded{b: out[from:len(out):len(out)]}
			} else {
				p.out = p.out[:0]
				if err := p.value(1); err != nil {
					return members, out, err
				}
			}
			m.Value = src[start:p.i]
			members = append(members, m)
			p.space()
			if p.i >= len(p.src) {
				return members, out, p.errorf("unexpected end of input, expected ',' or '}'")
			}
			if p.src[p.i] == ',' {
				p.i++
				p.space()
				continue
			}
			if p.src[p.i] == '}' {
				p.i++
				break
			}
			return members, out, p.errorf("unexpected %s, expected ',' or '}'", p.char())
		}
	}
	p.space()
	if p.i != len(p.src) {
		return members, out, p.errorf("unexpected %s after the JSON object", p.char())
	}
	return members, out, nil
}
