package cpython

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

var jsonSeeds = []string{
	`{"a": 1, "b": [true, false, null], "c": {"d": "e"}}`,
	`[1, 1.5, -0, 1e400, -1e-400, 123456789012345678901234567890]`,
	`"\ud800 lone \udc00 pair \ud83d\ude00 \u00e9 \n\t\"\\"`,
	`{"a": 1, "a": 2}`, `{}`, `[]`, `""`, `0`, `-1.25e+3`,
	`{"a": [1, 2,]}`, `[01]`, `{"a" 1}`, `"unterminated`, `nul`, "\"\xff\"", `[[[[[[[[]]]]]]]]`,
}

// FuzzAppendJSON: the transcoder never panics, accepts exactly the JSON that
// encoding/json accepts (within its nesting limit, as UTF-8), and what it
// writes always decodes.
func FuzzAppendJSON(f *testing.F) {
	for _, s := range jsonSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		out, err := AppendJSON(nil, src)
		valid := json.Valid(src) && utf8.Valid(src)
		if err == nil {
			require.True(t, json.Valid(src), "accepted invalid JSON %q", src)
			_, derr := Decode(out)
			require.NoError(t, derr, "%q", src)
		} else if valid && depth(src) <= maxDepth {
			t.Fatalf("rejected valid JSON %q: %v", src, err)
		}
	})
}

// FuzzSplitObject: SplitObject, which only validates, accepts exactly the
// objects the transcoder accepts, only UTF-8, and names every key as
// encoding/json reads it; SplitObjectEncoding finds the same members, or
// the same error, and encodes each value as AppendJSON does.
func FuzzSplitObject(f *testing.F) {
	for _, s := range jsonSeeds {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"id": "x", "in\u0070ut": {"k": "\ud800"}, "é": [1, "a\"b"], "": null}`))
	f.Fuzz(func(t *testing.T, src []byte) {
		members, err := SplitObject(src, nil)
		_, full := AppendJSON(nil, src)
		isObject := len(bytes.TrimLeft(src, " \t\r\n")) > 0 && bytes.TrimLeft(src, " \t\r\n")[0] == '{'
		encoded, out, encErr := SplitObjectEncoding(src, nil, []byte("kept"), func(key string) bool { return len(key)%2 == 0 })
		require.Equal(t, fmt.Sprint(err), fmt.Sprint(encErr), "%q", src)
		require.Equal(t, "kept", string(out[:4]), "what out held is kept")
		if err == nil {
			require.True(t, utf8.Valid(src), "SplitObject accepted a text that is not UTF-8: %q", src)
			require.Len(t, encoded, len(members))
			for i, m := range encoded {
				require.Equal(t, members[i].Key, m.Key)
				require.Equal(t, members[i].Value, m.Value)
				if len(m.Key)%2 != 0 {
					require.True(t, m.Encoded.IsZero())
					continue
				}
				want, werr := AppendJSON(nil, m.Value)
				require.NoError(t, werr)
				require.Equal(t, want, m.Encoded.b, "member %q of %q", m.Key, src)
			}
		}
		if full == nil {
			require.True(t, utf8.Valid(src), "AppendJSON accepted a text that is not UTF-8: %q", src)
		}
		if err == nil {
			require.NoError(t, full, "SplitObject accepted what AppendJSON refuses: %q", src)
			var keys []string
			for _, m := range members {
				keys = append(keys, m.Key)
				_, merr := AppendJSON(nil, m.Value)
				require.NoError(t, merr, "member %q of %q", m.Key, src)
			}
			if utf8.Valid(src) {
				var ordered []string
				dec := json.NewDecoder(bytes.NewReader(src))
				_, _ = dec.Token()
				for dec.More() {
					k, kerr := dec.Token()
					require.NoError(t, kerr)
					ordered = append(ordered, k.(string))
					var skip json.RawMessage
					require.NoError(t, dec.Decode(&skip))
				}
				if !bytes.Contains(src, []byte(`\u`)) { // encoding/json writes a lone surrogate as U+FFFD
					require.Equal(t, ordered, keys, "%q", src)
				}
			}
		} else if full == nil && isObject {
			t.Fatalf("SplitObject refused what AppendJSON accepts: %q: %v", src, err)
		} else if isObject && (stringError(err) || stringError(full)) {
			// Validating a string (escapes and all) fails where and as
			// decoding it does (the two differ only around the top object).
			require.Equal(t, full.Error(), err.Error(), "%q", src)
		}
	})
}

// stringError says err is about a string's text (its escapes, characters
// or end).
func stringError(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "string") || strings.Contains(msg, "escape")
}

func depth(src []byte) int {
	d, m := 0, 0
	inStr, esc := false, false
	for _, c := range src {
		switch {
		case esc:
			esc = false
		case inStr && c == '\\':
			esc = true
		case c == '"':
			inStr = !inStr
		case !inStr && (c == '[' || c == '{'):
			d++
			m = max(m, d)
		case !inStr && (c == ']' || c == '}'):
			d--
		}
	}
	return m
}

// FuzzDecode: any bytes, however malformed, decode to a value or an error.
func FuzzDecode(f *testing.F) {
	for _, s := range jsonSeeds {
		if b, err := AppendJSON(nil, []byte(s)); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte{'l', 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add([]byte{'R', 0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 2, 'o', 'k', 1, 1, 'a'})
	f.Add([]byte{'R', 0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 2, 'o', 'k', 0})
	f.Add([]byte{'l', 2, 'H', 1, 0xa1, 0x8d, 0x06, 'N'})
	f.Fuzz(func(t *testing.T, b []byte) {
		Decode(b)
		// DecodeScorePair's shortcut for the usual record reads what the
		// general decoder reads.
		p, ok, err := DecodeScorePair(b, nil)
		want, wantOK, wantErr := scorePairSlow(b)
		require.Equal(t, wantOK, ok)
		require.Equal(t, wantErr == nil, err == nil)
		if ok {
			require.Equal(t, math.Float64bits(want.Score), math.Float64bits(p.Score))
			require.Equal(t, want.Feedback, p.Feedback)
			require.Equal(t, floatBits(want.Scores), floatBits(p.Scores)) // bit for bit: a NaN score equals itself
		}
	})
}

// floatBits is m with each value's IEEE bits, for comparing NaNs.
func floatBits(m map[string]float64) map[string]uint64 {
	if m == nil {
		return nil
	}
	out := make(map[string]uint64, len(m))
	for k, v := range m {
		out[k] = math.Float64bits(v)
	}
	return out
}

// FuzzCodecThroughPython sends transcoded JSON through C's decoder into
// Python and checks the object equals what Python's own json.loads builds.
func FuzzCodecThroughPython(f *testing.F) {
	for _, s := range jsonSeeds {
		f.Add([]byte(s))
	}
	same := function(f, "same", `
import json, math
def same(obj, text):
    want = json.loads(text)
    return repr(obj) == repr(want) or (obj != obj and want != want)
`)
	c, err := NewCaller(0)
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, src []byte) {
		enc, err := AppendJSON(nil, src)
		if err != nil {
			return
		}
		var e Encoder
		e.buf = append(e.buf, enc...)
		require.NoError(t, e.Value(string(src)))
		v, err := c.Call(same, e.Bytes(), 2, 0, false, 0)
		require.NoError(t, err, "%q", src)
		require.Equal(t, true, v, "%q decoded differently from json.loads", src)
	})
}
