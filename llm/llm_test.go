package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeServer is an OpenAI-compatible chat-completions endpoint whose answer
// to the n-th request (from 1) is decided by reply.
type fakeServer struct {
	*httptest.Server
	requests atomic.Int64
	inFlight atomic.Int64
	maxSeen  atomic.Int64
	mu       sync.Mutex
	bodies   []chatRequest
	auth     []string
}

func newFake(t *testing.T, reply func(n int64, w http.ResponseWriter, r *http.Request)) *fakeServer {
	f := &fakeServer{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := f.requests.Add(1)
		cur := f.inFlight.Add(1)
		defer f.inFlight.Add(-1)
		for {
			m := f.maxSeen.Load()
			if cur <= m || f.maxSeen.CompareAndSwap(m, cur) {
				break
			}
		}
		var body chatRequest
		json.NewDecoder(r.Body).Decode(&body)
		f.mu.Lock()
		f.bodies = append(f.bodies, body)
		f.auth = append(f.auth, r.Header.Get("Authorization"))
		f.mu.Unlock()
		reply(n, w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

func ok(text string, in, out int) func(int64, http.ResponseWriter, *http.Request) {
	return func(_ int64, w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, `{"choices": [{"message": {"role": "assistant", "content": %q}}], "usage": {"prompt_tokens": %d, "completion_tokens": %d}}`, text, in, out)
	}
}

func client(t *testing.T, f *fakeServer, cfg Config) *Client {
	cfg.BaseURL = f.URL + "/v1"
	if cfg.MetricModel == "" && cfg.ReflectionModel == "" {
		cfg.MetricModel = "openai/gpt-4o-mini"
	}
	c, err := New(cfg)
	require.NoError(t, err)
	return c
}

func TestCall(t *testing.T) {
	f := newFake(t, ok("PASS. Looks right.", 120, 8))
	temp, maxTok := 0.0, 50
	c := client(t, f, Config{APIKey: "sk-secret", Prices: Prices{"openai/gpt-4o-mini": {Input: 0.15e-6, Output: 0.6e-6}}})
	r, err := c.Call(context.Background(), RoleMetric, Request{Instructions: "Answer PASS or FAIL.", Input: "2+2=4",
		Temperature: &temp, MaxTokens: &maxTok})
	require.NoError(t, err)
	assert.Equal(t, "PASS. Looks right.", r.Text)
	assert.Equal(t, int64(120), r.InputTokens)
	assert.Equal(t, int64(8), r.OutputTokens)
	require.NotNil(t, r.CostUSD)
	assert.InDelta(t, 120*0.15e-6+8*0.6e-6, *r.CostUSD, 1e-15)
	body := f.bodies[0]
	assert.Equal(t, "gpt-4o-mini", body.Model, "the provider prefix is not sent")
	assert.Equal(t, []chatMessage{{"system", "Answer PASS or FAIL."}, {"user", "2+2=4"}}, body.Messages)
	assert.Equal(t, 0.0, *body.Temperature)
	assert.Equal(t, 50, *body.MaxTokens)
	assert.Equal(t, "Bearer sk-secret", f.auth[0])
	s := c.Stats(RoleMetric)
	assert.Equal(t, Stats{Calls: 1, InputTokens: 120, OutputTokens: 8, CostUSD: *r.CostUSD}, s)
}

func TestModels(t *testing.T) {
	f := newFake(t, ok("x", 1, 1))
	c := client(t, f, Config{ReflectionModel: "vllm/meta-llama/Llama-3-8B"})
	assert.Equal(t, "vllm/meta-llama/Llama-3-8B", c.Model(RoleMetric), "metric falls back to reflection")
	r, err := c.Call(context.Background(), RoleMetric, Request{Instructions: "hi"})
	require.NoError(t, err)
	assert.Nil(t, r.CostUSD, "no price: cost not measured")
	assert.Equal(t, "meta-llama/Llama-3-8B", f.bodies[0].Model)
	assert.Equal(t, int64(1), c.Stats(RoleMetric).Unpriced)

	_, err = c.Call(context.Background(), RoleTask, Request{Instructions: "hi"})
	var nm *NoModelError
	require.True(t, errors.As(err, &nm))
	assert.Contains(t, err.Error(), "--task-model")
	_, err = New(Config{MetricModel: "gpt-4o-mini"})
	assert.ErrorContains(t, err, "must be named provider/model")
}

func TestRetryAfter429(t *testing.T) {
	f := newFake(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			w.Header().Set("Retry-After", "0.2")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		ok("fine", 1, 1)(n, w, r)
	})
	c := client(t, f, Config{})
	start := time.Now()
	r, err := c.Call(context.Background(), RoleMetric, Request{Instructions: "x"})
	require.NoError(t, err)
	assert.Equal(t, "fine", r.Text)
	assert.GreaterOrEqual(t, time.Since(start), 200*time.Millisecond, "Retry-After honoured")
	assert.Equal(t, int64(1), c.Stats(RoleMetric).Retries)
}

func TestServerErrorsRetriedThenGiveUp(t *testing.T) {
	f := newFake(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		http.Error(w, "upstream exploded", http.StatusInternalServerError)
	})
	c := client(t, f, Config{MaxRetries: 2})
	_, err := c.Call(context.Background(), RoleMetric, Request{Instructions: "x"})
	var e *Error
	require.True(t, errors.As(err, &e))
	assert.Equal(t, 3, e.Attempts)
	assert.Equal(t, 500, e.Status)
	assert.Equal(t, "model openai/gpt-4o-mini: HTTP 500: upstream exploded (after 3 attempts)", err.Error())
	assert.Equal(t, int64(3), f.requests.Load())
	assert.Equal(t, int64(1), c.Stats(RoleMetric).Failures)
}

