package main

// The load generator of --shapes: each connection is a goroutine with its
// own keep-alive TCP connection, sending a prepared request and reading the
// response with http.ReadResponse (no http.Client: its transport goroutines
// would cost the 2-core box more CPU than the server under test). Closed
// loop: a connection sends its next request when the last one is answered.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/skynetml/skynet/caseio"
	"github.com/skynetml/skynet/engine"
	"github.com/skynetml/skynet/internal/median"
	"github.com/skynetml/skynet/pool"
)

// shape is a request size and how many connections send it at once.
type shape struct {
	cases, conns int
}

var shapesTable = []shape{
	{1, 1}, {1, 64}, {1, 256}, {1, 1024},
	{64, 1}, {64, 64}, {64, 256}, {64, 1024},
	{1000, 4},
}

// shapeRun is one run of one shape.
type shapeRun struct {
	rate     float64 // cases answered a second
	p50, p99 time.Duration
	cpu      time.Duration // the server's CPU (its workers' too) a request; 0: not known
	client   time.Duration // this process's CPU a request (--rewards); 0: not measured
	requests int
}

// parseShapes reads --only; empty is the whole table.
func parseShapes(only string) []shape {
	if only == "" {
		return shapesTable
	}
	var out []shape
	for _, f := range strings.Split(only, ",") {
		var sh shape
		if _, err := fmt.Sscanf(f, "%dx%d", &sh.cases, &sh.conns); err != nil || sh.cases < 1 || sh.conns < 1 {
			fail("--only: %q is not CASESxCONNECTIONS", f)
		}
		out = append(out, sh)
	}
	return out
}

func runShapes(bin, metric, processes, base string, lines [][]byte, runs int, d time.Duration, table []shape) {
	var srv *exec.Cmd
	if base == "" {
		srv, base = startServe(bin, metric, processes)
		defer srv.Process.Kill()
	}
	u, err := url.Parse(base)
	check(err)
	results := make([][]shapeRun, len(table))
	direct := openDirect(bin, metric, processes)
	if direct != nil {
		defer direct.Close()
	}
	var directRuns []shapeRun
	warm := true
	for r := range runs {
		if direct != nil {
			directRuns = append(directRuns, scoreDirect(direct, lines, d))
		}
		for i, sh := range table {
			if warm { // the workers' first cases, the first connections
				loadShape(u.Host, lines, sh, d/4)
				warm = false
			}
			before := treeCPU(srv)
			res := loadShape(u.Host, lines, sh, d)
			if before > 0 {
				res.cpu = (treeCPU(srv) - before) / time.Duration(max(res.requests, 1))
			}
			results[i] = append(results[i], res)
			fmt.Fprintf(os.Stderr, "run %d: %d case(s) a request, %d connection(s): %.0f cases/s\n", r+1, sh.cases, sh.conns, results[i][len(results[i])-1].rate)
		}
	}
	if srv != nil {
		srv.Process.Signal(os.Interrupt)
		srv.Wait()
	}

	batchRate := math.NaN()
	for i, sh := range table {
		if sh.cases == 1000 {
			batchRate = medianRun(results[i]).rate
		}
	}
	fmt.Printf("skynet serve, metric %s, --processes %s, POST /v1/score NDJSON, %v a shape a run, %d runs (medians)\n", metric, processes, d, runs)
	fmt.Printf("%-14s %11s %12s %10s %10s %16s %13s\n", "cases/request", "connections", "cases/s", "p50", "p99", "server CPU/req", "vs 1000-case")
	for i, sh := range table {
		m := medianRun(results[i])
		fmt.Printf("%-14d %11d %12.0f %10s %10s %16s %13.2f\n", sh.cases, sh.conns, m.rate, fmtDur(m.p50), fmtDur(m.p99), fmtMicros(m.cpu), m.rate/batchRate)
		if sh == (shape{1, 1}) && len(directRuns) > 0 {
			d := medianRun(directRuns)
			fmt.Printf("%-26s %12.0f %10s %10s %16s   (HTTP adds %.2fms at p50)\n", "pool.Score, one at a time", d.rate, fmtDur(d.p50), fmtDur(d.p99), "", float64(m.p50-d.p50)/float64(time.Millisecond))
		}
	}
}

// medianRun is the median of each figure over the runs.
func medianRun(rs []shapeRun) shapeRun {
	var rate, p50, p99, cpu, client []float64
	for _, r := range rs {
		rate, p50, p99, cpu = append(rate, r.rate), append(p50, float64(r.p50)), append(p99, float64(r.p99)), append(cpu, float64(r.cpu))
		client = append(client, float64(r.client))
	}
	return shapeRun{rate: median.Of(rate), p50: time.Duration(median.Of(p50)), p99: time.Duration(median.Of(p99)),
		cpu: time.Duration(median.Of(cpu)), client: time.Duration(median.Of(client))}
}

func fmtDur(d time.Duration) string {
	return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
}

func fmtMicros(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0fµs", float64(d)/float64(time.Microsecond))
}

// treeCPU is the user+system time of srv and its descendants (the
// workers) so far, from /proc; 0 when it cannot be read (not Linux, or a
// server this program did not start).
func treeCPU(srv *exec.Cmd) time.Duration {
	if srv == nil || srv.Process == nil {
		return 0
	}
	return pidTreeCPU(srv.Process.Pid)
}

