package serve_test

// The handler against a real pool: its worker processes are this test
// binary, which package pool's init takes over.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/skynetml/skynet/engine"
	"github.com/skynetml/skynet/pool"
	"github.com/skynetml/skynet/serve"
)

// testMetric scores 1 when output is expected's label; some outputs ask
// it to misbehave: "raise", "crash" (os._exit), "slow" (sleeps
// input["sleep"] seconds). With input["log"], each call appends a line to
// that file.
const testMetric = `
import os, time
def score(input, output, expected=None):
    if "log" in input:
        with open(input["log"], "a") as f:
            f.write("x\n")
    if output == "raise":
        raise ValueError("asked to raise")
    if output == "crash":
        os._exit(3)
    if output == "slow":
        time.sleep(float(input.get("sleep", 0.2)))
    want = (expected or {}).get("label")
    return (1.0 if output == want else 0.0), {"feedback": "prompt=%r output=%r label=%r" % (input.get("prompt"), output, want)}
`

// newServer opens a pool on testMetric and serves it.
func newServer(t *testing.T, processes int, opts serve.Options) (*serve.Server, *httptest.Server, *pool.Pool) {
	t.Helper()
	dir := t.TempDir()
	metric := filepath.Join(dir, "metric.py")
	require.NoError(t, os.WriteFile(metric, []byte(testMetric), 0o644))
	p, err := pool.Open(pool.Options{Options: engine.Options{Metric: metric, Timeout: 20 * time.Second}, Processes: processes, Stderr: io.Discard})
	require.NoError(t, err)
	s := serve.New(p, opts)
	ts := httptest.NewServer(s)
	t.Cleanup(func() {
		ts.Close()
		p.Close()
	})
	return s, ts, p
}

func post(t *testing.T, url, contentType, body string, header ...string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", contentType)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b), resp.Header
}

