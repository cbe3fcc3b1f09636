package main

// --rewards: skynet serve beside the reward servers users write instead
// (reward_server.py), all three on POST /v1/rewards with OpenRLHF's body
// ({"query", "prompts", "labels"}), all three calling the same metric's
// score once a sample:
//
//   - skynet serve --processes N (bin/skynet: whatever binary was built);
//   - aiohttp in one process, an async def handler as OpenRLHF's serve_rm.py;
//   - the same handler in FastAPI on uvicorn --workers N --loop uvloop
//     --http httptools --no-access-log.
//
// N is --processes (auto: one per CPU). The load is shapes.go's closed loop
// (raw keep-alive connections, http.ReadResponse), sending prepared
// requests in which a fixed-width counter is patched per request into every
// prompt, completion and label, so no value repeats in the whole run (skynet
// keeps the Python objects of repeated argument values, which repeated
// requests would flatter) and the client stays cheap. Every reply is
// checked: HTTP 200, as many rewards and scores as samples, each reward the
// one the texts call for. The servers take turns shape by shape, their
// order rotating run by run, so that a change in the box's load falls on
// all three; the table is the medians of the runs.

import (
	"bufio"
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

//go:embed reward_server.py
var rewardServerPy []byte

// rewardShapes are --rewards' default shapes (samples a request x
// connections): one trainer's lone samples, many rollout workers', a
// batched reward step, and the tail under 256 connections.
var rewardShapes = []shape{{1, 1}, {1, 64}, {1000, 4}, {1, 256}}

// counterWidth is the width of the counter patched into every text.
const counterWidth = 10

// counterMark stands for the counter in a template's texts, which never
// hold it otherwise.
const counterMark = '@'

// requestNo numbers every request this process sends, to every server: the
// counter each one carries.
var requestNo atomic.Uint64

// rewardsTemplate is one prepared request of n samples.
type rewardsTemplate struct {
	req   []byte // the whole HTTP request
	slots []int  // where in req the counter's digits go
	n     int
	check func(i int, reward float64) error // what sample i's reward must be
}

// rewardTexts is sample i's prompt, completion and label, with
// counterMark where the counter goes.
type rewardTexts func(i int) (prompt, completion, label string)

// exactTexts are for an exact-match metric: an arithmetic question whose
// even samples' completion is the label (reward 1.0), odd ones' off by one
// (reward 0.0).
func exactTexts(i int) (prompt, completion, label string) {
	a, b := 17+i%83, 25+i%41
	prompt = fmt.Sprintf("Question %c-%d: what is %d + %d? Answer: ", counterMark, i, a, b)
	completion = fmt.Sprintf("%d (ref %c-%d)", a+b, counterMark, i)
	label = completion
	if i%2 == 1 {
		label = fmt.Sprintf("%d (ref %c-%d)", a+b+1, counterMark, i)
	}
	return
}

func exactCheck(i int, reward float64) error {
	if want := float64(1 - i%2); reward != want {
		return fmt.Errorf("sample %d: reward %v, want %v", i, reward, want)
	}
	return nil
}

// editedWords is the vocabulary of editedTexts.
var editedWords = strings.Fields("the a of to and in is it that for on with as was be by this are at from or an have " +
	"not they which one you had but all were when we there can been has more if will would about their what so up out " +
	"them into some could other than then its only time two may first new these any very after most over such where " +
	"reward model policy gradient sample batch token prompt answer label score value return")

// editedTexts are for a similarity metric: a label of 22 words (seeded by
// i) and a completion that is the label with two words replaced and one
// dropped, so a character-level SequenceMatcher has real work to do and
// the reward is strictly between 0 and 1.
func editedTexts(i int) (prompt, completion, label string) {
	r := rand.New(rand.NewPCG(uint64(i), 48))
	words := make([]string, 22)
	for k := range words {
		words[k] = editedWords[r.IntN(len(editedWords))]
	}
	edited := append([]string(nil), words...)
	edited[3], edited[11] = "xylophone", "quartz"
	edited = append(edited[:16], edited[17:]...)
	tag := fmt.Sprintf("%c-%d ", counterMark, i)
	return fmt.Sprintf("Paraphrase %c-%d: ", counterMark, i), tag + strings.Join(edited, " "), tag + strings.Join(words, " ")
}

func editedCheck(i int, reward float64) error {
	if !(reward > 0 && reward < 1) {
		return fmt.Errorf("sample %d: reward %v, want one strictly between 0 and 1", i, reward)
	}
	return nil
}

// newRewardsTemplate prepares the request of n samples of texts for host.
func newRewardsTemplate(host string, n int, texts rewardTexts, check func(int, float64) error) *rewardsTemplate {
	var body strings.Builder
	list := func(key string, f func(p, c, l string) string) {
		fmt.Fprintf(&body, "%q: [", key)
		for i := range n {
			if i > 0 {
				body.WriteString(", ")
			}
			body.WriteString(quote(f(texts(i))))
		}
		body.WriteByte(']')
	}
	body.WriteByte('{')
	list("query", func(p, c, _ string) string { return p + c })
	body.WriteString(", ")
	list("prompts", func(p, _, _ string) string { return p })
	body.WriteString(", ")
	list("labels", func(_, _, l string) string { return l })
	body.WriteByte('}')
	req, slots := prepare("/v1/rewards", "application/json", host, body.String())
	return &rewardsTemplate{req: req, slots: slots, n: n, check: check}
}

// quote is s as a JSON string; its texts need no escaping.
func quote(s string) string {
	for _, c := range []byte(s) {
		if c == '"' || c == '\\' || c < 0x20 || c >= 0x80 {
			panic(fmt.Sprintf("text %q needs escaping", s))
		}
	}
	return `"` + s + `"`
}

// prepare makes the HTTP request that posts body to path on host, each
// counterMark in body replaced by counterWidth zeros, and says where those
// are in it.
func prepare(path, contentType, host, body string) (req []byte, slots []int) {
	var b bytes.Buffer
	for _, c := range []byte(body) {
		if c == counterMark {
			slots = append(slots, b.Len())
			b.WriteString(strings.Repeat("0", counterWidth))
			continue
		}
		b.WriteByte(c)
	}
	head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n", path, host, contentType, b.Len())
	for k := range slots {
		slots[k] += len(head)
	}
	return append([]byte(head), b.Bytes()...), slots
}

// stamp writes k, counterWidth digits, into each of t's slots in req (a
// copy of t.req).
func (t *rewardsTemplate) stamp(req []byte, k uint64) { stamp(req, t.slots, k) }

// stamp writes k, counterWidth digits, into each of slots in req.
func stamp(req []byte, slots []int, k uint64) {
	var d [counterWidth]byte
	for j := counterWidth - 1; j >= 0; j-- {
		d[j] = byte('0' + k%10)
		k /= 10
	}
	for _, s := range slots {
		copy(req[s:s+counterWidth], d[:])
	}
}

// selfCPU is this process's user+system time so far: the client's.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rewardsReply is the part of every server's reply the client checks.
type rewardsReply struct {
	Rewards []float64 `json:"rewards"`
	Scores  []float64 `json:"scores"`
}

// loadRewards sends t to host on conns connections for d (each at least
// one request), closed loop, a new counter every request, and checks every
// reply.
func loadRewards(host string, t *rewardsTemplate, conns int, d time.Duration) (shapeRun, error) {
	var mu sync.Mutex
	var lat []time.Duration
	var firstErr error
	var failed atomic.Bool
	var wg sync.WaitGroup
	start := time.Now()
	stop := start.Add(d)
	for range conns {
		wg.Go(func() {
			var mine []time.Duration
			err := func() error {
				conn, err := net.Dial("tcp", host)
				if err != nil {
					return err
				}
				defer conn.Close()
				req := bytes.Clone(t.req)
				br := bufio.NewReaderSize(conn, 64<<10)
				var body bytes.Buffer
				var reply rewardsReply
				// At least one request each, even past stop (d 0: a probe).
				for len(mine) == 0 || time.Now().Before(stop) && !failed.Load() {
					t.stamp(req, requestNo.Add(1))
					t0 := time.Now()
					if _, err := conn.Write(req); err != nil {
						return err
					}
					resp, err := http.ReadResponse(br, nil)
					if err != nil {
						return err
					}
					body.Reset()
					_, err = body.ReadFrom(resp.Body)
					resp.Body.Close()
					if err != nil {
						return err
					}
					took := time.Since(t0)
					if resp.StatusCode != http.StatusOK {
						return fmt.Errorf("%s: %s", resp.Status, abbrev(body.Bytes()))
					}
					if err := json.Unmarshal(body.Bytes(), &reply); err != nil {
						return fmt.Errorf("reply %s: %v", abbrev(body.Bytes()), err)
					}
					if len(reply.Rewards) != t.n || len(reply.Scores) != t.n {
						return fmt.Errorf("%d rewards and %d scores for %d samples: %s", len(reply.Rewards), len(reply.Scores), t.n, abbrev(body.Bytes()))
					}
					for i, r := range reply.Rewards {
						if err := t.check(i, r); err != nil {
							return fmt.Errorf("%v: %s", err, abbrev(body.Bytes()))
						}
					}
					mine = append(mine, took)
				}
				return nil
			}()
			mu.Lock()
			defer mu.Unlock()
			if err != nil && firstErr == nil {
				firstErr = err
				failed.Store(true)
			}
			lat = append(lat, mine...)
		})
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	if firstErr != nil {
		return shapeRun{}, firstErr
	}
	if len(lat) == 0 {
		return shapeRun{}, fmt.Errorf("no request answered in %v", d)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return shapeRun{rate: float64(len(lat)) / secs, p50: lat[len(lat)/2], p99: lat[len(lat)*99/100], requests: len(lat)}, nil
}

func abbrev(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "..."
	}
	return string(b)
}

// rewardServer is one server under load.
type rewardServer struct {
	name string
	cmd  *exec.Cmd
	host string
}

// stderrTail keeps the last lines a process wrote to stderr, for a message
// about its death.
type stderrTail struct {
	mu    sync.Mutex
	lines []string
}

func (s *stderrTail) add(l string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lines = append(s.lines, l)
	if len(s.lines) > 40 {
		s.lines = s.lines[len(s.lines)-40:]
	}
}

func (s *stderrTail) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.lines, "\n")
}