// pidTreeCPU is the user+system time of process root and every process
// under it (uvicorn's workers are its children, skynet serve's too), so
// far; 0 when /proc cannot be read. The time of descendants that exited is
// not in it, only of those alive now: the servers' workers live as long as
// they do.
func pidTreeCPU(root int) time.Duration {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	parent := map[int]int{}
	ticksOf := map[int]int64{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// The fields after the command's closing parenthesis: state, ppid, ...
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 13 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		parent[pid], ticksOf[pid] = ppid, ut+st
	}
	var ticks int64
	for pid, t := range ticksOf {
		for p := pid; p > 1; p = parent[p] {
			if p == root {
				ticks += t
				break
			}
		}
	}
	return time.Duration(ticks) * (time.Second / clockTicks)
}

// clockTicks is the kernel's USER_HZ, 100 on every Linux this runs on.
const clockTicks = 100

// loadShape sends sh's requests for d, on sh.conns connections, each
// request sh.cases lines of lines (ids made unique within it), and checks
// every response has one line a case.
func loadShape(host string, lines [][]byte, sh shape, d time.Duration) shapeRun {
	reqs := requests(host, lines, sh.cases, 64)
	var answered atomic.Int64
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	stop := time.Now().Add(d)
	start := time.Now()
	var firstErr atomic.Value
	for c := range sh.conns {
		wg.Go(func() {
			conn, err := net.Dial("tcp", host)
			if err != nil {
				firstErr.CompareAndSwap(nil, err)
				return
			}
			defer conn.Close()
			br := bufio.NewReaderSize(conn, 64<<10)
			var mine []time.Duration
			for k := c; time.Now().Before(stop); k++ {
				t0 := time.Now()
				if _, err := conn.Write(reqs[k%len(reqs)]); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				got, err := countLines(resp.Body)
				resp.Body.Close()
				if err == nil && (resp.StatusCode != http.StatusOK || got != sh.cases) {
					err = fmt.Errorf("%s: %d result line(s) for %d case(s)", resp.Status, got, sh.cases)
				}
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				mine = append(mine, time.Since(t0))
				answered.Add(int64(got))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	if err, ok := firstErr.Load().(error); ok {
		fail("%d case(s) a request, %d connection(s): %v", sh.cases, sh.conns, err)
	}
	if len(lat) == 0 {
		fail("%d case(s) a request, %d connection(s): no request answered in %v", sh.cases, sh.conns, d)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return shapeRun{rate: float64(answered.Load()) / secs, p50: lat[len(lat)/2], p99: lat[len(lat)*99/100], requests: len(lat)}
}

// requests prepares k raw HTTP/1.1 requests of n cases each, cycling
// through lines.
func requests(host string, lines [][]byte, n, k int) [][]byte {
	var out [][]byte
	next := 0
	for r := range k {
		var body bytes.Buffer
		for i := range n {
			line := lines[next%len(lines)]
			next++
			// Unique ids within a request: the request's own numbering.
			body.Write(withID(line, fmt.Sprintf("r%d-%d", r, i)))
			body.WriteByte('\n')
		}
		head := fmt.Sprintf("POST /v1/score HTTP/1.1\r\nHost: %s\r\nContent-Type: application/x-ndjson\r\nContent-Length: %d\r\n\r\n", host, body.Len())
		out = append(out, slices.Concat([]byte(head), body.Bytes()))
	}
	return out
}

// withID gives a case line the id id, replacing the one it has: the line
// must start with {"id": "...", as make bench-serve's files do, or it gets
// one in front.
func withID(line []byte, id string) []byte {
	s := string(bytes.TrimSpace(line))
	if rest, ok := strings.CutPrefix(s, `{"id": "`); ok {
		if _, after, ok := strings.Cut(rest, `"`); ok {
			return fmt.Appendf(nil, `{"id": %q%s`, id, after)
		}
	}
	return fmt.Appendf(nil, `{"id": %q, %s`, id, strings.TrimPrefix(s, "{"))
}

// countLines reads r to its end and counts its newlines.
func countLines(r io.Reader) (int, error) {
	var buf [32 << 10]byte
	n := 0
	for {
		k, err := r.Read(buf[:])
		n += bytes.Count(buf[:k], []byte("\n"))
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// openDirect opens the pool serve runs on, in this process, with bin's
// workers: the latency of a case without HTTP, for the one-connection row.
func openDirect(bin, metric, processes string) *pool.Pool {
	n, _ := strconv.Atoi(processes) // "auto": 0, the pool's default
	p, err := pool.Open(pool.Options{Options: engine.Options{Metric: metric}, Processes: n, Executable: bin, Stderr: io.Discard})
	if err != nil {
		fmt.Fprintf(os.Stderr, "benchserve: no pool.Score row: %v\n", err)
		return nil
	}
	return p
}

// scoreDirect calls p.Score on one case after another for d.
func scoreDirect(p *pool.Pool, lines [][]byte, d time.Duration) shapeRun {
	var lat []time.Duration
	start := time.Now()
	for i := 0; time.Since(start) < d; i++ {
		c, err := caseio.ParseCase(lines[i%len(lines)], i+1)
		check(err)
		t0 := time.Now()
		if r := p.Score(context.Background(), c); r.Err != nil {
			fail("pool.Score: %v", r.Err)
		}
		lat = append(lat, time.Since(t0))
	}
	secs := time.Since(start).Seconds()
	n := len(lat)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return shapeRun{rate: float64(n) / secs, p50: lat[n/2], p99: lat[n*99/100], requests: n}
}
