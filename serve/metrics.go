package serve

// GET /metrics: the Prometheus text format (version 0.0.4), written by
// hand: the standard library only, and a handful of series.

import (
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/skynetml/skynet/engine"
	"github.com/skynetml/skynet/pool"
)

// latencyBuckets are the upper bounds, in seconds, of the score-call
// latency histogram: from a trivial metric's microseconds to a judge's
// minute.
var latencyBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

type metrics struct {
	mu       sync.Mutex
	scored   int64
	failed   map[engine.ErrorKind]int64
	buckets  []int64 // cumulative counts are made when written
	count    int64
	sum      float64
	requests map[reqKey]int64
}

type reqKey struct {
	path string
	code int
}

func newMetrics() metrics {
	return metrics{failed: map[engine.ErrorKind]int64{}, buckets: make([]int64, len(latencyBuckets)+1), requests: map[reqKey]int64{}}
}

// results counts a batch of answered cases: once a batch, under one lock.
func (m *metrics) results(batch []*pool.Task) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, t := range batch {
		r := &t.Record
		if r.Kind == "" {
			m.scored++
		} else {
			m.failed[r.Kind]++
		}
		if r.Duration > 0 { // a score call ran (not an input error, not a cancel)
			sec := r.Duration.Seconds()
			i := sort.SearchFloat64s(latencyBuckets, sec)
			m.buckets[i]++
			m.count++
			m.sum += sec
		}
	}
}

func (m *metrics) request(path string, code int) {
	switch path {
	case "/v1/score", "/v1/rewards", "/healthz", "/metrics":
	default:
		path = "other" // a label a client cannot grow without bound
	}
	m.mu.Lock()
	m.requests[reqKey{path, code}]++
	m.mu.Unlock()
}

func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	var b strings.Builder
	var st pool.Stats
	processes := 0
	if p := s.p.Load(); p != nil { // loading: no pool, no workers yet
		st, processes = p.Stats(), p.Processes()
	}
	m := &s.m
	m.mu.Lock()
	fmt.Fprintf(&b, "# HELP skynet_cases_scored_total Cases answered with a score.\n# TYPE skynet_cases_scored_total counter\nskynet_cases_scored_total %d\n", m.scored)
	b.WriteString("# HELP skynet_cases_failed_total Cases answered with an error result, by its kind.\n# TYPE skynet_cases_failed_total counter\n")
	kinds := []engine.ErrorKind{engine.KindException, engine.KindTimeout, engine.KindContract, engine.KindInput, engine.KindCanceled, engine.KindRun, engine.KindCrash}
	for k := range m.failed {
		if !slices.Contains(kinds, k) {
			kinds = append(kinds, k)
		}
	}
	for _, k := range kinds {
		fmt.Fprintf(&b, "skynet_cases_failed_total{kind=%q} %d\n", string(k), m.failed[k])
	}
	b.WriteString("# HELP skynet_score_call_seconds Wall time of the score (and run) calls.\n# TYPE skynet_score_call_seconds histogram\n")
	var cum int64
	for i, le := range latencyBuckets {
		cum += m.buckets[i]
		fmt.Fprintf(&b, "skynet_score_call_seconds_bucket{le=%q} %d\n", strconv.FormatFloat(le, 'g', -1, 64), cum)
	}
	fmt.Fprintf(&b, "skynet_score_call_seconds_bucket{le=\"+Inf\"} %d\nskynet_score_call_seconds_sum %s\nskynet_score_call_seconds_count %d\n",
		m.count, strconv.FormatFloat(m.sum, 'g', -1, 64), m.count)
	b.WriteString("# HELP skynet_http_requests_total HTTP requests answered, by path and status code.\n# TYPE skynet_http_requests_total counter\n")
	keys := make([]reqKey, 0, len(m.requests))
	for k := range m.requests {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i].path < keys[j].path || keys[i].path == keys[j].path && keys[i].code < keys[j].code
	})
	for _, k := range keys {
		fmt.Fprintf(&b, "skynet_http_requests_total{path=%q,code=\"%d\"} %d\n", k.path, k.code, m.requests[k])
	}
	m.mu.Unlock()
	fmt.Fprintf(&b, "# HELP skynet_cases_in_flight Cases admitted and not yet answered.\n# TYPE skynet_cases_in_flight gauge\nskynet_cases_in_flight %d\n", s.inflight.Load())
	fmt.Fprintf(&b, "# HELP skynet_worker_restarts_total Worker processes started again after one died or was killed.\n# TYPE skynet_worker_restarts_total counter\nskynet_worker_restarts_total %d\n", st.Restarts)
	fmt.Fprintf(&b, "# HELP skynet_worker_crashes_total Cases that crashed their worker even when scored alone.\n# TYPE skynet_worker_crashes_total counter\nskynet_worker_crashes_total %d\n", st.Crashes)
	fmt.Fprintf(&b, "# HELP skynet_worker_wedges_total Cases that held their worker past their timeout.\n# TYPE skynet_worker_wedges_total counter\nskynet_worker_wedges_total %d\n", st.Wedges)
	fmt.Fprintf(&b, "# HELP skynet_score_calls_total Score calls that returned, with a score or not.\n# TYPE skynet_score_calls_total counter\nskynet_score_calls_total %d\n", st.ScoreCalls)
	fmt.Fprintf(&b, "# HELP skynet_worker_processes Worker processes the pool keeps.\n# TYPE skynet_worker_processes gauge\nskynet_worker_processes %d\n", processes)
	ready := 0
	if s.Healthy() {
		ready = 1
	}
	fmt.Fprintf(&b, "# HELP skynet_ready 1 while the server takes scoring requests (loaded, not draining), else 0.\n# TYPE skynet_ready gauge\nskynet_ready %d\n", ready)
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.Write([]byte(b.String()))
}
