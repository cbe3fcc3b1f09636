package engine

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readAll reads every case of src: a Case's ID, or "error: " and its line
// error, one entry a case line, as a caller sees them.
func readAll(t *testing.T, cr *CaseReader) []string {
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
	cr := NewCaseReader(strings.NewReader("\xEF\xBB\xBF" + line + "\n" + `{"input": {}, "output": 2}` + "\n"))
	assert.Equal(t, []string{"a", "2"}, readAll(t, cr), "the BOM is skipped; lines keep their numbers")

	// A BOM alone on the first line leaves it blank; a BOM anywhere else is
	// part of the line, so not JSON.
	cr = NewCaseReader(strings.NewReader("\xEF\xBB\xBF\n" + line + "\n\xEF\xBB\xBF" + line + "\n"))
	got := readAll(t, cr)
	require.Len(t, got, 2)
	assert.Equal(t, "a", got[0])
	assert.True(t, strings.HasPrefix(got[1], "error: line 3: invalid JSON at byte 0"), got[1])

	assert.Empty(t, readAll(t, NewCaseReader(strings.NewReader("\xEF\xBB\xBF"))), "a file of a BOM has no cases")
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
	got := readAll(t, NewCaseReader(strings.NewReader(src)))
	require.Len(t, got, 4, "%q", got)
	for i, line := range []string{"2", "3", "4"} {
		assert.True(t, strings.HasPrefix(got[i], "error: line "+line+": invalid JSON at byte 0"), got[i])
	}
	assert.Equal(t, "6", got[3])
}

func TestCaseIDSurrogates(t *testing.T) {
	parse := func(id string) (Case, error) {
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
