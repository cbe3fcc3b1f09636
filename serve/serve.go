// Package serve is skynet's scoring service: an http.Handler that scores the
// cases posted to it in a pool's worker processes (package pool), so that a
// trainer or optimizer pays the metric's import once, not once a batch.
//
//	p, err := pool.Open(pool.Options{Options: engine.Options{Metric: "metric.py"}})
//	if err != nil { ... }
//	s := serve.New(p, serve.Options{Token: os.Getenv("SKYNET_SERVE_TOKEN")})
//	http.ListenAndServe("127.0.0.1:8765", s)
//
// Endpoints (docs/serve.md): POST /v1/score scores case-file lines, a
// JSON batch {"cases": [...]} or an NDJSON body, and answers each case with
// the results line skynet score writes for it, in the request's order;
// POST /v1/rewards takes OpenRLHF's remote reward model request; GET
// /healthz and GET /metrics (Prometheus text) report on the server.
//
// The rule for bad input: a body that cannot be read as a batch (not JSON,
// not the envelope, a repeated id) is a 400 and nothing is scored; a case
// inside a readable batch that is not a valid case gets its "input" error
// result, as in skynet score, and the rest of the batch is scored.
package serve

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"mime"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/skynetml/skynet/caseio"
	"github.com/skynetml/skynet/cpython"
	"github.com/skynetml/skynet/pool"
)

// Defaults of Options.
const (
	DefaultMaxBody     = 64 << 20 // Options.MaxBody when 0
	DefaultMaxInflight = 100000   // Options.MaxInflight when 0
)

// Options configures a Server. The zero value of each field means its default.
type Options struct {
	// Token, when set, is the bearer token every request but GET /healthz
	// must carry ("Authorization: Bearer TOKEN"); others get 401.
	Token string
	// MaxBody caps a request body in bytes (default DefaultMaxBody); a
	// longer one is a 413.
	MaxBody int64
	// MaxInflight caps the cases admitted and not yet answered, over all
	// requests (default DefaultMaxInflight): a request that would pass it is
	// a 429 with Retry-After, one that alone passes it a 413.
	MaxInflight int
	// MaxLineBytes caps an NDJSON case line (default
	// caseio.DefaultMaxLineBytes); a longer one is that case's input error.
	MaxLineBytes int
	// Program, when set, makes /v1/score run the pool's program on each
	// case with Artifact (pool.RunProgram) and score what it returns; the
	// pool must be opened with Options.Program. /v1/rewards always scores
	// the outputs it is given.
	Program  bool
	Artifact any
}

// Server is the HTTP handler. Its methods are safe for concurrent use.
type Server struct {
	p    atomic.Pointer[pool.Pool] // nil while the metric loads (NewLoading)
	opts Options
	mux  *http.ServeMux

	inflight atomic.Int64 // cases admitted, not yet answered

	mu       sync.Mutex
	draining bool
	active   int           // scoring requests being served
	idle     chan struct{} // closed once draining with no active request

	m metrics
}

// New returns the handler scoring in p. It does not close p.
func New(p *pool.Pool, opts Options) *Server {
	s := NewLoading(opts)
	s.Ready(p)
	return s
}

// NewLoading returns a handler with no pool yet, for a port that opens
// before the metric has loaded: until Ready, GET /healthz answers 503
// "loading" and the scoring endpoints 503 with Retry-After, so a client or
// a readiness probe sees a server that is coming rather than a refused
// connection.
func NewLoading(opts Options) *Server {
	if opts.MaxBody <= 0 {
		opts.MaxBody = DefaultMaxBody
	}
	if opts.MaxInflight <= 0 {
		opts.MaxInflight = DefaultMaxInflight
	}
	if opts.MaxLineBytes <= 0 {
		opts.MaxLineBytes = caseio.DefaultMaxLineBytes
	}
	s := &Server{opts: opts, idle: make(chan struct{}), m: newMetrics()}
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("/v1/score", s.scoring(s.score))
	s.mux.HandleFunc("/v1/rewards", s.scoring(s.rewards))
	s.mux.HandleFunc("/healthz", s.healthz)
	s.mux.HandleFunc("/livez", s.livez)
	s.mux.HandleFunc("/metrics", s.authorized(s.metrics))
	return s
}

