package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/skynetml/skynet/engine"
)

// resultLine is one line of the results file (SPEC §4, plus logs, warnings
// and the side info's extra keys when there are any).
type resultLine struct {
	ID       string             `json:"id"`
	Score    float64            `json:"score"`
	Feedback string             `json:"feedback"`
	Scores   map[string]float64 `json:"scores"`
	Error    *errorField        `json:"error"`
	MS       float64            `json:"ms"`
	Extra    map[string]any     `json:"extra,omitempty"`
	Warnings []string           `json:"warnings,omitempty"`
	Logs     string             `json:"logs,omitempty"`
}

type errorField struct {
	Kind      engine.ErrorKind `json:"kind"`
	Message   string           `json:"message"`
	Traceback string           `json:"traceback,omitempty"`
}

func toLine(r engine.Result) resultLine {
	l := resultLine{ID: r.ID, Score: r.Score, Feedback: r.Feedback, Scores: r.Scores,
		MS: math.Round(float64(r.Duration.Microseconds())) / 1000, Extra: r.Extra, Warnings: r.Warnings, Logs: r.Logs}
	if l.Scores == nil {
		l.Scores = map[string]float64{}
	}
	if r.Err != nil {
		l.Error = &errorField{Kind: r.Err.Kind, Message: r.Err.Message, Traceback: r.Err.Traceback}
	}
	return l
}

func runScore(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("score", flag.ContinueOnError)
	metric := fs.String("metric", "", "path of metric.py")
	data := fs.String("data", "", `case file (JSONL), or "-" for standard input`)
	out := fs.String("out", "", "results file (JSONL); default standard output")
	timeout := fs.Duration("timeout", engine.DefaultTimeout, "time limit per score call (at most 600s)")
	workers := fs.Int("workers", 1, "Python worker threads")
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	if !required(stderr, "score", map[string]string{"metric": *metric, "data": *data}) {
		return exitUsage
	}
	if *workers < 1 {
		fmt.Fprintln(stderr, "skynet score: --workers must be at least 1")
		return exitUsage
	}
	in, total, err := openCases(*data)
	if err != nil {
		fmt.Fprintf(stderr, "skynet score: %v\n", err)
		return exitUsage
	}
	defer in.Close()

	var results io.Writer
	summary := stderr
	if *out != "" {
		f, err := os.Create(*out)
		if err != nil {
			fmt.Fprintf(stderr, "skynet score: %v\n", err)
			return exitUsage
		}
		defer f.Close()
		results, summary = f, stdout
	} else {
		results = protectStdout(stdout)
	}

	e, err := engine.Open(engine.Options{Metric: *metric, Timeout: *timeout, Workers: *workers})
	if err != nil {
		var ce *engine.CheckError
		if errors.As(err, &ce) {
			f := ce.Failed()
			fmt.Fprintf(stderr, "skynet score: check %q failed: %s\n", f.Name, f.Message)
			if f.Detail != "" {
				fmt.Fprintf(stderr, "\n%s", f.Detail)
			}
			return exitCheck
		}
		fmt.Fprintf(stderr, "skynet score: %v\n", err)
		return exitUsage
	}
	defer e.Close()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var bar *progress
	if isTerminal(stderr) {
		bar = &progress{w: stderr, total: total}
	}
	st, err := scoreStream(ctx, e, in, results, *workers, bar)
	if bar != nil {
		bar.done()
	}
	if err != nil {
		fmt.Fprintf(stderr, "skynet score: %v\n", err)
		return exitUsage
	}
	st.print(summary, ctx.Err() != nil)
	return exitOK
}

// openCases opens the case file and counts its lines for the progress bar.
func openCases(path string) (io.ReadCloser, int, error) {
	if path == "-" {
		return io.NopCloser(os.Stdin), 0, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	total := 0
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() && st.Size() < 1<<30 {
		b, err := os.ReadFile(path)
		if err == nil {
			total = bytes.Count(b, []byte{'\n'})
			if len(b) > 0 && b[len(b)-1] != '\n' {
				total++
			}
		}
	}
	return f, total, nil
}

// protectStdout moves the results stream to a private copy of file
// descriptor 1 and points fd 1 at stderr, so that nothing a metric writes
// at the C level (os.write(1, ...), a C library's printf) can corrupt it.
func protectStdout(stdout io.Writer) io.Writer {
	if stdout != io.Writer(os.Stdout) {
		return stdout
	}
	fd, err := syscall.Dup(1)
	if err != nil {
		return stdout
	}
	if err := syscall.Dup3(2, 1, 0); err != nil {
		syscall.Close(fd)
		return stdout
	}
	syscall.CloseOnExec(fd)
	return os.NewFile(uintptr(fd), "results")
}

type scored struct {
	idx int
	r   engine.Result
}

// scoreStream reads cases, scores them concurrently and writes results in
// input order. Every line read yields exactly one result line.
func scoreStream(ctx context.Context, e *engine.Engine, in io.Reader, out io.Writer, workers int, bar *progress) (*stats, error) {
	type item struct {
		idx int
		c   engine.Case
		err error
	}
	items := make(chan item, 256)
	done := make(chan scored, 256)
	var readErr error
	go func() {
		defer close(items)
		cr := engine.NewCaseReader(in)
		for idx := 0; ; idx++ {
			c, err := cr.Next()
			if err == io.EOF {
				return
			}
			var le *engine.LineError
			if err != nil && !errors.As(err, &le) {
				readErr = err
				return
			}
			items <- item{idx: idx, c: c, err: err}
		}
	}()
	// Enough callers in flight to keep every worker fed while others convert.
	var wg sync.WaitGroup
	for i := 0; i < workers*4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range items {
				if it.err != nil {
					r := engine.Result{ID: it.c.ID, Feedback: it.err.Error(),
						Err: &engine.CaseError{Kind: engine.KindInput, Message: it.err.Error()}}
					done <- scored{it.idx, r}
					continue
				}
				done <- scored{it.idx, e.Score(ctx, it.c)}
			}
		}()
	}
	go func() { wg.Wait(); close(done) }()

	st := newStats()
	w := bufio.NewWriterSize(out, 1<<16)
	pending := map[int]engine.Result{}
	next := 0
	var writeErr error
	for s := range done {
		pending[s.idx] = s.r
		for {
			r, ok := pending[next]
			if !ok {
				break
			}
			delete(pending, next)
			next++
			st.add(r)
			if writeErr == nil {
				writeErr = writeResult(w, r)
			}
			if bar != nil {
				bar.step(st.count)
			}
		}
		// Results go out whole, as soon as they are in order.
		if writeErr == nil && len(done) == 0 {
			writeErr = w.Flush()
		}
	}
	if writeErr == nil {
		writeErr = w.Flush()
	}
	st.elapsed = time.Since(st.start)
	if readErr != nil {
		return st, readErr
	}
	return st, writeErr
}

