package caseio

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/skynetml/skynet/engine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// AppendResult must write what encoding/json would, for every kind of text
// and number a metric can produce.
func TestAppendResultMatchesEncodingJSON(t *testing.T) {
	results := []engine.Result{
		{ID: "1", Score: 0.85, Feedback: "Correct.", Scores: map[string]float64{"b": 1, "a": 1e-7}, Duration: 1234567 * time.Nanosecond},
		{ID: "ünï \"quoted\" \\ back", Score: 1e21, Feedback: "tab\tnew\nline\r\x00\x1f ✓ <html>&", Scores: nil},
		{ID: "bad utf8 \xff\xfe end", Score: -0.5, Feedback: "\u2028 sep", Logs: "printed\n",
			Warnings: []string{`side info key "x" dropped`}, Extra: map[string]any{"trace": []any{int64(1), "a"}}},
		{ID: "e", Err: &engine.CaseError{Kind: engine.KindException, Message: "ZeroDivisionError: division by zero", Traceback: "Traceback...\n"},
			Feedback: "ZeroDivisionError: division by zero"},
	}
	for _, r := range results {
		var fast, slow ResultLine
		line := AppendResult(nil, r, false)
		require.NoError(t, json.Unmarshal(line, &fast), string(line))
		want := ResultLine{ID: r.ID, Score: r.Score, Feedback: r.Feedback, Scores: r.Scores, MS: float64(r.Duration.Microseconds()) / 1000,
			Extra: r.Extra, Warnings: r.Warnings, Logs: r.Logs}
		if want.Scores == nil {
			want.Scores = map[string]float64{}
		}
		if r.Err != nil {
			want.Error = &ErrorField{Kind: r.Err.Kind, Message: r.Err.Message, Traceback: r.Err.Traceback}
		}
		b, err := json.Marshal(want)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(b, &slow))
		assert.Equal(t, slow, fast)
	}
}

// A results line holds the named scores in the order the metric returned
// them (Result.ScoreNames), not sorted, and ParseResult reads that order
// back; a Result built without names is written sorted, as before.
func TestResultKeepsTheMetricsScoreOrder(t *testing.T) {
	r := engine.Result{ID: "1", Scores: map[string]float64{"zeta": 1, "alpha": 0.5, "mid": 0.25}, ScoreNames: []string{"zeta", "alpha", "mid"}}
	line := AppendResult(nil, r, false)
	assert.Contains(t, string(line), `"scores":{"zeta":1,"alpha":0.5,"mid":0.25}`)
	back, err := ParseResult(line)
	require.NoError(t, err)
	assert.Equal(t, []string{"zeta", "alpha", "mid"}, back.ScoreNames)

	r.ScoreNames = nil
	assert.Contains(t, string(AppendResult(nil, r, false)), `"scores":{"alpha":0.5,"mid":0.25,"zeta":1}`)
}