// startPython starts reward_server.py's server kind (aiohttp, or uvicorn
// with workers processes) on a free loopback port, and returns it once it
// has answered a request and, under uvicorn, every worker has started.
func startPython(kind, python, dir, metric string, workers int) *rewardServer {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	var cmd *exec.Cmd
	var name, readyLine string
	need := 1
	switch kind {
	case "aiohttp":
		name, readyLine = "aiohttp, 1 process", "reward_server: aiohttp ready"
		cmd = exec.Command(python, filepath.Join(dir, "reward_server.py"), "aiohttp", "127.0.0.1", port)
	case "uvicorn":
		name, readyLine, need = fmt.Sprintf("uvicorn, %d workers", workers), "Application startup complete.", workers
		cmd = exec.Command(python, "-m", "uvicorn", "--app-dir", dir, "reward_server:fastapi_app", "--factory",
			"--workers", strconv.Itoa(workers), "--loop", "uvloop", "--http", "httptools", "--no-access-log",
			"--log-level", "info", "--host", "127.0.0.1", "--port", port)
	}
	cmd.Env = append(os.Environ(), "SKYNET_BENCH_METRIC="+metric)
	// Its own process group: uvicorn's workers are stopped with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pipe, err := cmd.StderrPipe()
	check(err)
	check(cmd.Start())
	atExit(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	tail := &stderrTail{}
	ready := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pipe)
		seen := 0
		for sc.Scan() {
			tail.add(sc.Text())
			if strings.Contains(sc.Text(), readyLine) {
				if seen++; seen == need {
					close(ready)
				}
			}
		}
		close(exited)
	}()
	select {
	case <-ready:
	case <-exited:
		fail("%s did not start:\n%s", name, tail)
	case <-time.After(2 * time.Minute):
		fail("%s did not get ready in 2 minutes:\n%s", name, tail)
	}
	srv := &rewardServer{name: name, cmd: cmd, host: "127.0.0.1:" + port}
	// Listening: answered a one-sample request.
	probe := newRewardsTemplate(srv.host, 1, exactTexts, func(int, float64) error { return nil })
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		_, err := loadRewards(srv.host, probe, 1, 0)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			fail("%s does not answer: %v\n%s", name, err, tail)
		}
	}
	return srv
}