func get(t *testing.T, url string, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

type result struct {
	ID       string  `json:"id"`
	Score    float64 `json:"score"`
	Feedback string  `json:"feedback"`
	Error    *struct {
		Kind    string `json:"kind"`
		Message string `json:"message"`
	} `json:"error"`
}

func kindOf(r result) string {
	if r.Error == nil {
		return ""
	}
	return r.Error.Kind
}

func TestServeScoreJSONKeepsOrderAndBadCases(t *testing.T) {
	_, ts, _ := newServer(t, 2, serve.Options{})
	body := `{"cases": [
		{"id": "a", "input": {}, "output": "x", "expected": {"label": "x"}},
		"not a case",
		{"id": "c", "input": {}},
		{"input": {}, "output": "y", "expected": {"label": "x"}},
		{"id": "e", "input": {}, "output": "raise"}
	]}`
	code, out, h := post(t, ts.URL+"/v1/score", "application/json", body)
	require.Equal(t, http.StatusOK, code, out)
	assert.Equal(t, "application/json", h.Get("Content-Type"))
	var reply struct{ Results []result }
	require.NoError(t, json.Unmarshal([]byte(out), &reply), out)
	require.Len(t, reply.Results, 5)
	ids := []string{"a", "2", "c", "4", "e"}
	kinds := []string{"", "input", "input", "", "exception"}
	for i, r := range reply.Results {
		assert.Equal(t, ids[i], r.ID, "result %d", i)
		assert.Equal(t, kinds[i], kindOf(r), "result %d: %s", i, r.Feedback)
	}
	assert.Equal(t, 1.0, reply.Results[0].Score)
	assert.Contains(t, reply.Results[1].Error.Message, "line 2: a case must be a JSON object")
	assert.Contains(t, reply.Results[2].Error.Message, `line 3: "output" is missing`)

	// The same cases as NDJSON: the same lines, one a line.
	var lines []string
	for _, l := range strings.Split(body, "\n")[1:6] {
		lines = append(lines, strings.TrimSuffix(strings.TrimSpace(l), ","))
	}
	code, nd, h := post(t, ts.URL+"/v1/score", "application/x-ndjson", strings.Join(lines, "\n")+"\n")
	require.Equal(t, http.StatusOK, code, nd)
	assert.Equal(t, "application/x-ndjson", h.Get("Content-Type"))
	got := strings.Split(strings.TrimSuffix(nd, "\n"), "\n")
	require.Len(t, got, 5)
	for i, l := range got {
		var r result
		require.NoError(t, json.Unmarshal([]byte(l), &r), l)
		assert.Equal(t, ids[i], r.ID)
		assert.Equal(t, kinds[i], kindOf(r))
	}

	code, out, _ = post(t, ts.URL+"/v1/score", "application/json", `{"cases": []}`)
	assert.Equal(t, http.StatusOK, code)
	assert.JSONEq(t, `{"results": []}`, out)
}

func TestServeBadRequests(t *testing.T) {
	_, ts, _ := newServer(t, 1, serve.Options{})
	for _, c := range []struct{ body, want string }{
		{`{"cases": [{"input": {}, "output": 1}, {"input": }]}`, "case 1 (counting from 0) is not JSON"},
		{`[1, 2]`, `the body must be a JSON object {"cases": [...]}`},
		{`{"case": []}`, `unknown field "case"`},
		{`{}`, `"cases" is missing`},
		{`{"cases": {}}`, `"cases" must be a list`},
		{`{"cases": [] `, "the body is not a JSON object"},
		{`{"cases": []} {}`, "more than one JSON value"},
		{`{"cases": [], "cases": []}`, `"cases" is given twice`},
		{"{\"cases\": [{\"id\": \"a\", \"input\": {\"m\": \"caf\xe9\"}, \"output\": 1}]}", "the body is not a JSON object {\"cases\": [...]}: "},
		{`{"cases": [{"id": "x", "input": {}, "output": 1}, {"input": {}, "output": 2}, {"id": "x", "input": {}, "output": 3}]}`,
			`case 2 (counting from 0): case id "x" is also the id of case 0`},
	} {
		code, out, _ := post(t, ts.URL+"/v1/score", "application/json", c.body)
		assert.Equal(t, http.StatusBadRequest, code, c.body)
		var e struct{ Error string }
		require.NoError(t, json.Unmarshal([]byte(out), &e), out)
		assert.Contains(t, e.Error, c.want, c.body)
	}
	code, out, _ := post(t, ts.URL+"/v1/score", "application/x-ndjson", "{\"id\": 1, \"input\": {}, \"output\": 1}\n\n{\"id\": 1, \"input\": {}, \"output\": 2}\n")
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, out, `line 3: case id \"1\" is also the id of line 1`)
	code, _ = get(t, ts.URL+"/v1/score")
	assert.Equal(t, http.StatusMethodNotAllowed, code)
}

func TestServeLimits(t *testing.T) {
	_, ts, _ := newServer(t, 1, serve.Options{MaxBody: 200, MaxInflight: 2})
	big := `{"cases": [{"input": {"pad": "` + strings.Repeat("x", 300) + `"}, "output": 1}]}`
	code, out, _ := post(t, ts.URL+"/v1/score", "application/json", big)
	assert.Equal(t, http.StatusRequestEntityTooLarge, code, out)
	assert.Contains(t, out, "--max-body")

	code, out, _ = post(t, ts.URL+"/v1/score", "application/json", `{"cases": [{"input": {}, "output": 1}, {"input": {}, "output": 1}, {"input": {}, "output": 1}]}`)
	assert.Equal(t, http.StatusRequestEntityTooLarge, code, "3 cases can never fit in 2: %s", out)

	// Two slow cases take the whole budget; a third case waits its turn.
	done := make(chan int)
	go func() {
		code, _, _ := post(t, ts.URL+"/v1/score", "application/json", `{"cases": [{"input": {"sleep": 1}, "output": "slow"}, {"input": {"sleep": 1}, "output": "slow"}]}`)
		done <- code
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, m := get(t, ts.URL+"/metrics")
		if strings.Contains(m, "skynet_cases_in_flight 2\n") {
			break
		}
		require.True(t, time.Now().Before(deadline), "the slow request never got in flight")
		time.Sleep(10 * time.Millisecond)
	}
	code, out, h := post(t, ts.URL+"/v1/score", "application/json", `{"cases": [{"input": {}, "output": 1}]}`)
	assert.Equal(t, http.StatusTooManyRequests, code, out)
	assert.Equal(t, "1", h.Get("Retry-After"))
	assert.Equal(t, http.StatusOK, <-done)
	code, _, _ = post(t, ts.URL+"/v1/score", "application/json", `{"cases": [{"input": {}, "output": 1}]}`)
	assert.Equal(t, http.StatusOK, code, "the budget is given back")
}

