// Command benchserve times skynet serve against skynet score on the same
// case file (make bench-serve): score's own rate (its summary line), and
// serve's, with the metric loaded already, as a few clients post the file
// in NDJSON batches over loopback. It prints the medians of --runs runs,
// alternating, and the ratio serve / score.
//
// With --shapes it is instead a load generator for the shapes RL trainers
// send (shapes.go): one sample a request and 64-case requests at 1 to 1,024
// connections, beside 1,000-case requests, with cases/s, p50 and p99.
//
// With --rewards it loads skynet serve beside the reward servers users write
// instead (rewards.go, reward_server.py): POST /v1/rewards, OpenRLHF's body,
// to skynet serve, to aiohttp in one process and to FastAPI on uvicorn
// --workers N, each calling the same metric's score once a sample.
//
// With --latency it times one call at a time (latency.go, latency.py):
// engine.Score in this process, pool.Score with one worker process, skynet
// serve over one keep-alive connection, beside a Python worker forked once
// answering JSON lines over a socketpair and multiprocessing.Pool(1).apply.
//
//	go run ./internal/benchserve --bin bin/skynet --metric M --data CASES.jsonl [--runs 5] [--clients 4] [--batch 1000]
//	go run ./internal/benchserve --shapes --bin bin/skynet --metric M --data CASES.jsonl [--runs 5] [--duration 2s]
//	go run ./internal/benchserve --rewards --bin bin/skynet --metric M --python PY [--samples exact|edited] [--runs 3] [--duration 1s]
//	go run ./internal/benchserve --latency --bin bin/skynet --metric M [--python PY] [--calls 20000] [--runs 5]
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/skynetml/skynet/internal/median"
)

