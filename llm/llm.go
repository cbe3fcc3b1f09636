// Package llm is Skynet's model client: one chat call at a time to an
// OpenAI-compatible chat-completions endpoint (OpenAI, vLLM, Ollama,
// llama.cpp server, LiteLLM and most hosted APIs), with retries, per-model
// limits on requests in flight and per minute, token usage and cost.
//
// Models are named "provider/model"; the part after the first slash is what
// the endpoint is asked for ("openai/gpt-4o-mini" asks for "gpt-4o-mini").
package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// Role says who is calling: a metric's score, or a program's run.
type Role string

const (
	RoleMetric     Role = "metric"     // calls from score; falls back to the reflection model
	RoleReflection Role = "reflection" // the optimizer's reflection model
	RoleTask       Role = "task"       // calls from run code
)

// Environment variables read by ConfigFromEnv. The key variables are removed
// from the process environment by ScrubEnv so Python code never sees them.
var (
	keyVars  = []string{"SKYNET_API_KEY", "OPENAI_API_KEY"}
	baseVars = []string{"SKYNET_LLM_BASE_URL", "OPENAI_BASE_URL"}
)

// DefaultBaseURL is used when no base URL is configured.
const DefaultBaseURL = "https://api.openai.com/v1"

// Config configures a Client. Zero values mean the defaults.
type Config struct {
	// The models, as "provider/model", that each role's calls go to; a
	// metric with no MetricModel uses ReflectionModel.
	MetricModel     string // calls from score
	ReflectionModel string // the optimizer's reflection model
	TaskModel       string // calls from run (a program)
	// BaseURL of the chat-completions API, e.g. "http://localhost:8000/v1".
	BaseURL string
	// APIKey is sent as a bearer token. It never appears in errors or logs.
	APIKey string
	// Prices in USD per token, by model; a model without a price has its
	// cost reported as not measured.
	Prices Prices
	// MaxInFlight bounds concurrent requests per model (default 64).
	MaxInFlight int
	// RequestsPerMinute bounds the request rate per model (0: no limit).
	RequestsPerMinute int
	// MaxRetries on 429, 5xx and connection errors (default 4).
	MaxRetries int
	// HTTPClient, if set, makes the requests.
	HTTPClient *http.Client
	// Cache, if set, replays temperature-0 calls of the reflection and task
	// models, and of the metric model when CacheMetric is set. Hits cost 0.
	Cache       *Cache
	CacheMetric bool // let the metric model's temperature-0 calls use Cache too
	// Forward, if set, makes each call instead of the endpoint: a worker
	// process hands its calls to the process that owns the real client (its
	// limits, cache, key and counts). Calls are still counted here.
	Forward func(ctx context.Context, role Role, req Request) (Reply, error)
}

// ConfigFromEnv fills a Config from SKYNET_METRIC_MODEL, SKYNET_REFLECTION_MODEL,
// SKYNET_TASK_MODEL, SKYNET_LLM_BASE_URL (or OPENAI_BASE_URL) and
// SKYNET_API_KEY (or OPENAI_API_KEY).
func ConfigFromEnv() Config {
	c := Config{
		MetricModel:     os.Getenv("SKYNET_METRIC_MODEL"),
		ReflectionModel: os.Getenv("SKYNET_REFLECTION_MODEL"),
		TaskModel:       os.Getenv("SKYNET_TASK_MODEL"),
	}
	for _, v := range baseVars {
		if c.BaseURL = os.Getenv(v); c.BaseURL != "" {
			break
		}
	}
	for _, v := range keyVars {
		if c.APIKey = os.Getenv(v); c.APIKey != "" {
			break
		}
	}
	return c
}

// KeyVars are the environment variables that may hold an API key, which
// no Python code should see (ScrubEnv; package pool leaves them out of its
// workers' environment).
func KeyVars() []string { return append([]string(nil), keyVars...) }

// ScrubEnv removes the API key variables from the process environment, so
// an interpreter started afterwards (or a child process) never sees them.
func ScrubEnv() {
	for _, v := range keyVars {
		os.Unsetenv(v)
	}
}

// Request is one chat call: skynet.llm(instructions, input=...).
type Request struct {
	Instructions string   // the system message
	Input        string   // the user message; "" sends none
	Temperature  *float64 // nil: the endpoint's default; 0 makes the call cacheable
	MaxTokens    *int     // nil: the endpoint's default
}

// Reply is a model's answer with what it cost.
type Reply struct {
	Text         string // the first choice's message content
	Model        string // the "provider/model" the call went to
	InputTokens  int64  // prompt tokens, as the endpoint reported them (0 if it did not)
	OutputTokens int64  // completion tokens, likewise
	// CostUSD is nil when the model has no price; 0 for a cache hit.
	CostUSD *float64
	// Cached says the reply came from the cache.
	Cached bool
}

