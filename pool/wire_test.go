package pool

import (
	"testing"

	"github.com/skynetml/skynet/engine"
	"github.com/stretchr/testify/assert"
)

// A Record crossing from a worker keeps the order the metric returned its
// named scores in, as the results line does.
func TestRecordKeepsTheMetricsScoreOrder(t *testing.T) {
	r := engine.Result{ID: "1", Scores: map[string]float64{"zeta": 1, "alpha": 0.5, "mid": 0.25}, ScoreNames: []string{"zeta", "alpha", "mid"}}
	var names []string
	rec := RecordOf(r, false)
	rec.EachScore(func(name []byte, _ float64) { names = append(names, string(name)) })
	assert.Equal(t, []string{"zeta", "alpha", "mid"}, names)
}
