package caseio

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/skynetml/skynet/cpython"
	"github.com/skynetml/skynet/engine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readAll reads every case of src: an engine.Case's ID, or "error: " and its line
// error, one entry a case line, as a caller sees them.
func readAll(t *testing.T, cr *Reader) []string {
	t.Helper()
	var got []string
	for {
		c, err := cr.Next()
		if err == io.EOF {
			return got
		}
		var le *LineError
		if err != nil {
			require.True(t, errors.As(err, &le), "not a line error: %v", err)
			assert.Equal(t, cr.Line(), le.Line)
			got = append(got, "error: "+err.Error())
			continue
		}
		got = append(got, c.ID)
	}
}

func TestCaseFileBOM(t *testing.T) {
	const line = `{"id": "a", "input": {}, "output": 1}`
	cr := NewReader(strings.NewReader("\xEF\xBB\xBF" + line + "\n" + `{"input": {}, "output": 2}` + "\n"))
	assert.Equal(t, []string{"a", "2"}, readAll(t, cr), "the BOM is skipped; lines keep their numbers")

	// A BOM alone on the first line leaves it blank; a BOM anywhere else is
	// part of the line, so not JSON.
	cr = NewReader(strings.NewReader("\xEF\xBB\xBF\n" + line + "\n\xEF\xBB\xBF" + line + "\n"))
	got := readAll(t, cr)
	require.Len(t, got, 2)
	assert.Equal(t, "a", got[0])
	assert.True(t, strings.HasPrefix(got[1], "error: line 3: invalid JSON at byte 0"), got[1])

	assert.Empty(t, readAll(t, NewReader(strings.NewReader("\xEF\xBB\xBF"))), "a file of a BOM has no cases")
}

// Only JSON whitespace makes a line blank; a line of Unicode spaces is a
// case line, and a bad one.
func TestCaseFileBlankLines(t *testing.T) {
	src := " \t\r\n" + // blank
		"\u00a0\n" + // no-break space
		"\u3000 \n" + // ideographic space
		"\u2028\n" + // line separator
		"\n" +
		`{"input": {}, "output": 1}` + "\r\n"
	got := readAll(t, NewReader(strings.NewReader(src)))
	require.Len(t, got, 4, "%q", got)
	for i, line := range []string{"2", "3", "4"} {
		assert.True(t, strings.HasPrefix(got[i], "error: line "+line+": invalid JSON at byte 0"), got[i])
	}
	assert.Equal(t, "6", got[3])
}

func TestCaseFileLongLine(t *testing.T) {
	good := `{"id": "g", "input": {}, "output": 1}`
	long := `{"id": "l", "input": {}, "output": "` + strings.Repeat("x", 300<<10) + `"}`
	src := good + "\n" + long + "\n" + good + "\n" + long + "\n" + good + "\n" + long // the last has no newline
	cr := NewReader(strings.NewReader(src))
	cr.MaxLineBytes = 256 << 10
	assert.Equal(t, []string{
		"g", "error: line 2: longer than 262144 bytes, the case-line limit (--max-line-bytes raises it)",
		"g", "error: line 4: longer than 262144 bytes, the case-line limit (--max-line-bytes raises it)",
		"g", "error: line 6: longer than 262144 bytes, the case-line limit (--max-line-bytes raises it)",
	}, readAll(t, cr))

	// The cap is on the line without its newline; longer than the bufio
	// buffer is fine below the cap.
	exact := `{"input": {}, "output": "` + strings.Repeat("y", 100<<10) + `"}`
	cr = NewReader(strings.NewReader(exact + "\n" + exact + "\r\n" + exact))
	cr.MaxLineBytes = len(exact)
	got := readAll(t, cr)
	assert.Equal(t, []string{"1", "error: line 2: longer than " + strconv.Itoa(len(exact)) + " bytes, the case-line limit (--max-line-bytes raises it)", "3"}, got)

	// The error is a bad case like any other: its engine.Case is named by
	// the id read before the cap, else by the line.
	idLast := `{"input": {}, "output": "` + strings.Repeat("x", 300<<10) + `", "id": "l"}`
	cr = NewReader(strings.NewReader(long + "\n" + idLast + "\n"))
	cr.MaxLineBytes = 1 << 10
	for i, want := range []string{"l", "2"} {
		c, err := cr.Next()
		var le *LineError
		require.True(t, errors.As(err, &le))
		assert.Equal(t, i+1, le.Line)
		assert.Equal(t, want, c.ID)
	}
	assert.Equal(t, DefaultMaxLineBytes, 64<<20)
}