// Error is a call that failed after its retries, or could not be made.
type Error struct {
	Model    string // the "provider/model" called
	Attempts int    // how many requests were made, retries included
	Status   int    // HTTP status of the last attempt, 0 if none
	Msg      string // what went wrong, without the API key

	cause error // ctx's error when the context ended the call, or ErrClosed
}

// Unwrap is why the call stopped when that was the caller's doing: the
// context's error (errors.Is(err, context.DeadlineExceeded) or
// context.Canceled) or ErrClosed; nil when the endpoint failed.
func (e *Error) Unwrap() error { return e.cause }

// ErrClosed is the cause of a call made after the Client was closed.
var ErrClosed = errors.New("the model client is closed")

// Error names the model, what went wrong and the attempts made.
func (e *Error) Error() string {
	s := fmt.Sprintf("model %s: %s", e.Model, e.Msg)
	if e.Attempts > 1 {
		s += fmt.Sprintf(" (after %d attempts)", e.Attempts)
	}
	return s
}

// NoModelError says no model is configured for a role: a configuration
// problem to report, not a call to retry.
type NoModelError struct {
	Role Role // the role that has no model
}

// Error names the flag, variable and Config field that configure the
// role's model: the message reaches CLI and Go API users alike.
func (e *NoModelError) Error() string {
	switch e.Role {
	case RoleTask:
		return "no task model is configured: set --task-model or SKYNET_TASK_MODEL (in Go, llm.Config.TaskModel)"
	default:
		return "no metric model is configured: set --metric-model or --reflection-model, or SKYNET_METRIC_MODEL or SKYNET_REFLECTION_MODEL (in Go, llm.Config.MetricModel or ReflectionModel)"
	}
}

// Stats counts calls by role, for budgets and the run's summary.
type Stats struct {
	Calls        int64   // calls made, cache hits included
	Failures     int64   // calls that returned an error after their retries
	Retries      int64   // requests repeated after a 429, 5xx or connection error
	InputTokens  int64   // prompt tokens the endpoint reported (cache hits not counted)
	OutputTokens int64   // completion tokens the endpoint reported (cache hits not counted)
	CostUSD      float64 // cost of the priced calls
	Unpriced     int64   // calls whose cost could not be measured
	CacheHits    int64   // calls answered from the Cache, at no cost
}

type counters struct {
	calls, failures, retries, in, out, unpriced, hits atomic.Int64
	mu                                                sync.Mutex
	cost                                              float64
}

// Close closes the cache, if any; later calls fail with an *Error that
// unwraps to ErrClosed. Idempotent.
func (c *Client) Close() error {
	c.closed.Store(true)
	return c.cfg.Cache.Close()
}

// Client calls models. Safe for concurrent use.
type Client struct {
	cfg    Config
	http   *http.Client
	mu     sync.Mutex
	limits map[string]*limit
	stats  map[Role]*counters
	closed atomic.Bool
}

type limit struct {
	slots chan struct{}
	rate  *rate.Limiter
}

// New returns a Client for cfg with its defaults filled in. It fails on a
// base URL that is not http(s), a negative MaxInFlight, RequestsPerMinute or
// MaxRetries, or a model not named "provider/model"; a role without a model
// fails only when it calls.
func New(cfg Config) (*Client, error) {
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	if !strings.HasPrefix(cfg.BaseURL, "http://") && !strings.HasPrefix(cfg.BaseURL, "https://") {
		return nil, fmt.Errorf("llm: base URL %q must start with http:// or https://", cfg.BaseURL)
	}
	cfg.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	switch {
	case cfg.MaxInFlight < 0:
		return nil, fmt.Errorf("llm: MaxInFlight must not be negative (0: the default, 64), got %d", cfg.MaxInFlight)
	case cfg.RequestsPerMinute < 0:
		return nil, fmt.Errorf("llm: RequestsPerMinute must not be negative (0: no limit), got %d", cfg.RequestsPerMinute)
	case cfg.MaxRetries < 0:
		return nil, errors.New("llm: MaxRetries must not be negative")
	}
	if cfg.MaxInFlight == 0 {
		cfg.MaxInFlight = 64
	}
	if cfg.MaxRetries == 0 {
		cfg.MaxRetries = 4
	}
	for _, m := range []string{cfg.MetricModel, cfg.ReflectionModel, cfg.TaskModel} {
		if m != "" && !strings.Contains(m, "/") {
			return nil, fmt.Errorf("llm: model %q must be named provider/model, e.g. openai/gpt-4o-mini", m)
		}
	}
	h := cfg.HTTPClient
	if h == nil {
		h = &http.Client{Transport: &http.Transport{
			Proxy:               http.ProxyFromEnvironment,
			MaxIdleConnsPerHost: 256,
			IdleConnTimeout:     90 * time.Second,
		}}
	}
	c := &Client{cfg: cfg, http: h, limits: map[string]*limit{}, stats: map[Role]*counters{}}
	for _, r := range []Role{RoleMetric, RoleReflection, RoleTask} {
		c.stats[r] = &counters{}
	}
	return c, nil
}

