package engine

import (
	"testing"

	"github.com/skynetml/skynet/cpython"
	"github.com/stretchr/testify/require"
)

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
