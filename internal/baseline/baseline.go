// Package baseline runs the Python baselines skynet bench compares against,
// in python3 with no Skynet: the persistent worker a user would write
// (worker.py, fed one case at a time or pipelined), a new process a case,
// the plain script (script.py) and a multiprocessing.Pool script (pool.py).
package baseline

import (
	"bufio"
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/skynetml/skynet/internal/stderrtail"
)

//go:embed worker.py
var workerScript string

//go:embed script.py
var plainScript string

//go:embed pool.py
var poolScript string

// DefaultTimeout bounds the wait for each reply of a worker (the first one
// includes starting python and importing the metric): a worker that hangs,
// or dies without a word, is an error that says so rather than a bench
// that waits forever.
const DefaultTimeout = 2 * time.Minute

// stderrLines is how much of a worker's stderr an error quotes: enough for
// a metric's Python traceback.
const stderrLines = 50

// Runner runs one metric's baselines with one python3.
type Runner struct {
	python  string
	metric  string
	timeout time.Duration // the longest wait for one reply of a worker
	worker  string        // worker.py, script.py and pool.py, written out
	script  string
	pool    string
}

// New writes the baseline scripts into dir, which the caller removes, for
// python to run metric; timeout is the longest wait for one reply of a
// worker (--worker-timeout).
func New(dir, python, metric string, timeout time.Duration) (*Runner, error) {
	r := &Runner{python: python, metric: metric, timeout: timeout,
		worker: filepath.Join(dir, "worker.py"), script: filepath.Join(dir, "script.py"), pool: filepath.Join(dir, "pool.py")}
	for path, text := range map[string]string{r.worker: workerScript, r.script: plainScript, r.pool: poolScript} {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// ScriptCommand is the command line of the plain script: it scores the
// JSONL file data into out.
func (r *Runner) ScriptCommand(data, out string) []string {
	return []string{r.python, r.script, r.metric, data, out}
}

// PoolCommand is the command line of the multiprocessing.Pool script with
// processes processes: it scores data into out.
func (r *Runner) PoolCommand(data, out string, processes int) []string {
	return []string{r.python, r.pool, r.metric, data, out, strconv.Itoa(processes)}
}

// Check is told the score a worker gave case i, and says what is wrong
// with it.
type Check func(i int, score float64) error

// reply reads a worker's reply to case i and hands its score to c.
func (c Check) reply(i int, line []byte) error {
	var r struct {
		Score float64 `json:"score"`
	}
	if err := json.Unmarshal(line, &r); err != nil {
		return fmt.Errorf("worker reply %q: %v", line, err)
	}
	return c(i, r.Score)
}

// Subprocess times the persistent worker over lines, in ns a case:
// lockstep (write a case, wait for its reply) or pipelined (write all while
// reading all). The worker is warmed up on the first line first.
func (r *Runner) Subprocess(lines [][]byte, pipelined bool, check Check) (ns float64, err error) {
	var args []string
	what := "lockstep"
	if pipelined {
		args, what = append(args, "--pipelined"), "pipelined"
	}
	w, err := r.start(what, args...)
	if err != nil {
		return 0, err
	}
	defer func() { w.stop(err == nil) }()
	// Warm up: the worker has imported the metric once it answers. (A
	// write to a worker that is gone fails; its reply then says why.)
	w.stdin.Write(append(append([]byte(nil), lines[0]...), '\n'))
	if _, err := w.reply(); err != nil {
		return 0, err
	}
	start := time.Now()
	if pipelined {
		go func() {
			bw := bufio.NewWriterSize(w.stdin, 1<<16)
			for _, l := range lines {
				bw.Write(l)
				bw.WriteByte('\n')
			}
			bw.Flush()
			w.stdin.Close()
		}()
		for i := range lines {
			line, err := w.reply()
			if err != nil {
				return 0, err
			}
			if err := check.reply(i, line); err != nil {
				return 0, err
			}
		}
	} else {
		for i, l := range lines {
			w.stdin.Write(append(l, '\n'))
			line, err := w.reply()
			if err != nil {
				return 0, err
			}
			if err := check.reply(i, line); err != nil {
				return 0, err
			}
		}
	}
	return float64(time.Since(start).Nanoseconds()) / float64(len(lines)), nil
}

// PerProcess starts a new python3 for each of the first n lines, as a naive
// runner would, and times it in ns a case.
func (r *Runner) PerProcess(lines [][]byte, n int, check Check) (float64, error) {
	n = min(n, len(lines))
	start := time.Now()
	for i := 0; i < n; i++ {
		cmd := exec.Command(r.python, r.worker, r.metric)
		cmd.Stdin = bytes.NewReader(append(append([]byte(nil), lines[i]...), '\n'))
		stderr := &stderrtail.Tail{Max: stderrLines}
		cmd.Stderr = stderr
		cmd.WaitDelay = time.Second
		var stalled atomic.Bool
		timer := time.AfterFunc(r.timeout, func() {
			stalled.Store(true)
			cmd.Process.Kill()
		})
		out, err := cmd.Output()
		timer.Stop()
		what := fmt.Sprintf("the per-case worker (%s %s %s) for case %d", r.python, filepath.Base(r.worker), r.metric, i)
		if stalled.Load() {
			return 0, fmt.Errorf("%s sent no reply in %v, so it was stopped (the metric's score or import may hang; --worker-timeout sets the wait)%s",
				what, r.timeout, stderrSuffix(stderr))
		}
		if err != nil {
			return 0, fmt.Errorf("%s: %v%s", what, err, stderrSuffix(stderr))
		}
		if err := check.reply(i, out); err != nil {
			return 0, err
		}
	}
	return float64(time.Since(start).Nanoseconds()) / float64(n), nil
}

// worker is one running worker.py. The replies come on its stdout, which
// worker.py keeps for the protocol alone; its stderr (where the metric's
// print() output goes) is kept, the end of it, for error messages. A
// watchdog kills it when no reply has come for the Runner's timeout, and
// the read that was waiting then fails saying so.
type worker struct {
	r       *Runner
	what    string
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	out     *bufio.Reader
	stderr  *stderrtail.Tail
	replies atomic.Int64
	stalled atomic.Bool
	done    chan struct{}
	waited  bool
	waitErr error
}

func (r *Runner) start(what string, args ...string) (*worker, error) {
	w := &worker{r: r, what: what, cmd: exec.Command(r.python, append([]string{r.worker, r.metric}, args...)...),
		stderr: &stderrtail.Tail{Max: stderrLines}, done: make(chan struct{})}
	w.cmd.Stderr = w.stderr
	w.cmd.WaitDelay = time.Second // a process the metric started, left holding stderr, does not hold up Wait
	var err error
	if w.stdin, err = w.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := w.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := w.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s %s: %v", r.python, r.worker, err)
	}
	w.out = bufio.NewReaderSize(stdout, 1<<16)
	go w.watch()
	return w, nil
}

// watch kills the worker once no reply has come for the timeout. It costs
// the timed loop one atomic add per reply.
func (w *worker) watch() {
	timeout := w.r.timeout
	tick := time.NewTicker(max(timeout/8, time.Millisecond))
	defer tick.Stop()
	last, since := int64(-1), time.Now()
	for {
		select {
		case <-w.done:
			return
		case now := <-tick.C:
			if n := w.replies.Load(); n != last {
				last, since = n, now
			} else if now.Sub(since) >= timeout {
				w.stalled.Store(true)
				w.cmd.Process.Kill()
				return
			}
		}
	}
}

// reply reads the next reply line.
func (w *worker) reply() ([]byte, error) {
	line, err := w.out.ReadBytes('\n')
	if err != nil {
		return nil, w.failed(err)
	}
	w.replies.Add(1)
	return line, nil
}

// failed explains why a reply did not come: the worker hung (and was
// killed), or it exited, with what it last wrote to stderr.
func (w *worker) failed(err error) error {
	n := w.replies.Load()
	what := fmt.Sprintf("the %s worker (%s %s %s)", w.what, w.r.python, filepath.Base(w.r.worker), w.r.metric)
	if w.stalled.Load() {
		w.wait()
		return fmt.Errorf("%s sent no reply for %v after %d replies, so it was stopped (the metric's score or import may hang; --worker-timeout sets the wait)%s",
			what, w.r.timeout, n, stderrSuffix(w.stderr))
	}
	if err == io.EOF {
		if werr := w.wait(); werr != nil {
			return fmt.Errorf("%s exited after %d replies: %v%s", what, n, werr, stderrSuffix(w.stderr))
		}
		return fmt.Errorf("%s closed its output after %d replies%s", what, n, stderrSuffix(w.stderr))
	}
	return fmt.Errorf("%s: reading its reply: %v%s", what, err, stderrSuffix(w.stderr))
}

// wait reaps the worker once.
func (w *worker) wait() error {
	if !w.waited {
		w.waited = true
		w.waitErr = w.cmd.Wait()
		close(w.done)
	}
	return w.waitErr
}

// stop ends the worker: it has its input closed; if it has not exited after
// that (it is still working, or the bench failed midway), it is killed, so
// a failed run never waits on it.
func (w *worker) stop(ok bool) {
	w.stdin.Close()
	if !ok && !w.waited {
		w.cmd.Process.Kill()
	}
	w.wait()
}

// stderrSuffix is "; its stderr: ..." for an error message, or "".
func stderrSuffix(t *stderrtail.Tail) string {
	lines, dropped := t.Lines()
	s := strings.TrimSpace(strings.Join(lines, "\n"))
	if s == "" {
		return ""
	}
	if dropped {
		return "; the end of its stderr:\n..." + s
	}
	return "; its stderr:\n" + s
}
