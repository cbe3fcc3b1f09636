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
//	go run ./internal/benchserve --bin bin/skynet --metric M --data CASES.jsonl [--runs 5] [--clients 4] [--batch 1000]
//	go run ./internal/benchserve --shapes --bin bin/skynet --metric M --data CASES.jsonl [--runs 5] [--duration 2s]
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
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/skynetml/skynet/internal/median"
)

func main() {
	bin := flag.String("bin", "bin/skynet", "the skynet binary")
	metric := flag.String("metric", "", "metric.py")
	data := flag.String("data", "", "case file (JSONL)")
	runs := flag.Int("runs", 5, "runs of each (medians)")
	clients := flag.Int("clients", 4, "concurrent clients posting to serve")
	batch := flag.Int("batch", 1000, "cases a request")
	processes := flag.String("processes", "auto", "--processes of both")
	shapes := flag.Bool("shapes", false, "load-generator mode: request shapes and connections (see shapes.go)")
	duration := flag.Duration("duration", 2*time.Second, "with --shapes: how long each shape runs, each run")
	target := flag.String("url", "", "with --shapes: load this running skynet serve instead of starting one (for profiling it)")
	only := flag.String("only", "", "with --shapes: the shapes to run, as CASESxCONNECTIONS[,...] (default: the whole table)")
	flag.Parse()
	if *metric == "" || *data == "" {
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
	defer srv.Process.Kill()
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

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "benchserve: "+format+"\n", args...)
	os.Exit(1)
}
