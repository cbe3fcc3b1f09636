package main

// --latency: one call at a time, the latency of a case by five paths, on
// the same cases (every one new: a counter in its prompt, completion and
// label, whose score must be 1.0):
//
//   - engine.Score in this process;
//   - pool.Score with one worker process (Executable: --bin);
//   - skynet serve --processes 1, POST /v1/score of one NDJSON line over
//     one keep-alive connection (raw, as shapes.go's client);
//   - a Python worker forked once, answering JSON lines over a socketpair
//     (latency.py; its parent, in Python, times each call);
//   - multiprocessing.Pool(1).apply (latency.py too).
//
// The paths take turns, run by run, their order rotating, and each run
// makes calls/runs calls of each; the percentiles are over all of a path's
// calls. The ratios printed are the spec's: pool.Score's p50 ÷ the
// socketpair worker's, pool.Score's p99 ÷ its p50, serve's p50 ÷ the
// socketpair worker's.

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/skynetml/skynet/cpython"
	"github.com/skynetml/skynet/engine"
	"github.com/skynetml/skynet/pool"
)

//go:embed latency.py
var latencyPy []byte

// latencyCase is case k's values as JSON texts: the same for every path.
func latencyCase(k int) (input, output, expected string) {
	answer := fmt.Sprintf("4 (ref %010d)", k)
	return fmt.Sprintf(`{"prompt": "Question %010d: what is 2 + 2? Answer: "}`, k), answer, fmt.Sprintf(`{"label": %q}`, answer)
}

// latencyPath is one way to score a case: calls(start, n) scores cases
// start.. one at a time and returns each call's latency.
type latencyPath struct {
	name  string
	calls func(start, n int) []time.Duration
}

func engineCase(k int) engine.Case {
	in, out, exp := latencyCase(k)
	return engine.Case{ID: strconv.Itoa(k), Input: json.RawMessage(in), Output: out, Expected: json.RawMessage(exp)}
}

func wantOne(path string, k int, r engine.Result) {
	if r.Err != nil {
		fail("%s: case %d: %s: %s", path, k, r.Err.Kind, r.Err.Message)
	}
	if r.Score != 1 {
		fail("%s: case %d: score %v, want 1", path, k, r.Score)
	}
}

// scoreEach times f on cases start.. one at a time.
func scoreEach(name string, start, n int, f func(engine.Case) engine.Result) []time.Duration {
	cases := make([]engine.Case, n)
	for i := range cases {
		cases[i] = engineCase(start + i)
	}
	took := make([]time.Duration, n)
	for i, c := range cases {
		t0 := time.Now()
		r := f(c)
		took[i] = time.Since(t0)
		wantOne(name, start+i, r)
	}
	return took
}

// servePath scores over one keep-alive connection to skynet serve.
func servePath(host string) func(start, n int) []time.Duration {
	conn, err := net.Dial("tcp", host)
	check(err)
	atExit(func() { conn.Close() })
	br := bufio.NewReaderSize(conn, 64<<10)
	in, out, exp := latencyCase(0)
	mark := strings.Repeat("0", counterWidth)
	line := fmt.Sprintf(`{"id": %q, "input": %s, "output": %q, "expected": %s}`+"\n", mark, in, out, exp)
	req, slots := prepare("/v1/score", "application/x-ndjson", host, strings.ReplaceAll(line, mark, string(counterMark)))
	var body bytes.Buffer
	return func(start, n int) []time.Duration {
		took := make([]time.Duration, n)
		for i := range n {
			k := start + i
			stamp(req, slots, uint64(k))
			t0 := time.Now()
			_, err := conn.Write(req)
			check(err)
			resp, err := http.ReadResponse(br, nil)
			check(err)
			body.Reset()
			_, err = body.ReadFrom(resp.Body)
			resp.Body.Close()
			check(err)
			took[i] = time.Since(t0)
			var r struct {
				ID    string          `json:"id"`
				Score float64         `json:"score"`
				Error json.RawMessage `json:"error"`
			}
			if resp.StatusCode != http.StatusOK || bytes.Count(body.Bytes(), []byte("\n")) != 1 {
				fail("skynet serve: case %d: %s: %s", k, resp.Status, abbrev(body.Bytes()))
			}
			if err := json.Unmarshal(body.Bytes(), &r); err != nil || r.ID != fmt.Sprintf("%010d", k) || r.Score != 1 || len(r.Error) > 0 && string(r.Error) != "null" {
				fail("skynet serve: case %d: result %s (%v), want score 1 and no error", k, abbrev(body.Bytes()), err)
			}
		}
		return took
	}
}

