package engine

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRewardExample(t *testing.T) {
	e := open(t, Options{Metric: "../testdata/reward/metric.py"})
	require.NotNil(t, e.RewardSpec())
	checks := e.Check(ctx, readCases(t, "../testdata/reward/cases.jsonl"))
	require.Len(t, checks, 4)
	assert.Equal(t, CheckRewardSpec, checks[2].Name)
	assert.True(t, checks[2].OK)
	want := map[string][4]float64{ // total, accuracy, speed, cost
		"r1": {0.85, 1, 0.5, 0.5},
		"r2": {0.2*0.8 + 0.1*(0.01/0.012), 0, 0.8, 0.01 / 0.012},
		"r3": {1, 1, 1, 1},
		"r4": {0.7 + 0.2*0.25, 1, 0.25, 0},
		"r5": {0.7, 1, 0, 0},
		"r6": {0.7 + 0.2*0.8 + 0.1*(0.01/0.012), 1, 0.8, 0.01 / 0.012}, // the README's worked example
	}
	for _, c := range readCases(t, "../testdata/reward/cases.jsonl") {
		r := e.Score(ctx, c)
		require.Nil(t, r.Err, "%+v", r.Err)
		w := want[c.ID]
		assert.InDelta(t, w[0], r.Score, 1e-12, c.ID)
		assert.InDelta(t, w[1], r.Scores["accuracy"], 1e-12, c.ID)
		assert.InDelta(t, w[2], r.Scores["speed"], 1e-12, c.ID)
		assert.InDelta(t, w[3], r.Scores["cost"], 1e-12, c.ID)
	}
}

func TestRewardSpecChecks(t *testing.T) {
	files, _ := filepath.Glob("../testdata/reward_spec/*.py")
	require.NotEmpty(t, files)
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			e, err := Open(Options{Metric: path})
			var ce *CheckError
			if errors.As(err, &ce) {
				assert.Equal(t, CheckRewardSpec, ce.Failed().Name)
				want := expectation(t, path, "check")
				assert.Equal(t, want, ce.Failed().Message, "the message does not repeat the check's name")
				assert.Equal(t, "REWARD_SPEC: "+want, ce.Error())
				return
			}
			require.NoError(t, err)
			defer e.Close()
			want := expectation(t, path, "case")
			r := e.Score(ctx, Case{ID: "1", Input: map[string]any{}, Output: "x", Expected: map[string]any{}})
			require.NotNil(t, r.Err)
			assert.Equal(t, KindException, r.Err.Kind)
			assert.Equal(t, want, r.Err.Message)
			assert.True(t, strings.HasPrefix(r.Feedback, "ValueError: reward: accuracy"))
		})
	}
}