// stop stops s as ^C would, then kills what is left.
func (s *rewardServer) stop() {
	s.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
	}
	if s.cmd.SysProcAttr != nil && s.cmd.SysProcAttr.Setpgid {
		syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	} else {
		s.cmd.Process.Kill()
	}
}

func runRewards(bin, metric, python, processes, samples string, runs int, d time.Duration, table []shape) {
	texts, verify := exactTexts, exactCheck
	switch samples {
	case "exact":
	case "edited":
		texts, verify = editedTexts, editedCheck
	default:
		fail("--samples %q: exact or edited", samples)
	}
	workers := runtime.NumCPU()
	if processes != "auto" {
		n, err := strconv.Atoi(processes)
		if err != nil || n < 1 {
			fail("--processes %q: auto or a number", processes)
		}
		workers = n
	}
	abs, err := filepath.Abs(metric)
	check(err)
	if out, err := exec.Command(python, "-c", "import aiohttp, fastapi, uvicorn, uvloop, httptools, sys; print(sys.version.split()[0])").CombinedOutput(); err != nil {
		fail("%s cannot run the Python servers (make pyvenv makes the pinned venv that can: --python bin/pyvenv/bin/python): %v\n%s", python, err, out)
	}
	version, _ := exec.Command(python, "-c", "import sys, aiohttp, fastapi, uvicorn; print(sys.version.split()[0], 'aiohttp', aiohttp.__version__, 'fastapi', fastapi.__version__, 'uvicorn', uvicorn.__version__)").Output()
	dir, err := os.MkdirTemp("", "benchserve-rewards-")
	check(err)
	atExit(func() { os.RemoveAll(dir) })
	check(os.WriteFile(filepath.Join(dir, "reward_server.py"), rewardServerPy, 0o644))

	fmt.Fprintf(os.Stderr, "benchserve: starting skynet serve, aiohttp and uvicorn (%d workers) on %s\n", workers, metric)
	sky, base := startServe(bin, metric, strconv.Itoa(workers))
	servers := []*rewardServer{
		{name: fmt.Sprintf("skynet serve, %d processes", workers), cmd: sky, host: strings.TrimPrefix(base, "http://")},
		startPython("aiohttp", python, dir, abs, workers),
		startPython("uvicorn", python, dir, abs, workers),
	}
	results := make([][][]shapeRun, len(table)) // [shape][server][run]
	templates := make([][]*rewardsTemplate, len(table))
	for i, sh := range table {
		results[i] = make([][]shapeRun, len(servers))
		for _, s := range servers {
			templates[i] = append(templates[i], newRewardsTemplate(s.host, sh.cases, texts, verify))
		}
	}
	one := func(i, k int, d time.Duration) shapeRun {
		s := servers[k]
		before, self := pidTreeCPU(s.cmd.Process.Pid), selfCPU()
		res, err := loadRewards(s.host, templates[i][k], table[i].conns, d)
		if err != nil {
			fail("%s, %d sample(s) a request, %d connection(s): %v", s.name, table[i].cases, table[i].conns, err)
		}
		if before > 0 {
			res.cpu = (pidTreeCPU(s.cmd.Process.Pid) - before) / time.Duration(max(res.requests, 1))
		}
		res.client = (selfCPU() - self) / time.Duration(max(res.requests, 1))
		return res
	}
	// Warm every server on every shape: its workers' first calls, the
	// imports its handler makes on the first request.
	for i := range table {
		for k := range servers {
			one(i, k, d/4)
		}
	}
	for r := range runs {
		for i, sh := range table {
			for j := range servers {
				k := (j + r) % len(servers) // who goes first rotates run by run
				res := one(i, k, d)
				results[i][k] = append(results[i][k], res)
				fmt.Fprintf(os.Stderr, "run %d: %d sample(s) a request, %d connection(s), %s: %.0f req/s, p99 %s\n",
					r+1, sh.cases, sh.conns, servers[k].name, res.rate, fmtDur(res.p99))
			}
		}
	}
	for _, s := range servers {
		s.stop()
	}

	fmt.Printf("POST /v1/rewards (OpenRLHF's body), metric %s (%s texts), %v a shape a server a run, %d runs alternating (medians)\n", metric, samples, d, runs)
	fmt.Printf("servers: %s (%s); aiohttp in 1 process; FastAPI on uvicorn --workers %d --loop uvloop --http httptools --no-access-log (python %s)\n",
		servers[0].name, bin, workers, strings.TrimSpace(string(version)))
	fmt.Printf("every request new (a counter in each prompt, completion and label); the Go client and the servers share this %d-CPU box\n", runtime.NumCPU())
	fmt.Printf("%-13s %-26s %9s %11s %9s %9s %9s %10s %9s %10s\n", "samples×conns", "server", "req/s", "samples/s", "p50", "p99", "CPU/req", "client/req", "requests", "÷ best Py")
	var ratios []string
	for i, sh := range table {
		ms := make([]shapeRun, len(servers))
		n := make([]int, len(servers))
		for k := range servers {
			ms[k] = medianRun(results[i][k])
			for _, r := range results[i][k] {
				n[k] += r.requests
			}
		}
		best := 1
		if ms[2].rate > ms[1].rate {
			best = 2
		}
		ratio := ms[0].rate / ms[best].rate
		for k, s := range servers {
			label, r := "", ""
			if k == 0 {
				label, r = fmt.Sprintf("%d×%d", sh.cases, sh.conns), fmt.Sprintf("%.2f", ratio)
			}
			fmt.Printf("%-13s %-26s %9.0f %11.0f %9s %9s %9s %10s %9d %10s\n", label, s.name, ms[k].rate, ms[k].rate*float64(sh.cases),
				fmtDur(ms[k].p50), fmtDur(ms[k].p99), fmtMicros(ms[k].cpu), fmtMicros(ms[k].client), n[k], r)
		}
		ratios = append(ratios, fmt.Sprintf("%d×%d %.2f (%s)", sh.cases, sh.conns, ratio, strings.SplitN(servers[best].name, ",", 2)[0]))
	}
	fmt.Printf("skynet ÷ best Python server, req/s: %s\n", strings.Join(ratios, ", "))
	cleanup()
}
