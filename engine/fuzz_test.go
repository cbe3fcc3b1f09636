package engine

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/skynetml/skynet/cpython"
	"github.com/stretchr/testify/require"
)

// FuzzParseCase: any line gives a Case or a *LineError naming its line,
// never a panic.
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
	f.Fuzz(func(t *testing.T, line []byte) {
		c, err := ParseCase(line, 3)
		if err != nil {
			var le *LineError
			require.True(t, errors.As(err, &le), "%v", err)
			require.Equal(t, 3, le.Line)
			require.True(t, strings.HasPrefix(err.Error(), "line 3: "))
			return
		}
		require.NotNil(t, c.Input)
		// A string id reads as encoding/json reads it, escaped or not.
		var withID struct{ ID json.RawMessage }
		if json.Unmarshal(line, &withID) == nil && len(withID.ID) > 0 && withID.ID[0] == '"' {
			var id string
			require.NoError(t, json.Unmarshal(withID.ID, &id))
			require.Equal(t, id, c.ID)
		}
	})
}

// FuzzValidateReturn: whatever a metric returns (any decodable value), the
// validator accepts it or says which rule it broke, and never panics.
func FuzzValidateReturn(f *testing.F) {
	for _, s := range []string{
		`[0.8, {"feedback": "Close."}]`, `[1, {"feedback": "OK", "scores": {"format": 1.0}}]`,
		`0.8`, `[0.8, "Close."]`, `[0.8, {}]`, `["0.8", {"feedback": "OK"}]`,
		`[0.8, {"feedback": "OK", "scores": {"a": "high"}}]`, `[true, {"feedback": "x"}]`,
		`[1e400, {"feedback": "x"}]`, `[1, {"feedback": "x", "extra": [1, {"b": null}]}]`,
	} {
		b, err := cpython.AppendJSON(nil, []byte(s))
		require.NoError(f, err)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, buf []byte) {
		v, err := cpython.Decode(buf)
		if err != nil {
			return
		}
		rv, err := validateReturn(v)
		if err == nil {
			require.False(t, rv.score != rv.score, "NaN score accepted")
		} else {
			require.NotEmpty(t, err.Error())
		}
	})
}