// zeros is an endless line (--data /dev/zero), counting what was read.
type zeros struct{ read int }

func (z *zeros) Read(p []byte) (int, error) {
	clear(p)
	z.read += len(p)
	return len(p), nil
}

// Next reports a line that never ends as soon as it passes the cap, having
// read about the cap and no more.
func TestCaseFileEndlessLine(t *testing.T) {
	z := &zeros{}
	cr := NewReader(z)
	cr.MaxLineBytes = 1 << 20
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := cr.Next()
	runtime.ReadMemStats(&after)
	var le *LineError
	require.True(t, errors.As(err, &le), "%v", err)
	assert.Equal(t, "line 1: longer than 1048576 bytes, the case-line limit (--max-line-bytes raises it)", err.Error())
	assert.Greater(t, z.read, 1<<20)
	assert.LessOrEqual(t, z.read, 1<<20+2<<16, "read past the cap by at most the buffer")
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(8<<20))
}

// The rest of a long line is discarded without being kept: 256 MiB of it
// cost a few MiB, and the line after it is read.
type longThenGood struct {
	n    int // bytes of 'x' still to give
	tail *strings.Reader
}

func (r *longThenGood) Read(p []byte) (int, error) {
	if r.n == 0 {
		return r.tail.Read(p)
	}
	k := min(len(p), r.n)
	for i := range p[:k] {
		p[i] = 'x'
	}
	r.n -= k
	return k, nil
}

func TestCaseFileLongLineIsDiscardedInBoundedMemory(t *testing.T) {
	r := &longThenGood{n: 256 << 20, tail: strings.NewReader("\n" + `{"id": "next", "input": {}, "output": 1}` + "\n")}
	cr := NewReader(r)
	cr.MaxLineBytes = 1 << 20
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	got := readAll(t, cr)
	runtime.ReadMemStats(&after)
	assert.Equal(t, []string{"error: line 1: longer than 1048576 bytes, the case-line limit (--max-line-bytes raises it)", "next"}, got)
	assert.Equal(t, 2, cr.Line())
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(16<<20), "allocated while reading 256 MiB")
}