// BaseURL is the endpoint the client calls.
func (c *Client) BaseURL() string { return c.cfg.BaseURL }

// Model is the model a role's calls go to, or "" when none is configured.
// The metric role falls back to the reflection model.
func (c *Client) Model(role Role) string {
	switch role {
	case RoleMetric:
		if c.cfg.MetricModel != "" {
			return c.cfg.MetricModel
		}
		return c.cfg.ReflectionModel
	case RoleReflection:
		return c.cfg.ReflectionModel
	case RoleTask:
		return c.cfg.TaskModel
	}
	return ""
}

// Stats returns the counts of a role's calls.
func (c *Client) Stats(role Role) Stats {
	k := c.stats[role]
	if k == nil {
		return Stats{}
	}
	k.mu.Lock()
	cost := k.cost
	k.mu.Unlock()
	return Stats{Calls: k.calls.Load(), Failures: k.failures.Load(), Retries: k.retries.Load(),
		InputTokens: k.in.Load(), OutputTokens: k.out.Load(), CostUSD: cost, Unpriced: k.unpriced.Load(),
		CacheHits: k.hits.Load()}
}

func (c *Client) limitFor(model string) *limit {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.limits[model]
	if l == nil {
		l = &limit{slots: make(chan struct{}, c.cfg.MaxInFlight)}
		if c.cfg.RequestsPerMinute > 0 {
			l.rate = rate.NewLimiter(rate.Limit(float64(c.cfg.RequestsPerMinute)/60), max(1, c.cfg.RequestsPerMinute/60))
		}
		c.limits[model] = l
	}
	return l
}

type chatRequest struct {
	Model       string        `json:"model"`
	Messages    []chatMessage `json:"messages"`
	Temperature *float64      `json:"temperature,omitempty"`
	MaxTokens   *int          `json:"max_tokens,omitempty"`
}

