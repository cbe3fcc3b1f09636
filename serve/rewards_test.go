package serve

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rewardCases puts each case line together from the request's own text:
// the prompt cut off the query as written (or, written otherwise, as
// decoded), labels as they are, null labels as none.
func TestRewardCases(t *testing.T) {
	tasks, err := rewardCases([]byte(`{"query": ["Q: 2+2? A: 4", "caf\u00e9 x", "other"], "prompts": ["Q: 2+2? A: ", "café", "Q"],
		"labels": [{"a":
		[1, 2]}, "4", null], "extra": 1}`))
	require.NoError(t, err)
	var lines []string
	for _, tk := range tasks {
		lines = append(lines, string(tk.Case))
	}
	assert.Equal(t, []string{
		`{"id":"0","input":{"prompt":"Q: 2+2? A: "},"output":"4","expected":{"label":{"a":
		[1, 2]}}}`,
		`{"id":"1","input":{"prompt":"café"},"output":" x","expected":{"label":"4"}}`,
		`{"id":"2","input":{"prompt":"Q"},"output":"other","expected":{"label":null}}`,
	}, lines)
	assert.Equal(t, []string{"0", "1", "2"}, []string{tasks[0].ID, tasks[1].ID, tasks[2].ID})

	tasks, err = rewardCases([]byte(`{"query": ["abc"], "prompts": null, "labels": null}`))
	require.NoError(t, err)
	assert.Equal(t, `{"id":"0","input":{"prompt":""},"output":"abc"}`, string(tasks[0].Case))
}

// The reply's numbers are floats as Python writes them (1.0, never 1).
func TestAppendFloats(t *testing.T) {
	got := string(appendFloats(nil, []float64{1, 0, 0.5, -2, 1e21, 1e-7}, nil))
	assert.Equal(t, "1.0,0.0,0.5,-2.0,1e+21,1e-07", got)
	assert.Equal(t, "0.0,1.0", string(appendFloats(nil, nil, []string{"", "exception"})))
}

// A rewards request of 1,000 samples is read into tasks with a few
// allocations in all, not a few a sample.
func BenchmarkRewardCases(b *testing.B) {
	var q, p, l []string
	for i := range 1000 {
		prompt := fmt.Sprintf("Question %d: what is %d times %d? ", i, i, i+1)
		p = append(p, fmt.Sprintf("%q", prompt))
		q = append(q, fmt.Sprintf("%q", prompt+fmt.Sprintf("The answer is %d.", i*(i+1))))
		l = append(l, fmt.Sprintf("%q", fmt.Sprint(i*(i+1))))
	}
	body := []byte(`{"query": [` + strings.Join(q, ",") + `], "prompts": [` + strings.Join(p, ",") + `], "labels": [` + strings.Join(l, ",") + `]}`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		tasks, err := rewardCases(bytes.Clone(body))
		if err != nil || len(tasks) != 1000 {
			b.Fatal(err)
		}
	}
}