func TestCaseIDSurrogates(t *testing.T) {
	parse := func(id string) (engine.Case, error) {
		return ParseCase([]byte(`{"id": "`+id+`", "input": {}, "output": 1}`), 5)
	}
	for _, id := range []string{`\ud800`, `\uDBFF`, `\udc00`, `a\ud83d`, `\ud83d\u0041`, `\ude00\ud83d`, `x\\\ud800`} {
		c, err := parse(id)
		var le *LineError
		require.True(t, errors.As(err, &le), "%s: %v", id, err)
		assert.Equal(t, 5, le.Line)
		assert.Equal(t, "5", c.ID, "the case is named by its line")
		assert.Contains(t, err.Error(), `line 5: "id" is not valid Unicode: it holds a lone surrogate \`, id)
	}
	_, err := parse(`ok\ud800`)
	assert.EqualError(t, err, `line 5: "id" is not valid Unicode: it holds a lone surrogate \ud800 (half of a UTF-16 pair), which results cannot write back as it is`)
	_, err = parse(`\ude00\ud83d`)
	assert.ErrorContains(t, err, `lone surrogate \ude00 `, "the first one is named")

	// A pair is one character; other escapes are as before.
	for id, want := range map[string]string{`\ud83d\ude00`: "😀", `\uD83D\uDE00!`: "😀!", `\\ud800`: `\ud800`,
		`\u00e9\n`: "é\n", `\ud7ff\ue000`: "\ud7ff\ue000"} {
		c, err := parse(id)
		require.NoError(t, err, id)
		assert.Equal(t, want, c.ID, id)
	}
	// Missing and numeric ids are unchanged.
	c, err := ParseCase([]byte(`{"input": {}, "output": 1}`), 9)
	require.NoError(t, err)
	assert.Equal(t, "9", c.ID)
	c, err = ParseCase([]byte(`{"id": 1e3, "input": {}, "output": 1}`), 9)
	require.NoError(t, err)
	assert.Equal(t, "1e3", c.ID)
	// Lone surrogates elsewhere in the case still reach Python as they are.
	_, err = ParseCase([]byte(`{"id": "s", "input": {"q": "\ud800"}, "output": "\udc00"}`), 9)
	assert.NoError(t, err)
}

// FuzzCaseReader: whatever the bytes and the cap, every line that is not
// blank gives exactly one engine.Case or *LineError, numbered as the line, and a
// line is called too long exactly when it is past the cap.
func FuzzCaseReader(f *testing.F) {
	f.Add([]byte("\xEF\xBB\xBF{\"input\": {}, \"output\": 1}\n\n \u00a0\n[1]"), 4)
	f.Add([]byte("{\"input\": {}, \"output\": \"xxxxxxxxxx\"}\r\n\t\n{}\n"), 30)
	f.Add([]byte("aaaaaaaa\nbb\n\n\ncccccccccc"), 3)
	f.Fuzz(func(t *testing.T, src []byte, max int) {
		max = 1 + (max&0xffff)%64
		var want []string
		for i, line := range strings.SplitAfter(string(src), "\n") {
			if i == 0 {
				line = strings.TrimPrefix(line, "\xEF\xBB\xBF")
			}
			content := strings.TrimSuffix(line, "\n")
			switch {
			case len(content) > max:
				want = append(want, strconv.Itoa(i+1)+" long")
			case len(trimJSONSpace([]byte(line))) > 0:
				want = append(want, strconv.Itoa(i+1))
			}
		}
		cr := NewReader(bytes.NewReader(src))
		cr.MaxLineBytes = max
		var got []string
		for {
			_, err := cr.Next()
			if err == io.EOF {
				break
			}
			var le *LineError
			if err != nil {
				require.True(t, errors.As(err, &le), "%v", err)
				require.Equal(t, cr.Line(), le.Line)
			}
			entry := strconv.Itoa(cr.Line())
			if le != nil && strings.Contains(le.Msg, "the case-line limit") {
				entry += " long"
			}
			got = append(got, entry)
		}
		require.Equal(t, want, got, "%q (cap %d)", src, max)
	})
}

// QuickID finds the id ParseCase gives: for lines ParseCase accepts, for
// bad lines with a usable id, and it declines what it cannot read plainly.
func TestQuickID(t *testing.T) {
	for _, tc := range []struct {
		line string
		id   string
		ok   bool
	}{
		{`{"id": "a1", "input": {}, "output": 1}`, "a1", true},
		{`{"input": {"id": "inner"}, "output": [1, {"id": 2}], "id": 7}`, "7", true},
		{`{"input": {}, "output": "x"}`, "5", true},
		{`{"id": null, "input": {}, "output": "x"}`, "5", true},
		{`{"id": "q\"uote\u00e9", "input": {}, "output": "}"}`, "q\"uote\u00e9", true},
		{`{"output": "a \"}\" b", "id": "after", "input": {}}`, "after", true},
		{`{"unknown": 1, "id": "named"}`, "named", true}, // a bad case, with its id
		{`{"id": "\ud800", "input": {}, "output": 1}`, "", false},
		{`{"\u0069d": "escaped key", "input": {}, "output": 1}`, "", false},
		{`{"id": ["list"], "input": {}, "output": 1}`, "", false},
		{`[1, 2]`, "", false},
		{`{"id": "a1", "input": {}`, "", false},
	} {
		id, ok := QuickID([]byte(tc.line), 5)
		assert.Equal(t, tc.ok, ok, tc.line)
		assert.Equal(t, tc.id, id, tc.line)
		if c, err := ParseCase([]byte(tc.line), 5); ok && (err == nil || tc.id == "named") {
			assert.Equal(t, c.ID, id, "ParseCase agrees: %s", tc.line)
		}
	}
}

// A line that is not JSON still names its case by the id read before it
// breaks off, so a fixed line is found by it on --resume; without one it
// is named by its line number, as before.
func TestParseCaseBrokenLineKeepsItsID(t *testing.T) {
	for line, want := range map[string]string{
		`{"id": "b", "input": {"message": "no closing brace"`: "b",
		`{"input": {}, "id": 42, "output": tru`:               "42",
		`{"id": "q\"x", "input": {`:                           `q"x`,
		`{"input": {"message": "no closing brace"`:            "7",
		`{"id": ["b"], "input": {`:                            "7",
		`{"id": 1x2, "input": {`:                              "7",
		`{"id": "unterminated`:                                "7",
		`not json {"id": "b"}`:                                "7",
	} {
		c, err := ParseCase([]byte(line), 7)
		var le *LineError
		require.ErrorAs(t, err, &le, line)
		assert.Equal(t, want, c.ID, line)
	}
}

// FuzzQuickID: on any line ParseCase accepts, QuickID finds the same id or
// declines.
func FuzzQuickID(f *testing.F) {
	f.Add([]byte(`{"id": "a\"b", "input": {"x": "}"}, "output": [1, "]"]}`))
	f.Add([]byte(`{"input": {}, "output": 1, "id": 3.5e2}`))
	f.Add([]byte(`{"id": "\u00e9\ud83d\ude00", "input": {}, "output": null}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		c, err := ParseCase(line, 9)
		id, ok := QuickID(line, 9)
		if err == nil && ok {
			require.Equal(t, c.ID, id, "%q", line)
		}
	})
}

// A bad observation value reads like the other case-line errors, in the
// case file's terms: not encoding/json's "cannot unmarshal string into Go
// struct field Observation.run_ms of type float64".
func TestCaseObservationErrors(t *testing.T) {
	for obs, want := range map[string]string{
		`{"run_ms": "fast"}`:            "line 3: observation.run_ms must be a number of milliseconds, got a string",
		`{"cost_usd": true}`:            "line 3: observation.cost_usd must be a number of US dollars, got a boolean",
		`{"run_ms": -1}`:                "line 3: observation.run_ms must be a number of milliseconds, got -1 (it must be >= 0)",
		`{"run_ms": 1e999}`:             "line 3: observation.run_ms must be a number of milliseconds, got 1e999 (out of range)",
		`{"model_calls": 1.5}`:          "line 3: observation.model_calls must be a whole number of calls, got 1.5",
		`{"input_tokens": [1]}`:         "line 3: observation.input_tokens must be a whole number of tokens, got an array",
		`{"output_tokens": -2}`:         "line 3: observation.output_tokens must be a whole number of tokens, got -2 (it must be >= 0)",
		`{"runms": 1}`:                  "line 3: unknown field observation.runms (known fields: run_ms, cost_usd, model_calls, input_tokens, output_tokens)",
		`[1]`:                           `line 3: "observation" must be an object (of run_ms, cost_usd, model_calls, input_tokens, output_tokens), got an array`,
		`{"run_ms": 12, "cost_usd": 0}`: "",
		`{"run_ms": null}`:              "",
	} {
		c, err := ParseCase([]byte(`{"id": "a", "input": {}, "output": 1, "observation": `+obs+`}`), 3)
		if want == "" {
			assert.NoError(t, err, obs)
			continue
		}
		var le *LineError
		require.True(t, errors.As(err, &le), obs)
		assert.Equal(t, want, err.Error(), obs)
		assert.NotContains(t, err.Error(), "Go struct", obs)
		assert.Equal(t, "a", c.ID, "the error keeps the case's id")
	}
	c, err := ParseCase([]byte(`{"input": {}, "output": 1, "observation": {"run_ms": 12.5, "model_calls": 2}}`), 1)
	require.NoError(t, err)
	assert.Equal(t, 12.5, *c.Observation.RunMS)
	assert.Equal(t, int64(2), *c.Observation.ModelCalls)
	assert.Nil(t, c.Observation.CostUSD)
}

// FuzzParseCase: any line gives an engine.Case or a *LineError naming its line,
// never a panic; a line it takes is UTF-8; a Transcoder reads every line as
// ParseCase does, its values encoded as the engine encodes ParseCase's.
func FuzzParseCase(f *testing.F) {
	for _, s := range []string{
		`{"id": "t1", "input": {"message": "hi"}, "output": "billing", "expected": {"label": "billing"}}`,
		`{"input": {}, "output": null, "observation": {"run_ms": 12, "cost_usd": 0.1}}`,
		`{"input": {}, "output": 1, "observation": {"run_ms": -1}}`,
		`{"id": 7, "input": {}, "output": [1, {"a": "\ud800"}]}`,
		`{"input": [], "output": 1}`, `[1]`, `{"input": {}`, "\xff", `{"id": {}, "input": {}, "output": 1}`,
		`{"id": "a\"b\u00e9\n", "input": {}, "output": 1}`, `{"id": "plain é", "input": {}, "output": 1}`,
	} {
		f.Add([]byte(s))
	}
	var tc Transcoder
	f.Fuzz(func(t *testing.T, line []byte) {
		c, err := ParseCase(line, 3)
		tcCase, tcErr := tc.ParseCase(line, 3)
		requireSameCase(t, c, err, tcCase, tcErr)
		if err != nil {
			var le *LineError
			require.True(t, errors.As(err, &le), "%v", err)
			require.Equal(t, 3, le.Line)
			require.True(t, strings.HasPrefix(err.Error(), "line 3: "))
			return
		}
		require.NotNil(t, c.Input)
		require.True(t, utf8.Valid(line), "%q", line)
		// A string id reads as encoding/json reads it, escaped or not.
		var withID struct{ ID json.RawMessage }
		if json.Unmarshal(line, &withID) == nil && len(withID.ID) > 0 && withID.ID[0] == '"' {
			var id string
			require.NoError(t, json.Unmarshal(withID.ID, &id))
			require.Equal(t, id, c.ID)
		}
	})
}

// An Arena's copies hold their bytes whatever happens to the source or to
// the other copies: an append to one never writes over the next.
func TestArena(t *testing.T) {
	a := Arena{Size: 64}
	src := []byte("0123456789")
	var copies [][]byte
	for i := range 20 { // several chunks
		src[0] = byte('a' + i)
		c := a.Copy(src)
		require.Equal(t, src, c)
		require.Equal(t, len(c), cap(c))
		copies = append(copies, c)
	}
	_ = append(copies[0], "xyz"...)
	for i, c := range copies {
		assert.Equal(t, string(rune('a'+i))+"123456789", string(c))
	}
	big := make([]byte, 17) // over a quarter of a chunk: its own memory
	assert.Equal(t, big, a.Copy(big))
	assert.Nil(t, a.Copy(nil))
	assert.Nil(t, a.Copy([]byte{}), "as append([]byte(nil)) gives")
}

// requireSameCase: a Transcoder's Case (tc) is ParseCase's (pc), but for its
// values, which are encoded as the engine encodes ParseCase's JSON texts.
func requireSameCase(t *testing.T, pc engine.Case, pErr error, tc engine.Case, tErr error) {
	t.Helper()
	if pErr != nil {
		require.Error(t, tErr)
		require.Equal(t, pErr.Error(), tErr.Error())
		require.Equal(t, pc.ID, tc.ID)
		return
	}
	require.NoError(t, tErr)
	require.Equal(t, pc.ID, tc.ID)
	require.Equal(t, pc.Observation, tc.Observation)
	for i, v := range []any{pc.Input, pc.Output, pc.Expected} {
		w := []any{tc.Input, tc.Output, tc.Expected}[i]
		if v == nil {
			require.Nil(t, w, "value %d", i)
			continue
		}
		want, err := cpython.AppendJSON(nil, v.(json.RawMessage))
		require.NoError(t, err)
		enc, ok := w.(*cpython.Encoded)
		require.True(t, ok, "value %d is %T", i, w)
		got, err := cpython.AppendValue(nil, enc)
		require.NoError(t, err)
		require.Equal(t, want, got, "value %d", i)
	}
}

// A Transcoder reads lines as ParseCase does, good and bad, and each Case's
// values stay its own while later lines are read into the same chunk.
func TestTranscoder(t *testing.T) {
	lines := []string{
		`{"id": "t1", "input": {"message": "hi"}, "output": "billing", "expected": {"label": "billing"}}`,
		`{"input": {"q": "a\nb \u00e9 \ud83d\ude00"}, "output": "line\none", "expected": null, "observation": {"run_ms": 12}}`,
		`{"id": 7, "input": {"x": [1, 2.5, -3e10, true, null, {"k": "\ud800"}]}, "output": [1, {"a": "v"}]}`,
		`{"id": "a", "input": {}, "output": 1, "expected": {"answer": "72", "answers": ["72", "seventy-two"]}}`,
		`{"input": [], "output": 1}`, `[1]`, `{"input": {}`, "\xff", `{"id": {}, "input": {}, "output": 1}`,
		`{"id": "x", "input": {}, "output": "\xed\xa0\x80\n"}`,                // a raw surrogate (not UTF-8) beside an escape
		`{"id": "y", "input": {"q": "caf\xc3\xa9 \u00e9"}, "output": "\xc3"}`, // a cut character
		`{"id": "z", "input": {}, "output": 1, "extra": 2}`,
		`{"id": "w", "input": {}, "expected": 3, "output": 1}`,
		`{"id": "v", "input": {"a": 1}, "input": {"b": 2}, "output": "last input wins"}`,
	}
	// Lines long enough to get memory of their own, between the short ones.
	lines = append(lines, `{"id": "long", "input": {"q": "`+strings.Repeat("é\\n", 5000)+`"}, "output": "`+strings.Repeat("ab\\\"", 9000)+`"}`)
	tc := Transcoder{}
	var cases []engine.Case
	var want []engine.Case
	for round := 0; round < 300; round++ { // more than a chunk's worth of values
		for i, l := range lines {
			line := []byte(l)
			if strings.Contains(l, `\x`) {
				line = []byte(mustUnquote(t, l))
			}
			pc, pErr := ParseCase(line, i+1)
			c, err := tc.ParseCase(line, i+1)
			requireSameCase(t, pc, pErr, c, err)
			if err == nil {
				cases, want = append(cases, c), append(want, pc)
			}
		}
	}
	for i := range cases {
		requireSameCase(t, want[i], nil, cases[i], nil)
	}
}

// mustUnquote turns a test line's \xNN into the byte.
func mustUnquote(t *testing.T, s string) string {
	t.Helper()
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && s[i+1] == 'x' {
			v, err := strconv.ParseUint(s[i+2:i+4], 16, 8)
			require.NoError(t, err)
			b.WriteByte(byte(v))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// A bad line's result is named by the id read from it before the problem:
// a byte that is not UTF-8 after the id, a line past the cap whose id comes
// first; and the messages say where and what to do.
func TestBadLineIDs(t *testing.T) {
	text := `{"id": "a", "input": {"m": "caf` + "\xe9" + `"}, "output": 1}` + "\n" +
		`{"input": {"m": "caf` + "\xe9" + `"}, "id": "b", "output": 1}` + "\n" +
		`{"id": "c", "input": {"m": "` + strings.Repeat("x", 200) + `"}, "output": 1}` + "\n" +
		`{"input": {"m": "` + strings.Repeat("x", 200) + `"}, "id": "d", "output": 1}` + "\n"
	cr := NewReader(strings.NewReader(text))
	cr.MaxLineBytes = 100
	var got []string
	for {
		c, err := cr.Next()
		if err == io.EOF {
			break
		}
		var le *LineError
		require.True(t, errors.As(err, &le), "line %d: %v", cr.Line(), err)
		got = append(got, c.ID+": "+err.Error())
	}
	assert.Equal(t, []string{
		`a: line 1: not valid UTF-8: byte 0xE9 at byte 32 of the line (a file saved in another encoding, such as Latin-1 or UTF-16? iconv -f LATIN1 -t UTF-8 converts one)`,
		`2: line 2: not valid UTF-8: byte 0xE9 at byte 21 of the line (a file saved in another encoding, such as Latin-1 or UTF-16? iconv -f LATIN1 -t UTF-8 converts one)`,
		`c: line 3: longer than 100 bytes, the case-line limit (--max-line-bytes raises it)`,
		`4: line 4: longer than 100 bytes, the case-line limit (--max-line-bytes raises it)`,
	}, got)
	for i, want := range []string{"a", "2", "c", "4"} {
		assert.Equal(t, want, strings.SplitN(got[i], ":", 2)[0])
	}
}