func TestServeToken(t *testing.T) {
	_, ts, _ := newServer(t, 1, serve.Options{Token: "s3cret"})
	body := `{"cases": [{"input": {}, "output": 1}]}`
	for _, auth := range []string{"", "Bearer wrong", "s3cret", "Bearer s3cret2", "bearer s3cret"} {
		code, out, h := post(t, ts.URL+"/v1/score", "application/json", body, "Authorization", auth)
		assert.Equal(t, http.StatusUnauthorized, code, "%q: %s", auth, out)
		assert.NotEmpty(t, h.Get("WWW-Authenticate"))
	}
	code, _ := get(t, ts.URL+"/metrics")
	assert.Equal(t, http.StatusUnauthorized, code)
	code, _ = get(t, ts.URL+"/healthz")
	assert.Equal(t, http.StatusOK, code, "a health probe carries no token")
	code, out, _ := post(t, ts.URL+"/v1/score", "application/json", body, "Authorization", "Bearer s3cret")
	assert.Equal(t, http.StatusOK, code, out)
	code, _ = get(t, ts.URL+"/metrics", "Authorization", "Bearer s3cret")
	assert.Equal(t, http.StatusOK, code)
}

func TestServeRewards(t *testing.T) {
	_, ts, _ := newServer(t, 2, serve.Options{})
	code, out, _ := post(t, ts.URL+"/v1/rewards", "application/json", `{
		"query": ["Q: 2+2? A: 4", "other prompt 5", "Q: x? raise"],
		"prompts": ["Q: 2+2? A: ", "Q: ?", "Q: x? "],
		"labels": ["4", "4", "y"]}`)
	require.Equal(t, http.StatusOK, code, out)
	var r struct {
		Rewards   []float64            `json:"rewards"`
		Scores    []float64            `json:"scores"`
		ExtraLogs map[string][]float64 `json:"extra_logs"` // numbers only: OpenRLHF makes each a tensor
		Feedback  []string             `json:"feedback"`
		Errors    []*string            `json:"errors"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &r), out)
	assert.Equal(t, []float64{1, 0, 0}, r.Rewards)
	assert.Equal(t, r.Rewards, r.Scores)
	assert.Equal(t, map[string][]float64{"failed": {0, 0, 1}}, r.ExtraLogs)
	require.Len(t, r.Feedback, 3)
	assert.Equal(t, "prompt='Q: 2+2? A: ' output='4' label='4'", r.Feedback[0], "the prompt is cut off the query")
	assert.Equal(t, "prompt='Q: ?' output='other prompt 5' label='4'", r.Feedback[1], "a query without its prompt is the output whole")
	assert.Contains(t, r.Feedback[2], "asked to raise")
	require.Len(t, r.Errors, 3)
	assert.Nil(t, r.Errors[0])
	assert.Nil(t, r.Errors[1])
	require.NotNil(t, r.Errors[2])
	assert.Equal(t, "exception", *r.Errors[2])

	// No prompts, no labels: the whole query is the output, expected null.
	code, out, _ = post(t, ts.URL+"/v1/rewards", "application/json", `{"query": ["abc"]}`)
	require.Equal(t, http.StatusOK, code, out)
	assert.Contains(t, out, `"prompt='' output='abc' label=None"`)

	for _, c := range []struct{ body, want string }{
		{`{"query": ["a", "b"], "prompts": ["a"]}`, `"prompts" has 1 items and "query" 2`},
		{`{"query": ["a"], "labels": []}`, `"labels" has 0 items and "query" 1`},
		{`{"prompts": ["a"]}`, `"query" is missing`},
		{`{"query": ["a", 5]}`, `query[1] must be a string, got 5`},
		{`{"query": `, `the body is not a JSON object`},
		{`{"query": "abc"}`, `"query" must be an array, got "abc"`},
		{`{"query": ["a"], "prompts": [1]}`, `prompts[0] must be a string, got 1`},
		{`{"query": null}`, `"query" is missing`},
	} {
		code, out, _ := post(t, ts.URL+"/v1/rewards", "application/json", c.body)
		assert.Equal(t, http.StatusBadRequest, code, c.body)
		var e struct{ Error string }
		require.NoError(t, json.Unmarshal([]byte(out), &e), out)
		assert.Contains(t, e.Error, c.want, c.body)
	}
}

func TestServeCrashCostsOneCase(t *testing.T) {
	_, ts, p := newServer(t, 1, serve.Options{})
	code, out, _ := post(t, ts.URL+"/v1/score", "application/x-ndjson",
		`{"id": "a", "input": {}, "output": "x", "expected": {"label": "x"}}`+"\n"+
			`{"id": "b", "input": {}, "output": "crash"}`+"\n"+
			`{"id": "c", "input": {}, "output": "x", "expected": {"label": "x"}}`+"\n")
	require.Equal(t, http.StatusOK, code, out)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3)
	var rs []result
	for _, l := range lines {
		var r result
		require.NoError(t, json.Unmarshal([]byte(l), &r))
		rs = append(rs, r)
	}
	assert.Equal(t, []string{"", "crash", ""}, []string{kindOf(rs[0]), kindOf(rs[1]), kindOf(rs[2])})
	assert.GreaterOrEqual(t, p.Stats().Restarts, 1)
	code, out, _ = post(t, ts.URL+"/v1/score", "application/json", `{"cases": [{"input": {}, "output": "x", "expected": {"label": "x"}}]}`)
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, out, `"score":1,`, "the server scores on after a crash")
	_, m := get(t, ts.URL+"/metrics")
	assert.Contains(t, m, `skynet_cases_failed_total{kind="crash"} 1`)
	assert.Regexp(t, `skynet_worker_restarts_total [1-9]`, m)
}

func TestServeDrain(t *testing.T) {
	s, ts, _ := newServer(t, 1, serve.Options{})
	code, _ := get(t, ts.URL+"/healthz")
	assert.Equal(t, http.StatusOK, code)
	done := make(chan string)
	go func() {
		_, out, _ := post(t, ts.URL+"/v1/score", "application/x-ndjson",
			`{"input": {"sleep": 0.5}, "output": "slow"}`+"\n"+`{"input": {"sleep": 0.5}, "output": "slow"}`+"\n")
		done <- out
	}()
	for s.Inflight() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	s.Drain()
	code, _ = get(t, ts.URL+"/healthz")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	code, _, _ = post(t, ts.URL+"/v1/score", "application/json", `{"cases": []}`)
	assert.Equal(t, http.StatusServiceUnavailable, code)
	select {
	case <-s.Idle():
		t.Fatal("idle with a request in flight")
	default:
	}
	out := <-done
	assert.Equal(t, 2, strings.Count(out, `"error":null`), "the request in flight is answered whole: %s", out)
	select {
	case <-s.Idle():
	case <-time.After(5 * time.Second):
		t.Fatal("not idle once the request in flight finished")
	}
}

func TestServeMetrics(t *testing.T) {
	_, ts, _ := newServer(t, 1, serve.Options{})
	post(t, ts.URL+"/v1/score", "application/x-ndjson", `{"input": {}, "output": 1}`+"\n"+`{"input": {}, "output": "raise"}`+"\n"+"[]\n")
	post(t, ts.URL+"/v1/score", "application/json", `nope`)
	code, m := get(t, ts.URL+"/metrics")
	require.Equal(t, http.StatusOK, code)
	for _, want := range []string{
		"# TYPE skynet_cases_scored_total counter\nskynet_cases_scored_total 1\n",
		`skynet_cases_failed_total{kind="exception"} 1` + "\n",
		`skynet_cases_failed_total{kind="input"} 1` + "\n",
		"# TYPE skynet_score_call_seconds histogram\n",
		`skynet_score_call_seconds_bucket{le="+Inf"} 2` + "\n",
		"skynet_score_call_seconds_count 2\n",
		"skynet_cases_in_flight 0\n",
		"skynet_worker_restarts_total 0\n",
		`skynet_http_requests_total{path="/v1/score",code="200"} 1` + "\n",
		`skynet_http_requests_total{path="/v1/score",code="400"} 1` + "\n",
	} {
		assert.Contains(t, m, want)
	}
}

// A client that goes away cancels its cases not yet started: the metric
// is called for a few, not all.
func TestServeClientDisconnectCancels(t *testing.T) {
	_, ts, p := newServer(t, 1, serve.Options{})
	log := filepath.Join(t.TempDir(), "calls")
	var b bytes.Buffer
	const n = 40
	for i := range n {
		fmt.Fprintf(&b, `{"id": "%d", "input": {"sleep": 0.1, "log": %q}, "output": "slow"}`+"\n", i, log)
	}
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+"/v1/score", &b)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-ndjson")
	var wg sync.WaitGroup
	wg.Go(func() {
		if resp, err := http.DefaultClient.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
	calls := func() int {
		b, _ := os.ReadFile(log)
		return bytes.Count(b, []byte("\n"))
	}
	deadline := time.Now().Add(10 * time.Second)
	for calls() < 2 {
		require.True(t, time.Now().Before(deadline), "no call started")
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	deadline = time.Now().Add(10 * time.Second)
	for {
		_, m := get(t, ts.URL+"/metrics")
		if strings.Contains(m, "skynet_cases_in_flight 0\n") {
			assert.Regexp(t, `skynet_cases_failed_total\{kind="canceled"\} [1-9]`, m)
			break
		}
		require.True(t, time.Now().Before(deadline), "the cases of a gone client stay in flight")
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // a call under way when the client left may still log
	got := calls()
	assert.Less(t, got, n/2, "the cases not started were canceled")
	assert.Less(t, p.Stats().ScoreCalls, int64(n/2))
}

// TestServeLivez: /livez answers 200 while the process serves, draining
// included (when /healthz says 503), and 503 naming why once the pool gave
// up on a metric that crashes every worker: only a restart helps then.
func TestServeLivez(t *testing.T) {
	s, ts, _ := newServer(t, 1, serve.Options{})
	code, body := get(t, ts.URL+"/livez")
	assert.Equal(t, http.StatusOK, code, body)
	s.Drain()
	code, _ = get(t, ts.URL+"/healthz")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	code, _ = get(t, ts.URL+"/livez")
	assert.Equal(t, http.StatusOK, code, "a draining server is alive")

	metric := filepath.Join(t.TempDir(), "metric.py")
	require.NoError(t, os.WriteFile(metric, []byte(testMetric), 0o644))
	p, err := pool.Open(pool.Options{Options: engine.Options{Metric: metric}, Processes: 1, MaxCrashes: 1, Stderr: io.Discard})
	require.NoError(t, err)
	defer p.Close()
	ts2 := httptest.NewServer(serve.New(p, serve.Options{}))
	defer ts2.Close()
	code, out, _ := post(t, ts2.URL+"/v1/score", "application/x-ndjson",
		`{"id": "a", "input": {}, "output": "crash"}`+"\n"+`{"id": "b", "input": {}, "output": "crash"}`+"\n")
	require.Equal(t, http.StatusOK, code, out)
	code, body = get(t, ts2.URL+"/livez")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, "--max-crashes")
}