func TestClientErrorsAreNotRetriedAndHideTheKey(t *testing.T) {
	f := newFake(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error": "bad key `+r.Header.Get("Authorization")+`"}`, http.StatusUnauthorized)
	})
	c := client(t, f, Config{APIKey: "sk-very-secret"})
	_, err := c.Call(context.Background(), RoleMetric, Request{Instructions: "x"})
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "sk-very-secret")
	assert.Contains(t, err.Error(), "[redacted]")
	assert.Equal(t, int64(1), f.requests.Load())
}

func TestMalformedReply(t *testing.T) {
	f := newFake(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"choices": [`)
	})
	c := client(t, f, Config{})
	_, err := c.Call(context.Background(), RoleMetric, Request{Instructions: "x"})
	assert.ErrorContains(t, err, "malformed reply")
}

func TestDroppedConnectionIsRetried(t *testing.T) {
	f := newFake(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		ok("after drop", 1, 1)(n, w, r)
	})
	c := client(t, f, Config{})
	r, err := c.Call(context.Background(), RoleMetric, Request{Instructions: "x"})
	require.NoError(t, err)
	assert.Equal(t, "after drop", r.Text)
}

func TestHangIsCancelledByContext(t *testing.T) {
	f := newFake(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	})
	c := client(t, f, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Call(ctx, RoleMetric, Request{Instructions: "x"})
	require.Error(t, err)
	assert.Less(t, time.Since(start), 2*time.Second)
	assert.ErrorContains(t, err, "deadline exceeded")
}

func TestInFlightLimit(t *testing.T) {
	f := newFake(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		time.Sleep(50 * time.Millisecond)
		ok("x", 1, 1)(n, w, r)
	})
	c := client(t, f, Config{MaxInFlight: 2})
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < 6; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := c.Call(context.Background(), RoleMetric, Request{Instructions: "x"})
			assert.NoError(t, err)
		}()
	}
	wg.Wait()
	assert.Equal(t, int64(2), f.maxSeen.Load())
	assert.GreaterOrEqual(t, time.Since(start), 150*time.Millisecond)
}

func TestPrices(t *testing.T) {
	p, err := ParsePrices([]byte(`{"openai/gpt-4o-mini": {"input_per_mtok": 0.15, "output_per_mtok": 0.6}}`), "p.json")
	require.NoError(t, err)
	assert.InDelta(t, 0.15e-6, p["openai/gpt-4o-mini"].Input, 1e-18)
	// LiteLLM's published shape, with its sample_spec and unpriced entries.
	p, err = ParsePrices([]byte(`{
		"sample_spec": {"input_cost_per_token": "0.0", "max_tokens": "LEGACY"},
		"gpt-4o-mini": {"input_cost_per_token": 1.5e-07, "output_cost_per_token": 6e-07, "litellm_provider": "openai", "mode": "chat"},
		"dall-e-3": {"mode": "image_generation"}
	}`), "litellm.json")
	require.NoError(t, err)
	assert.Equal(t, Prices{"gpt-4o-mini": {Input: 1.5e-07, Output: 6e-07}}, p)
	pr, found := p.lookup("openai/gpt-4o-mini")
	assert.True(t, found, "a bare LiteLLM name prices provider/model")
	assert.Equal(t, 6e-07, pr.Output)

	for body, want := range map[string]string{
		`[1, 2]`: "must be a JSON object keyed by model name",
		`{"m/x": {"input_per_mtok": -1, "output_per_mtok": 1}}`:                  `model "m/x": input_per_mtok must be a number >= 0, got -1`,
		`{"m/x": {"input_per_mtok": 1}}`:                                         `model "m/x": output_per_mtok is missing`,
		`{"m/x": {"input_cost_per_token": "cheap", "output_cost_per_token": 1}}`: `model "m/x": input_cost_per_token must be a number`,
		`{"m/x": 3}`: `model "m/x": must be an object`,
	} {
		_, err := ParsePrices([]byte(body), "p.json")
		assert.ErrorContains(t, err, want, body)
	}
}

func TestCache(t *testing.T) {
	f := newFake(t, ok("cached answer", 10, 2))
	path := t.TempDir() + "/cache.db"
	cache, err := OpenCache(path)
	require.NoError(t, err)
	c := client(t, f, Config{TaskModel: "openai/gpt-4o-mini", Cache: cache,
		Prices: Prices{"gpt-4o-mini": {Input: 1e-6, Output: 1e-6}}})
	zero, warm := 0.0, 0.7
	call := func(role Role, temp *float64) Reply {
		r, err := c.Call(context.Background(), role, Request{Instructions: "Summarise.", Input: "text", Temperature: temp})
		require.NoError(t, err)
		return r
	}
	first := call(RoleTask, &zero)
	second := call(RoleTask, &zero)
	assert.False(t, first.Cached)
	assert.True(t, second.Cached)
	assert.Equal(t, "cached answer", second.Text)
	assert.Equal(t, 0.0, *second.CostUSD, "hits cost 0")
	assert.Equal(t, int64(1), f.requests.Load())
	call(RoleTask, &warm)
	call(RoleTask, nil)
	assert.Equal(t, int64(3), f.requests.Load(), "only temperature-0 calls are cached")
	call(RoleMetric, &zero)
	call(RoleMetric, &zero)
	assert.Equal(t, int64(5), f.requests.Load(), "metric-model calls are not cached unless enabled")
	s := c.Stats(RoleTask)
	assert.Equal(t, int64(1), s.CacheHits)
	assert.InDelta(t, 3*12e-6, s.CostUSD, 1e-15, "a hit adds no cost")
	require.NoError(t, cache.Close())

	// The cache persists, and the metric model uses it when asked to.
	cache, err = OpenCache(path)
	require.NoError(t, err)
	defer cache.Close()
	c = client(t, f, Config{TaskModel: "openai/gpt-4o-mini", Cache: cache, CacheMetric: true})
	assert.True(t, call(RoleTask, &zero).Cached)
	call(RoleMetric, &zero)
	assert.True(t, call(RoleMetric, &zero).Cached)
}

func TestRequestsPerMinute(t *testing.T) {
	f := newFake(t, ok("x", 1, 1))
	c := client(t, f, Config{RequestsPerMinute: 600}) // 10/s with a burst of 10
	start := time.Now()
	for i := 0; i < 15; i++ {
		_, err := c.Call(context.Background(), RoleMetric, Request{Instructions: "x"})
		require.NoError(t, err)
	}
	assert.GreaterOrEqual(t, time.Since(start), 450*time.Millisecond, "5 requests past the burst wait 100 ms each")
}

// A call the caller's context ends unwraps to the context's error, so an
// optimizer tells its own deadline or cancellation from an endpoint failure.
func TestContextEndsUnwrap(t *testing.T) {
	f := newFake(t, func(n int64, w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	c := client(t, f, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := c.Call(ctx, RoleMetric, Request{Instructions: "x"})
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	var le *Error
	require.ErrorAs(t, err, &le)

	ctx2, cancel2 := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel2)
	_, err = c.Call(ctx2, RoleMetric, Request{Instructions: "x"})
	assert.ErrorIs(t, err, context.Canceled)

	// The requests-per-minute limit refuses a wait past the deadline.
	g := newFake(t, ok("x", 1, 1))
	slow := client(t, g, Config{RequestsPerMinute: 1})
	_, err = slow.Call(context.Background(), RoleMetric, Request{Instructions: "x"}) // the burst of 1
	require.NoError(t, err)
	ctx3, cancel3 := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel3()
	_, err = slow.Call(ctx3, RoleMetric, Request{Instructions: "x"})
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorContains(t, err, "requests-per-minute limit")
	assert.NotContains(t, err.Error(), "Wait(n=1)")

	// An endpoint failure has no such cause.
	h := newFake(t, func(n int64, w http.ResponseWriter, r *http.Request) { http.Error(w, "bad", http.StatusBadRequest) })
	_, err = client(t, h, Config{}).Call(context.Background(), RoleMetric, Request{Instructions: "x"})
	require.ErrorAs(t, err, &le)
	assert.Nil(t, errors.Unwrap(err))
}

// After Close a call fails with ErrClosed, and a cache closed under a live
// client misses instead of crashing the host.
func TestClosedClientAndCache(t *testing.T) {
	f := newFake(t, ok("answer", 10, 2))
	zero := 0.0
	req := Request{Instructions: "x", Temperature: &zero}
	cache, err := OpenCache(t.TempDir() + "/cache.db")
	require.NoError(t, err)
	c := client(t, f, Config{TaskModel: "openai/gpt-4o-mini", Cache: cache})
	_, err = c.Call(context.Background(), RoleTask, req)
	require.NoError(t, err)
	require.NoError(t, cache.Close())
	r, err := c.Call(context.Background(), RoleTask, req)
	require.NoError(t, err, "a closed cache misses")
	assert.False(t, r.Cached)
	assert.Equal(t, int64(2), f.requests.Load())

	require.NoError(t, c.Close())
	require.NoError(t, c.Close(), "idempotent")
	_, err = c.Call(context.Background(), RoleTask, req)
	assert.ErrorIs(t, err, ErrClosed)
	assert.Equal(t, int64(2), f.requests.Load(), "a closed client calls nobody")
}

// A cache file another open cache holds is said to be locked.
func TestCacheLocked(t *testing.T) {
	path := t.TempDir() + "/cache.db"
	a, err := OpenCache(path)
	require.NoError(t, err)
	defer a.Close()
	_, err = OpenCache(path)
	assert.ErrorContains(t, err, "locked")
}

// A negative limit is refused by New, naming the field and what 0 means;
// before, MaxInFlight and RequestsPerMinute took a negative as the default.
func TestNewRefusesNegativeLimits(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		says string
	}{
		{Config{MaxInFlight: -1}, "llm: MaxInFlight must not be negative (0: the default, 64), got -1"},
		{Config{RequestsPerMinute: -5}, "llm: RequestsPerMinute must not be negative (0: no limit), got -5"},
		{Config{MaxRetries: -1}, "llm: MaxRetries must not be negative"},
	} {
		_, err := New(tc.cfg)
		assert.EqualError(t, err, tc.says)
	}
	_, err := New(Config{})
	assert.NoError(t, err, "zero values are the defaults")
}