// Ready hands the server the pool it scores in, once the metric has loaded
// and passed its checks; it does not close p. It is called once.
func (s *Server) Ready(p *pool.Pool) {
	if p == nil {
		panic("serve: Ready(nil)")
	}
	if !s.p.CompareAndSwap(nil, p) {
		panic("serve: Ready called twice")
	}
}

// Loaded says whether the server has its pool (Ready was called).
func (s *Server) Loaded() bool { return s.p.Load() != nil }

// ServeHTTP routes a request to its endpoint.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := &statusWriter{ResponseWriter: w}
	s.mux.ServeHTTP(rec, r)
	s.m.request(r.URL.Path, rec.code())
}

// Drain stops taking scoring requests (they get 503, and /healthz says
// 503) while those in flight go on; Idle tells when they are done.
func (s *Server) Drain() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining {
		return
	}
	s.draining = true
	if s.active == 0 {
		close(s.idle)
	}
}

// Idle is closed once the server drains (Drain) and no scoring request is
// left in flight.
func (s *Server) Idle() <-chan struct{} { return s.idle }

// Healthy says whether the server takes requests: loaded and not draining.
func (s *Server) Healthy() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.draining && s.Loaded()
}

// Inflight is how many admitted cases have no answer yet.
func (s *Server) Inflight() int { return int(s.inflight.Load()) }

// loadingRetry is the Retry-After, in seconds, of a scoring request that
// comes while the metric loads.
const loadingRetry = "1"

// scoring wraps a scoring endpoint: the token, POST only, draining,
// loading, and the count of active requests Drain waits for.
func (s *Server) scoring(h http.HandlerFunc) http.HandlerFunc {
	return s.authorized(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			fail(w, http.StatusMethodNotAllowed, r.URL.Path+" takes POST")
			return
		}
		s.mu.Lock()
		if s.draining {
			s.mu.Unlock()
			w.Header().Set("Connection", "close")
			fail(w, http.StatusServiceUnavailable, "the server is shutting down")
			return
		}
		if !s.Loaded() {
			s.mu.Unlock()
			w.Header().Set("Retry-After", loadingRetry)
			fail(w, http.StatusServiceUnavailable, "the metric is still loading: retry after Retry-After seconds (GET /healthz answers 200 once it is ready)")
			return
		}
		s.active++
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			if s.active--; s.active == 0 && s.draining {
				close(s.idle)
			}
			s.mu.Unlock()
		}()
		h(w, r)
	})
}