func main() {
	bin := flag.String("bin", "bin/skynet", "the skynet binary")
	metric := flag.String("metric", "", "metric.py")
	data := flag.String("data", "", "case file (JSONL)")
	runs := flag.Int("runs", 5, "runs of each (medians; --rewards: 3)")
	clients := flag.Int("clients", 4, "concurrent clients posting to serve")
	batch := flag.Int("batch", 1000, "cases a request")
	processes := flag.String("processes", "auto", "--processes of both")
	shapes := flag.Bool("shapes", false, "load-generator mode: request shapes and connections (see shapes.go)")
	duration := flag.Duration("duration", 2*time.Second, "with --shapes or --rewards: how long each shape runs, each run (--rewards: 1s, each server)")
	target := flag.String("url", "", "with --shapes: load this running skynet serve instead of starting one (for profiling it)")
	only := flag.String("only", "", "with --shapes or --rewards: the shapes to run, as CASESxCONNECTIONS[,...] (default: the whole table)")
	rewards := flag.Bool("rewards", false, "skynet serve beside Python reward servers on POST /v1/rewards (see rewards.go)")
	samples := flag.String("samples", "exact", "with --rewards: the texts sent, exact (every other completion is its label) or edited (each completion its label with words changed)")
	latency := flag.Bool("latency", false, "one call at a time: engine, pool, serve, and Python workers (see latency.go)")
	calls := flag.Int("calls", 20000, "with --latency: calls of each path, over all runs")
	python := flag.String("python", "", "with --rewards or --latency: the python of the Python servers and workers (default: the CPython skynet embeds)")
	flag.Parse()
	go onSignal()
	if *python == "" {
		*python = embeddedPython()
	}
	if *metric == "" {
		fail("--metric is required")
	}
	switch {
	case *rewards:
		// Three servers, two metrics: shorter defaults keep make
		// bench-serve within minutes on the 2-core box.
		set := map[string]bool{}
		flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if !set["runs"] {
			*runs = 3
		}
		if !set["duration"] {
			*duration = time.Second
		}
		table := rewardShapes
		if *only != "" {
			table = parseShapes(*only)
		}
		runRewards(*bin, *metric, *python, *processes, *samples, *runs, *duration, table)
		return
	case *latency:
		runLatency(*bin, *metric, *python, *calls, *runs)
		return
	}
	if *data == "" {
		fmt.Fprintln(os.Stderr, "benchserve: --metric and --data are required")
		os.Exit(2)
	}
	raw, err := os.ReadFile(*data)
	check(err)
	var lines [][]byte
	for _, l := range bytes.Split(raw, []byte("\n")) {
		if len(bytes.TrimSpace(l)) > 0 {
			lines = append(lines, l)
		}
	}
	n := len(lines)
	if *shapes {
		runShapes(*bin, *metric, *processes, *target, lines, *runs, *duration, parseShapes(*only))
		return
	}
	var batches [][]byte
	for i := 0; i < n; i += *batch {
		batches = append(batches, append(bytes.Join(lines[i:min(i+*batch, n)], []byte("\n")), '\n'))
	}

	tmp, err := os.MkdirTemp("", "benchserve-")
	check(err)
	defer os.RemoveAll(tmp)
	out := filepath.Join(tmp, "results.jsonl")
	rate := regexp.MustCompile(`scored (\d+) case\(s\) in ([0-9.]+)s`)
	srv, url := startServe(*bin, *metric, *processes)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *clients}}
	post := func(body []byte) int {
		resp, err := client.Post(url+"/v1/score", "application/x-ndjson", bytes.NewReader(body))
		check(err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		check(err)
		if resp.StatusCode != http.StatusOK {
			fail("serve: %s: %s", resp.Status, b)
		}
		return bytes.Count(b, []byte("\n"))
	}
	post(batches[0]) // warm: the workers' first cases, the connections
	var scoreRates, scoreWall []float64
	var serveRates, ratios []float64
	// The runs alternate, a score then a serve, so that a change in the
	// machine's load falls on both.
	for range *runs {
		start := time.Now()
		cmd := exec.Command(*bin, "score", "--metric", *metric, "--data", *data, "--processes", *processes, "--out", out)
		summary, err := cmd.Output()
		wall := time.Since(start)
		if err != nil {
			fail("skynet score: %v\n%s", err, summary)
		}
		m := rate.FindSubmatch(summary)
		if m == nil {
			fail("skynet score printed no summary:\n%s", summary)
		}
		got, _ := strconv.Atoi(string(m[1]))
		secs, _ := strconv.ParseFloat(string(m[2]), 64)
		if got != n {
			fail("skynet score scored %d cases of %d", got, n)
		}
		scoreRates = append(scoreRates, float64(n)/secs)
		scoreWall = append(scoreWall, float64(n)/wall.Seconds())
		work := make(chan []byte, len(batches))
		for _, b := range batches {
			work <- b
		}
		close(work)
		var mu sync.Mutex
		total := 0
		var wg sync.WaitGroup
		start = time.Now()
		for range *clients {
			wg.Go(func() {
				for b := range work {
					k := post(b)
					mu.Lock()
					total += k
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		secs = time.Since(start).Seconds()
		if total != n {
			fail("serve answered %d cases of %d", total, n)
		}
		serveRates = append(serveRates, float64(n)/secs)
		ratios = append(ratios, serveRates[len(serveRates)-1]/scoreRates[len(scoreRates)-1])
	}
	srv.Process.Signal(os.Interrupt)
	srv.Wait()

	s, w, v := median.Of(scoreRates), median.Of(scoreWall), median.Of(serveRates)
	fmt.Printf("cases: %d (%s), metric %s, --processes %s, %d runs (medians)\n", n, *data, *metric, *processes, *runs)
	fmt.Printf("skynet score: %.0f cases/s (its summary; %.0f cases/s counting the process start and metric load)\n", s, w)
	fmt.Printf("skynet serve: %.0f cases/s (%d clients, NDJSON batches of %d, metric loaded already)\n", v, *clients, *batch)
	fmt.Printf("ratio serve/score: %.2f (median of the runs' ratios %.2f; against the whole score process: %.2f)\n", v/s, median.Of(ratios), v/w)
}

// startServe starts skynet serve on a free loopback port and returns it
// once it says it is ready, with its URL.
func startServe(bin, metric, processes string) (*exec.Cmd, string) {
	srv := exec.Command(bin, "serve", "--metric", metric, "--processes", processes, "--listen", "127.0.0.1:0")
	pipe, err := srv.StderrPipe()
	check(err)
	check(srv.Start())
	atExit(func() { srv.Process.Kill() })
	url := ""
	sc := bufio.NewScanner(pipe)
	for sc.Scan() {
		if _, u, ok := strings.Cut(sc.Text(), "skynet serve: ready on "); ok {
			url, _, _ = strings.Cut(u, " ")
			break
		}
	}
	if url == "" {
		fail("skynet serve did not get ready")
	}
	go io.Copy(io.Discard, pipe)
	return srv, url
}

func check(err error) {
	if err != nil {
		fail("%v", err)
	}
}

// fail says what went wrong, stops the servers it started, and exits 1.
func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "benchserve: "+format+"\n", args...)
	cleanup()
	os.Exit(1)
}

// cleanups are what fail, a signal and the end of a mode run: killing the
// servers this program started, so that none outlives it.
var cleanups struct {
	sync.Mutex
	fns []func()
}

func atExit(f func()) {
	cleanups.Lock()
	defer cleanups.Unlock()
	cleanups.fns = append(cleanups.fns, f)
}

// cleanup runs each function atExit was given, once, newest first.
func cleanup() {
	cleanups.Lock()
	fns := cleanups.fns
	cleanups.fns = nil
	cleanups.Unlock()
	for _, f := range slices.Backward(fns) {
		f()
	}
}

// onSignal stops the servers when this program is interrupted.
func onSignal() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, os.Interrupt, syscall.SIGTERM)
	sig := <-c
	fmt.Fprintf(os.Stderr, "benchserve: %v: stopping the servers\n", sig)
	cleanup()
	os.Exit(130)
}

// embeddedPython is the python of the CPython skynet embeds, as the tests
// find it: SKYNET_PYTHON, else pkg-config python3-embed's
// exec_prefix/bin/python3.X; "python3" when pkg-config has no answer.
func embeddedPython() string {
	if p := os.Getenv("SKYNET_PYTHON"); p != "" {
		return p
	}
	pc := func(args ...string) string {
		out, _ := exec.Command("pkg-config", append(args, "python3-embed")...).Output()
		return strings.TrimSpace(string(out))
	}
	prefix := pc("--variable=exec_prefix")
	if prefix == "" {
		prefix = pc("--variable=prefix")
	}
	version := pc("--modversion")
	if prefix == "" || version == "" {
		return "python3"
	}
	return filepath.Join(prefix, "bin", "python"+version)
}