func writeResult(w *bufio.Writer, r engine.Result) error {
	b, err := json.Marshal(toLine(r))
	if err != nil {
		return err
	}
	w.Write(b)
	return w.WriteByte('\n')
}

// stats is the run's summary.
type stats struct {
	start    time.Time
	elapsed  time.Duration
	count    int
	sum      float64
	named    map[string]*mean
	errors   map[engine.ErrorKind]int
	warnings int
}

type mean struct {
	sum float64
	n   int
}

func newStats() *stats {
	return &stats{start: time.Now(), named: map[string]*mean{}, errors: map[engine.ErrorKind]int{}}
}

func (s *stats) add(r engine.Result) {
	s.count++
	s.sum += r.Score
	if r.Err != nil {
		s.errors[r.Err.Kind]++
	}
	for k, v := range r.Scores {
		m := s.named[k]
		if m == nil {
			m = &mean{}
			s.named[k] = m
		}
		m.sum += v
		m.n++
	}
	if len(r.Warnings) > 0 {
		s.warnings++
	}
}

func (s *stats) print(w io.Writer, interrupted bool) {
	head := "scored"
	if interrupted {
		head = "INTERRUPTED after scoring"
	}
	rate := 0.0
	if s.elapsed > 0 {
		rate = float64(s.count) / s.elapsed.Seconds()
	}
	fmt.Fprintf(w, "%s %d case(s) in %.2fs (%.0f cases/s)\n", head, s.count, s.elapsed.Seconds(), rate)
	if s.count == 0 {
		return
	}
	fmt.Fprintf(w, "mean score: %.4f (failed cases count as 0)\n", s.sum/float64(s.count))
	if len(s.named) > 0 {
		names := make([]string, 0, len(s.named))
		for k := range s.named {
			names = append(names, k)
		}
		sort.Strings(names)
		parts := make([]string, len(names))
		for i, k := range names {
			m := s.named[k]
			parts[i] = fmt.Sprintf("%s %.4f (%d)", k, m.sum/float64(m.n), m.n)
		}
		fmt.Fprintf(w, "named scores: %s\n", strings.Join(parts, ", "))
	}
	total := 0
	kinds := make([]string, 0, len(s.errors))
	for k, n := range s.errors {
		total += n
		kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
	}
	sort.Strings(kinds)
	if total == 0 {
		fmt.Fprintln(w, "errors: none")
	} else {
		fmt.Fprintf(w, "errors: %d (%s)\n", total, strings.Join(kinds, ", "))
	}
	if s.warnings > 0 {
		fmt.Fprintf(w, "warnings: %d case(s) had side-info keys dropped (see \"warnings\" in the results)\n", s.warnings)
	}
}

// progress draws a one-line bar on a terminal.
type progress struct {
	w     io.Writer
	total int
	start time.Time
	last  time.Time
}

func (p *progress) step(n int) {
	now := time.Now()
	if p.start.IsZero() {
		p.start = now
	}
	if now.Sub(p.last) < 100*time.Millisecond && n != p.total {
		return
	}
	p.last = now
	rate := float64(n) / max(now.Sub(p.start).Seconds(), 1e-9)
	if p.total > 0 {
		const width = 30
		filled := min(width, n*width/p.total)
		fmt.Fprintf(p.w, "\r[%s%s] %d/%d  %.0f cases/s ", strings.Repeat("#", filled), strings.Repeat(".", width-filled), n, p.total, rate)
	} else {
		fmt.Fprintf(p.w, "\r%d cases  %.0f cases/s ", n, rate)
	}
}

func (p *progress) done() {
	if !p.last.IsZero() {
		fmt.Fprintln(p.w)
	}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