// authorized checks the bearer token, in constant time, when there is one.
func (s *Server) authorized(h http.HandlerFunc) http.HandlerFunc {
	if s.opts.Token == "" {
		return h
	}
	want := []byte("Bearer " + s.opts.Token)
	return func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="skynet"`)
			fail(w, http.StatusUnauthorized, "missing or wrong bearer token (Authorization: Bearer TOKEN)")
			return
		}
		h(w, r)
	}
}

// livez is GET /livez, for a liveness probe: 200 while the process serves
// (loading and draining too, when /healthz says 503), 503 once its pool gave
// up on a metric that crashes every worker, which only a restart can end.
func (s *Server) livez(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if p := s.p.Load(); p != nil {
		if why := p.Stats().GaveUp; why != "" {
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, why+"\n")
			return
		}
	}
	io.WriteString(w, "alive\n")
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	s.mu.Lock()
	draining := s.draining
	s.mu.Unlock()
	switch {
	case draining:
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, "draining\n")
	case !s.Loaded():
		w.Header().Set("Retry-After", loadingRetry)
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, "loading\n")
	default:
		io.WriteString(w, "ok\n")
	}
}

// fail answers with status and {"error": msg}.
func fail(w http.ResponseWriter, status int, msg string) {
	b, _ := json.Marshal(struct {
		Error string `json:"error"`
	}{msg})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// BadRequestError is what is wrong with a body that cannot be read as a
// batch: the request is a 400 and nothing of it is scored.
type BadRequestError struct{ Msg string }

func (e *BadRequestError) Error() string { return e.Msg }

func badRequest(format string, args ...any) error {
	return &BadRequestError{Msg: fmt.Sprintf(format, args...)}
}

// readBody reads the whole body, up to MaxBody; it answers the request
// itself (429 while the in-flight budget is spent, before reading; 413,
// 400) when it returns false. The body is read before a
// result is written, so a client that sends all before it reads (most do)
// cannot deadlock against a reply it does not read yet.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	if s.busy(w) {
		return nil, false
	}
	if r.ContentLength > s.opts.MaxBody {
		// Unread, the body is left on the wire: the connection ends with
		// this reply, which a client still sending must read after its
		// write fails (the Python client does).
		w.Header().Set("Connection", "close")
		fail(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the body (%d bytes) is over the limit of %d bytes (--max-body): send smaller batches", r.ContentLength, s.opts.MaxBody))
		return nil, false
	}
	// Sized from Content-Length when given: a large batch is read without
	// the copies of a growing buffer.
	buf := bytes.NewBuffer(make([]byte, 0, max(r.ContentLength, 0)+bytes.MinRead))
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, s.opts.MaxBody))
	b := buf.Bytes()
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		w.Header().Set("Connection", "close")
		fail(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the body is over the limit of %d bytes (--max-body): send smaller batches", s.opts.MaxBody))
		return nil, false
	}
	if err != nil {
		fail(w, http.StatusBadRequest, "reading the body: "+err.Error())
		return nil, false
	}
	return b, true
}

// admit reserves n cases of the in-flight budget, or answers 429 (413
// when n alone is over it) and returns false.
func (s *Server) admit(w http.ResponseWriter, n int) bool {
	max := int64(s.opts.MaxInflight)
	if int64(n) > max {
		fail(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("%d cases in one request is over the limit of %d cases in flight (--max-inflight): send smaller batches", n, max))
		return false
	}
	if v := s.inflight.Add(int64(n)); v > max {
		s.inflight.Add(-int64(n))
		w.Header().Set("Retry-After", "1")
		fail(w, http.StatusTooManyRequests, fmt.Sprintf("too many cases in flight (limit %d, --max-inflight): retry later", max))
		return false
	}
	return true
}

// busy answers 429 before the body is read when the budget is spent already.
func (s *Server) busy(w http.ResponseWriter) bool {
	max := int64(s.opts.MaxInflight)
	if s.inflight.Load() < max {
		return false
	}
	w.Header().Set("Retry-After", "1")
	fail(w, http.StatusTooManyRequests, fmt.Sprintf("too many cases in flight (limit %d, --max-inflight): retry later", max))
	return true
}

func isNDJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && (mt == "application/x-ndjson" || mt == "application/jsonl" || mt == "application/x-jsonlines")
}

// score is POST /v1/score.
func (s *Server) score(w http.ResponseWriter, r *http.Request) {
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	ndjson := isNDJSON(r.Header.Get("Content-Type"))
	var tasks []*pool.Task
	var err error
	if ndjson {
		tasks, err = s.ndjsonTasks(body)
	} else {
		tasks, err = s.jsonTasks(body)
	}
	if err == nil {
		err = uniqueIDs(tasks, ndjson)
	}
	if err != nil {
		fail(w, http.StatusBadRequest, err.Error())
		return
	}
	body = nil // the tasks hold what they need
	if !s.admit(w, len(tasks)) {
		return
	}
	out, err := s.run(r.Context(), tasks)
	if err != nil {
		s.inflight.Add(-int64(len(tasks)))
		fail(w, http.StatusInternalServerError, err.Error())
		return
	}
	if ndjson {
		w.Header().Set("Content-Type", "application/x-ndjson")
	} else {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	var buf []byte
	if !ndjson {
		buf = append(buf, `{"results":[`...)
	}
	first, failed, left := true, false, len(tasks)
	for batch := range out {
		for _, t := range batch {
			if !ndjson && !first {
				buf = append(buf, ',')
			}
			first = false
			buf = append(buf, t.Record.Line...)
			if ndjson {
				buf = append(buf, '\n')
			}
		}
		s.m.results(batch)
		s.inflight.Add(-int64(len(batch)))
		left -= len(batch)
		if left == 0 {
			break // the reply ends with one write, with its length when it is short
		}
		// Write what is ready: results come in batches (a worker sends
		// what finished together), so an NDJSON reply streams without a
		// write a case.
		if !failed {
			_, werr := w.Write(buf)
			failed = werr != nil // the client left: ctx cancels the rest
			if flusher != nil && !failed {
				flusher.Flush()
			}
		}
		buf = buf[:0]
	}
	if !ndjson {
		buf = append(buf, "]}\n"...)
	}
	if !failed && len(buf) > 0 {
		w.Write(buf)
	}
}

// run scores tasks in the pool, yielding them in order as they finish.
func (s *Server) run(ctx context.Context, tasks []*pool.Task) (iter.Seq[[]*pool.Task], error) {
	if s.opts.Program {
		return s.p.Load().RunProgramTasks(ctx, s.opts.Artifact, tasks)
	}
	return s.p.Load().RunTasks(ctx, tasks), nil
}

// jsonTasks reads {"cases": [case, ...]}: case i is numbered i+1, as the
// line of a case file it would be (its id when it has none). The body is
// read in one pass (cpython.SplitObject validates it; each case is its own
// text); one that does not read is diagnosed by jsonBodyError.
func (s *Server) jsonTasks(body []byte) ([]*pool.Task, error) {
	members, err := cpython.SplitObject(body, nil)
	if err != nil || len(members) != 1 || members[0].Key != "cases" {
		return nil, jsonBodyError(body, err)
	}
	elems, ok := caseio.SplitArray(members[0].Value, nil)
	if !ok {
		return nil, jsonBodyError(body, nil)
	}
	tasks := make([]*pool.Task, len(elems))
	for i, raw := range elems {
		tasks[i] = pool.LineTask(raw, i+1, nil, s.opts.Program)
	}
	return tasks, nil
}

// jsonBodyError says what is wrong with a body jsonTasks could not read,
// in its terms (which case, which field), decoding it token by token; split
// is what the one-pass reader said (text encoding/json takes, such as a
// string that is not UTF-8, it does not).
func jsonBodyError(body []byte, split error) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	syntax := func(err error) error {
		return badRequest(`the body is not a JSON object {"cases": [...]}: %v`, err)
	}
	tok, err := dec.Token()
	if err != nil {
		return syntax(err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return badRequest(`the body must be a JSON object {"cases": [...]} (or, with Content-Type: application/x-ndjson, one case a line)`)
	}
	cases := 0
	seen := false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return syntax(err)
		}
		if key, _ := tok.(string); key != "cases" {
			return badRequest(`unknown field %q in the body (it has one field, "cases": a list of cases)`, key)
		}
		if seen {
			return badRequest(`"cases" is given twice`)
		}
		seen = true
		tok, err = dec.Token()
		if err != nil {
			return syntax(err)
		}
		if d, ok := tok.(json.Delim); !ok || d != '[' {
			return badRequest(`"cases" must be a list of cases`)
		}
		for ; dec.More(); cases++ {
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return badRequest("case %d (counting from 0) is not JSON: %v", cases, err)
			}
		}
		if _, err := dec.Token(); err != nil { // ]
			return badRequest("after case %d: %v", cases-1, err)
		}
	}
	if _, err := dec.Token(); err != nil { // }
		return syntax(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return badRequest(`the body holds more than one JSON value`)
	}
	if !seen {
		return badRequest(`"cases" is missing: the body is {"cases": [case, ...]}`)
	}
	return badRequest(`the body is not a JSON object {"cases": [...]}: %v`, split)
}

// ndjsonTasks reads one case a line; a case is numbered by its line (blank
// lines count, as in a case file).
func (s *Server) ndjsonTasks(body []byte) ([]*pool.Task, error) {
	cr := caseio.NewReader(bytes.NewReader(body))
	cr.MaxLineBytes = s.opts.MaxLineBytes
	var tasks []*pool.Task
	for {
		line, err := cr.NextLine()
		if err == io.EOF {
			return tasks, nil
		}
		le, isLine := errors.AsType[*caseio.LineError](err)
		if err != nil && !isLine {
			return nil, badRequest("line %d: %v", cr.Line(), err)
		}
		var lerr error
		if isLine {
			lerr = le
		}
		tasks = append(tasks, pool.LineTask(line, cr.Line(), lerr, s.opts.Program))
	}
}

// uniqueIDs refuses a batch with a repeated id: results are matched to
// cases by id.
func uniqueIDs(tasks []*pool.Task, ndjson bool) error {
	seen := make(map[string]int, len(tasks))
	for i, t := range tasks {
		if j, dup := seen[t.ID]; dup {
			if ndjson {
				return badRequest("line %d: case id %q is also the id of line %d (a case without an id is named by its line number); ids must be unique in a request", t.Line, t.ID, tasks[j].Line)
			}
			return badRequest("case %d (counting from 0): case id %q is also the id of case %d (a case without an id is named by its position counting from 1); ids must be unique in a request", i, t.ID, j)
		}
		seen[t.ID] = i
	}
	return nil
}

// statusWriter remembers the status written, for the request counter.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) code() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush passes a flush on (an NDJSON reply streams).
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
