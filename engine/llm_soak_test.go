package engine

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skynetml/skynet/llm"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestModelFaultSoak scores many judge cases against a server that injects
// faults by case: 500 for good, malformed JSON, a hang past the case's time
// limit, or one 429 before answering. Every case gets exactly one result,
// the error counts match the faults injected, and RSS stays flat. The
// default is a short run for make test; SKYNET_LLM_SOAK=100000 is the full one.
func TestModelFaultSoak(t *testing.T) {
	total := soakCases(t, "SKYNET_LLM_SOAK", 2000)
	var mu sync.Mutex
	seen429 := map[string]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct{ Content string } `json:"messages"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		input := req.Messages[len(req.Messages)-1].Content
		switch {
		case strings.Contains(input, "fault=500"):
			http.Error(w, "injected", http.StatusInternalServerError)
		case strings.Contains(input, "fault=malformed"):
			fmt.Fprint(w, `{"choices": [{"message": `)
		case strings.Contains(input, "fault=hang"):
			<-r.Context().Done()
		case strings.Contains(input, "fault=429"):
			mu.Lock()
			first := !seen429[input]
			if first {
				seen429[input] = true
			} else {
				delete(seen429, input) // the retry: forget it, so the test's own memory stays flat
			}
			mu.Unlock()
			if first {
				w.Header().Set("Retry-After", "0.01")
				w.WriteHeader(http.StatusTooManyRequests)
				return
			}
			fallthrough
		default:
			fmt.Fprint(w, `{"choices": [{"message": {"content": "PASS. fine"}}], "usage": {"prompt_tokens": 10, "completion_tokens": 2}}`)
		}
	}))
	defer srv.Close()
	client, err := llm.New(llm.Config{ReflectionModel: "openai/judge", BaseURL: srv.URL + "/v1", MaxRetries: 1, MaxInFlight: 256})
	require.NoError(t, err)
	metric := writeMetric(t, `
from skynet import llm
def score(input, output, expected=None):
    verdict = llm("Judge.", input=f"case={input['n']} fault={input['fault']}")
    return (1.0 if verdict.startswith("PASS") else 0.0), {"feedback": verdict}
`)
	// A 500 and its one retry fit well inside the time limit; the timings
	// here are tuned for 64 threads.
	e := open(t, Options{Metric: metric, LLM: client, Threads: 64, Timeout: time.Second})
	faults := []string{"none", "none", "none", "none", "none", "none", "429", "500", "malformed", "hang"}
	want := map[string]int{}
	cases := func(from, to int) func(func(Case) bool) {
		return func(yield func(Case) bool) {
			for i := from; i < to; i++ {
				f := faults[i%len(faults)]
				if f == "hang" && i%100 != 9 { // hangs hold a worker for the whole time limit: keep them rarer
					f = "none"
				}
				if !yield(Case{ID: strconv.Itoa(i), Input: map[string]any{"n": i, "fault": f}}) {
					return
				}
			}
		}
	}
	for i := 0; i < total; i++ {
		f := faults[i%len(faults)]
		if f == "hang" && i%100 != 9 {
			f = "none"
		}
		want[map[string]string{"none": "ok", "429": "ok", "500": "exception", "malformed": "exception", "hang": "timeout"}[f]]++
	}
	got := map[string]int{}
	run := func(from, to int) {
		n := from
		for i, r := range e.ScoreAll(ctx, cases(from, to), 0) {
			require.Equal(t, strconv.Itoa(from+i), r.ID, "results keep their identity, in order")
			kind := "ok"
			if r.Err != nil {
				kind = string(r.Err.Kind)
			}
			got[kind]++
			n++
		}
		require.Equal(t, to, n, "every case gets exactly one result")
	}
	warm := min(total/2, 10_000)
	run(0, warm)
	before := rssKB(t)
	run(warm, total)
	after := rssKB(t)
	assert.Equal(t, want, got)
	t.Logf("%d cases: %v; RSS %d kB -> %d kB", total, got, before, after)
	if !raceEnabled && total >= 10000 {
		assert.LessOrEqual(t, after-before, 5*1024, "RSS grew by more than 5 MB")
	}
}