type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type chatReply struct {
	Choices []struct {
		Message struct {
			Content *string `json:"content"`
		} `json:"message"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int64 `json:"prompt_tokens"`
		CompletionTokens int64 `json:"completion_tokens"`
	} `json:"usage"`
}

// Call makes one chat call for role, retrying on 429, 5xx and connection
// errors with exponential backoff and jitter (honouring Retry-After), within
// ctx. It blocks for the whole network wait: callers holding the GIL must
// release it first.
func (c *Client) Call(ctx context.Context, role Role, req Request) (Reply, error) {
	model := c.Model(role)
	if model == "" {
		return Reply{}, &NoModelError{Role: role}
	}
	if c.closed.Load() {
		return Reply{}, &Error{Model: model, Msg: ErrClosed.Error(), cause: ErrClosed}
	}
	k := c.stats[role]
	k.calls.Add(1)
	var reply Reply
	var err error
	if c.cfg.Forward != nil {
		reply, err = c.cfg.Forward(ctx, role, req)
	} else {
		reply, err = c.call(ctx, model, req, k, c.cacheable(role, req))
	}
	if err != nil {
		k.failures.Add(1)
		return reply, err
	}
	if reply.Cached {
		k.hits.Add(1)
		return reply, nil
	}
	k.in.Add(reply.InputTokens)
	k.out.Add(reply.OutputTokens)
	if reply.CostUSD == nil {
		k.unpriced.Add(1)
	} else {
		k.mu.Lock()
		k.cost += *reply.CostUSD
		k.mu.Unlock()
	}
	return reply, nil
}

// cacheable: only temperature-0 calls, and metric-model calls only on request.
func (c *Client) cacheable(role Role, req Request) bool {
	return c.cfg.Cache != nil && req.Temperature != nil && *req.Temperature == 0 &&
		(role != RoleMetric || c.cfg.CacheMetric)
}

func (c *Client) call(ctx context.Context, model string, req Request, k *counters, cacheable bool) (Reply, error) {
	name := model[strings.Index(model, "/")+1:]
	messages := []chatMessage{{Role: "system", Content: req.Instructions}}
	if req.Input != "" {
		messages = append(messages, chatMessage{Role: "user", Content: req.Input})
	}
	body, err := json.Marshal(chatRequest{Model: name, Messages: messages, Temperature: req.Temperature, MaxTokens: req.MaxTokens})
	if err != nil {
		return Reply{}, &Error{Model: model, Msg: err.Error()}
	}
	var key []byte
	if cacheable {
		key = cacheKey(model, body)
		if hit, ok := c.cfg.Cache.get(key); ok {
			zero := 0.0
			return Reply{Text: hit.Text, Model: model, InputTokens: hit.InputTokens, OutputTokens: hit.OutputTokens,
				CostUSD: &zero, Cached: true}, nil
		}
	}
	l := c.limitFor(model)
	select {
	case l.slots <- struct{}{}:
		defer func() { <-l.slots }()
	case <-ctx.Done():
		return Reply{}, &Error{Model: model, Msg: "gave up waiting for a free request slot: " + ctx.Err().Error(), cause: ctx.Err()}
	}
	attempts := 0
	for {
		attempts++
		if l.rate != nil {
			if err := l.rate.Wait(ctx); err != nil {
				// Wait refuses at once a wait that would outlast ctx's deadline.
				cause := ctx.Err()
				if cause == nil {
					cause = context.DeadlineExceeded
				}
				return Reply{}, &Error{Model: model, Attempts: attempts - 1,
					Msg: "the requests-per-minute limit would hold this call past the context's deadline", cause: cause}
			}
		}
		reply, status, retryAfter, err := c.once(ctx, model, name, body)
		if err == nil {
			if key != nil {
				// A failed write only costs a future hit; the reply is good.
				_ = c.cfg.Cache.put(key, cachedReply{Text: reply.Text, InputTokens: reply.InputTokens, OutputTokens: reply.OutputTokens})
			}
			return reply, nil
		}
		retryable := status == http.StatusTooManyRequests || status >= 500 || (status == 0 && ctx.Err() == nil && isConnError(err))
		if !retryable || attempts > c.cfg.MaxRetries {
			return Reply{}, &Error{Model: model, Attempts: attempts, Status: status, Msg: err.Error(), cause: ctx.Err()}
		}
		k.retries.Add(1)
		wait := backoff(attempts)
		if retryAfter > 0 {
			wait = retryAfter
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return Reply{}, &Error{Model: model, Attempts: attempts, Status: status, Msg: err.Error() + "; then " + ctx.Err().Error(), cause: ctx.Err()}
		}
	}
}

// backoff is exponential with full jitter: up to 250 ms, 500 ms, 1 s, ... 8 s.
func backoff(attempt int) time.Duration {
	ceiling := min(8*time.Second, 250*time.Millisecond<<(attempt-1))
	return time.Duration(rand.Int64N(int64(ceiling))) + time.Millisecond
}

func isConnError(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		strings.Contains(err.Error(), "connection reset") || strings.Contains(err.Error(), "connection refused")
}

// once makes one HTTP attempt. It returns the HTTP status (0 when there was
// no response) and the server's Retry-After, if any.
func (c *Client) once(ctx context.Context, model, name string, body []byte) (Reply, int, time.Duration, error) {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.cfg.BaseURL+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		return Reply{}, 0, 0, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	if c.cfg.APIKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+c.cfg.APIKey)
	}
	resp, err := c.http.Do(hreq)
	if err != nil {
		return Reply{}, 0, 0, c.scrub(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return Reply{}, 0, 0, c.scrub(err)
	}
	if resp.StatusCode != http.StatusOK {
		return Reply{}, resp.StatusCode, retryAfter(resp.Header.Get("Retry-After")),
			fmt.Errorf("HTTP %d: %s", resp.StatusCode, c.scrub(errors.New(snippet(data))))
	}
	var cr chatReply
	if err := json.Unmarshal(data, &cr); err != nil {
		return Reply{}, resp.StatusCode, 0, fmt.Errorf("malformed reply (%v): %s", err, c.scrub(errors.New(snippet(data))))
	}
	if len(cr.Choices) == 0 || cr.Choices[0].Message.Content == nil {
		return Reply{}, resp.StatusCode, 0, fmt.Errorf("malformed reply: no choices[0].message.content: %s", c.scrub(errors.New(snippet(data))))
	}
	r := Reply{Text: *cr.Choices[0].Message.Content, Model: model}
	if cr.Usage != nil {
		r.InputTokens, r.OutputTokens = cr.Usage.PromptTokens, cr.Usage.CompletionTokens
		if p, ok := c.cfg.Prices.lookup(model); ok {
			cost := float64(r.InputTokens)*p.Input + float64(r.OutputTokens)*p.Output
			r.CostUSD = &cost
		}
	}
	return r, resp.StatusCode, 0, nil
}

// scrub keeps the API key out of any error text.
func (c *Client) scrub(err error) error {
	if c.cfg.APIKey == "" || !strings.Contains(err.Error(), c.cfg.APIKey) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), c.cfg.APIKey, "[redacted]"))
}

func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

// retryAfter reads a Retry-After header: seconds or an HTTP date.
func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 && !math.IsInf(s, 0) {
		return min(time.Duration(s*float64(time.Second)), 5*time.Minute)
	}
	if t, err := http.ParseTime(v); err == nil {
		return min(max(time.Until(t), 0), 5*time.Minute)
	}
	return 0
}