// pythonPaths starts latency.py and returns its two paths.
func pythonPaths(python, metric string) (socketpair, mpPool func(start, n int) []time.Duration) {
	dir, err := os.MkdirTemp("", "benchserve-latency-")
	check(err)
	atExit(func() { os.RemoveAll(dir) })
	script := filepath.Join(dir, "latency.py")
	check(os.WriteFile(script, latencyPy, 0o644))
	cmd := exec.Command(python, script, metric)
	tail := &stderrTail{}
	cmd.Stderr = writerFunc(func(p []byte) (int, error) {
		for _, l := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
			tail.add(l)
		}
		return len(p), nil
	})
	stdin, err := cmd.StdinPipe()
	check(err)
	stdout, err := cmd.StdoutPipe()
	check(err)
	check(cmd.Start())
	atExit(func() { stdin.Close(); cmd.Process.Kill() })
	sc := bufio.NewScanner(stdout)
	sc.Buffer(nil, 64<<20)
	run := func(what string) func(start, n int) []time.Duration {
		return func(start, n int) []time.Duration {
			fmt.Fprintf(stdin, "%s %d %d\n", what, start, n)
			if !sc.Scan() {
				cmd.Wait()
				fail("latency.py (%s) stopped: %v\n%s", python, sc.Err(), tail)
			}
			var ns []int64
			check(json.Unmarshal(sc.Bytes(), &ns))
			if len(ns) != n {
				fail("latency.py: %d times for %d calls", len(ns), n)
			}
			took := make([]time.Duration, n)
			for i, v := range ns {
				took[i] = time.Duration(v)
			}
			return took
		}
	}
	return run("socketpair"), run("pool")
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func runLatency(bin, metric, python string, calls, runs int) {
	if runs < 1 || calls < runs {
		fail("--latency: --calls %d must be at least --runs %d", calls, runs)
	}
	abs, err := filepath.Abs(metric)
	check(err)
	version, err := exec.Command(python, "-c", "import platform; print(platform.python_version())").CombinedOutput()
	if err != nil {
		fail("--python %s: %v\n%s", python, err, version)
	}

	e, err := engine.Open(engine.Options{Metric: abs})
	check(err)
	atExit(func() { e.Close() })
	p, err := pool.Open(pool.Options{Options: engine.Options{Metric: abs}, Processes: 1, Executable: bin, Stderr: io.Discard})
	check(err)
	atExit(func() { p.Close() })
	srv, base := startServe(bin, abs, "1")
	socketpair, mpPool := pythonPaths(python, abs)
	ctx := context.Background()
	paths := []latencyPath{
		{"engine.Score, in this process", func(start, n int) []time.Duration {
			return scoreEach("engine.Score", start, n, func(c engine.Case) engine.Result { return e.Score(ctx, c) })
		}},
		{"pool.Score, 1 worker process", func(start, n int) []time.Duration {
			return scoreEach("pool.Score", start, n, func(c engine.Case) engine.Result { return p.Score(ctx, c) })
		}},
		{"skynet serve, /v1/score 1 case", servePath(strings.TrimPrefix(base, "http://"))},
		{"Python: forked worker, socketpair", socketpair},
		{"Python: multiprocessing.Pool(1).apply", mpPool},
	}
	next := 1 // case numbers: every call of every path a new case
	warm := min(500, calls/runs)
	for _, path := range paths {
		path.calls(next, warm)
		next += warm
	}
	took := make([][]time.Duration, len(paths))
	per := calls / runs
	for r := range runs {
		for j := range paths {
			k := (j + r) % len(paths)
			took[k] = append(took[k], paths[k].calls(next, per)...)
			next += per
		}
		fmt.Fprintf(os.Stderr, "run %d of %d: %d calls of each path\n", r+1, runs, per)
	}
	srv.Process.Signal(os.Interrupt)
	srv.Wait()

	fmt.Printf("one call at a time, metric %s, %d calls a path (%d runs alternating, pooled); every case new\n", metric, per*runs, runs)
	fmt.Printf("skynet %s (CPython %s embedded), serve --processes 1; Python paths on %s (CPython %s), timed in the Python parent\n",
		bin, strings.Fields(cpython.Version().Runtime)[0], python, strings.TrimSpace(string(version)))
	fmt.Printf("client, servers and workers share this %d-CPU box\n", runtime.NumCPU())
	fmt.Printf("%-40s %9s %9s %9s %8s\n", "path", "p50", "p90", "p99", "p99/p50")
	q := make([][3]time.Duration, len(paths))
	for k, path := range paths {
		t := slices.Clone(took[k])
		slices.Sort(t)
		q[k] = [3]time.Duration{t[len(t)/2], t[len(t)*90/100], t[len(t)*99/100]}
		fmt.Printf("%-40s %9s %9s %9s %8.2f\n", path.name, fmtUs(q[k][0]), fmtUs(q[k][1]), fmtUs(q[k][2]), float64(q[k][2])/float64(q[k][0]))
	}
	ratio := func(what string, a, b time.Duration, bar float64) {
		r := float64(a) / float64(b)
		met := "met"
		if r > bar {
			met = "not met"
		}
		fmt.Printf("%-46s %6.2f  (bar ≤ %g: %s)\n", what, r, bar, met)
	}
	ratio("pool.Score p50 ÷ socketpair worker p50", q[1][0], q[3][0], 1.5)
	ratio("pool.Score p99 ÷ pool.Score p50", q[1][2], q[1][0], 5)
	ratio("serve one case p50 ÷ socketpair worker p50", q[2][0], q[3][0], 2.5)
	cleanup()
}

func fmtUs(d time.Duration) string {
	return fmt.Sprintf("%.1fµs", float64(d)/float64(time.Microsecond))
}
