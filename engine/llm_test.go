package engine

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skynetml/skynet/llm"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// judgeServer is a fake OpenAI-compatible endpoint: it passes answers that
// contain "4", "Paris" or "Yes", after latency, and records auth headers.
type judgeServer struct {
	*httptest.Server
	mu    sync.Mutex
	auth  []string
	delay time.Duration
	hang  bool
}

func newJudge(t testing.TB, delay time.Duration) *judgeServer {
	j := &judgeServer{delay: delay}
	j.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct{ Content string } `json:"messages"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		j.mu.Lock()
		j.auth = append(j.auth, r.Header.Get("Authorization"))
		hang := j.hang
		j.mu.Unlock()
		if hang {
			<-r.Context().Done()
			return
		}
		time.Sleep(j.delay)
		fmt.Fprint(w, judgeReply(req.Messages[len(req.Messages)-1].Content))
	}))
	t.Cleanup(j.Close)
	return j
}

// judgeReply is the fake judge's chat-completions reply to a prompt.
func judgeReply(input string) string {
	verdict := "FAIL. The answer is wrong."
	for _, good := range []string{"Answer: 4", "Paris", "Yes"} {
		if strings.Contains(input, good) {
			verdict = "PASS. The answer is right."
		}
	}
	return fmt.Sprintf(`{"choices": [{"message": {"content": %q}}], "usage": {"prompt_tokens": 30, "completion_tokens": 6}}`, verdict)
}

// judgeTransport is the fake judge without the network: each request is
// answered after delay by judgeReply, in memory. It measures the engine and
// the llm client alone, as a remote model's server costs this host nothing.
type judgeTransport time.Duration

func (d judgeTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	var req struct {
		Messages []struct{ Content string } `json:"messages"`
	}
	err := json.NewDecoder(r.Body).Decode(&req)
	r.Body.Close()
	if err != nil || len(req.Messages) == 0 {
		return nil, fmt.Errorf("judge transport: bad request: %v", err)
	}
	t := time.NewTimer(time.Duration(d))
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.Context().Done():
		return nil, r.Context().Err()
	}
	body := judgeReply(req.Messages[len(req.Messages)-1].Content)
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)), Request: r}, nil
}

func judgeClient(t *testing.T, j *judgeServer) *llm.Client {
	c, err := llm.New(llm.Config{ReflectionModel: "openai/gpt-4o-mini", BaseURL: j.URL + "/v1",
		Prices: llm.Prices{"openai/gpt-4o-mini": {Input: 0.15e-6, Output: 0.6e-6}}})
	require.NoError(t, err)
	return c
}

func TestJudgeMetric(t *testing.T) {
	j := newJudge(t, 0)
	client := judgeClient(t, j)
	e := open(t, Options{Metric: "../testdata/judge/metric.py", LLM: client})
	var got []string
	for _, c := range readCases(t, "../testdata/judge/cases.jsonl") {
		r := e.Score(ctx, c)
		require.Nil(t, r.Err, "%+v", r.Err)
		got = append(got, fmt.Sprintf("%s %.0f %s", r.ID, r.Score, r.Feedback))
	}
	assert.Equal(t, []string{
		"q1 1 PASS. The answer is right.",
		"q2 0 FAIL. The answer is wrong.",
		"q3 1 PASS. The answer is right.",
	}, got)
	st := e.Stats()
	assert.Equal(t, int64(3), st.ScoreCalls)
	e.Score(ctx, Case{ID: "again", Input: map[string]any{"question": "?"}, Output: "4"})
	run := e.Stats().Sub(st)
	assert.Equal(t, int64(1), run.ScoreCalls, "one run's counts")
	assert.Equal(t, int64(1), run.Models[llm.RoleMetric].Calls)
	s := st.Models[llm.RoleMetric]
	assert.Equal(t, int64(3), s.Calls)
	assert.Equal(t, int64(90), s.InputTokens)
	assert.InDelta(t, 3*(30*0.15e-6+6*0.6e-6), s.CostUSD, 1e-15)
}

// The GIL is released while a case waits on the model: with 8 workers, 32
// cases of 50 ms each take about 4 x 50 ms, not 32 x 50 ms.
func TestModelCallsRunConcurrently(t *testing.T) {
	j := newJudge(t, 50*time.Millisecond)
	e := open(t, Options{Metric: "../testdata/judge/metric.py", LLM: judgeClient(t, j), Threads: 8})
	cases := make([]Case, 32)
	for i := range cases {
		cases[i] = Case{ID: fmt.Sprint(i), Input: map[string]any{"question": "2+2?"}, Output: "4"}
	}
	start := time.Now()
	n := 0
	for _, r := range e.ScoreAll(ctx, sliceSeq(cases), 0) {
		require.Nil(t, r.Err)
		n++
	}
	elapsed := time.Since(start)
	assert.Equal(t, 32, n)
	assert.Less(t, elapsed, time.Second, "serialised would be 1.6 s; took %s", elapsed)
}

func sliceSeq(cases []Case) func(func(Case) bool) {
	return func(yield func(Case) bool) {
		for _, c := range cases {
			if !yield(c) {
				return
			}
		}
	}
}

func TestCaseTimeoutCutsAModelCall(t *testing.T) {
	j := newJudge(t, 0)
	j.hang = true
	e := open(t, Options{Metric: "../testdata/judge/metric.py", LLM: judgeClient(t, j), Timeout: 300 * time.Millisecond})
	start := time.Now()
	r := e.Score(ctx, Case{ID: "h", Input: map[string]any{"question": "?"}, Output: "4"})
	require.NotNil(t, r.Err)
	assert.Equal(t, KindTimeout, r.Err.Kind)
	assert.Less(t, time.Since(start), 2*time.Second)
	j.mu.Lock()
	j.hang = false
	j.mu.Unlock()
	r = e.Score(ctx, Case{ID: "n", Input: map[string]any{"question": "?"}, Output: "4"})
	require.Nil(t, r.Err, "%+v", r.Err)
	assert.Equal(t, 1.0, r.Score)
}

// TestSecrets runs a child process with an API key in its environment: Go
// uses it, Python never sees it.
func TestSecrets(t *testing.T) {
	if os.Getenv("SKYNET_TEST_SECRETS_CHILD") != "" {
		return
	}
	j := newJudge(t, 0)
	metric := writeMetric(t, `
import os, skynet
def score(input, output, expected=None):
    seen = [k for k in ("OPENAI_API_KEY", "SKYNET_API_KEY") if k in os.environ]
    return 1.0, {"feedback": f"{skynet.llm('Judge.', input='Answer: 4')} seen={seen}"}
`)
	cmd := exec.Command(os.Args[0], "-test.run=^TestSecretsChild$", "-test.v")
	cmd.Env = append(os.Environ(), "SKYNET_TEST_SECRETS_CHILD="+metric, "OPENAI_API_KEY=sk-child-secret",
		"SKYNET_LLM_BASE_URL="+j.URL+"/v1", "SKYNET_METRIC_MODEL=openai/gpt-4o-mini")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	assert.Contains(t, string(out), "FEEDBACK: PASS. The answer is right. seen=[]\n")
	assert.NotContains(t, string(out), "sk-child-secret")
	assert.Equal(t, []string{"Bearer sk-child-secret"}, j.auth)
}

func TestSecretsChild(t *testing.T) {
	metric := os.Getenv("SKYNET_TEST_SECRETS_CHILD")
	if metric == "" {
		t.Skip("runs as TestSecrets' child process")
	}
	e := open(t, Options{Metric: metric})
	r := e.Score(ctx, Case{ID: "1", Input: map[string]any{}})
	require.Nil(t, r.Err, "%+v", r.Err)
	fmt.Printf("FEEDBACK: %s\n", r.Feedback)
}
