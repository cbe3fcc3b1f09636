package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"iter"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/skynetml/skynet/caseio"
	"github.com/skynetml/skynet/engine"
	"github.com/skynetml/skynet/llm"
	"github.com/skynetml/skynet/pool"
)

func runScore(args []string, stdout, stderr io.Writer) int {
	stderr = syncWriter(stderr)
	fs := flag.NewFlagSet("score", flag.ContinueOnError)
	metric := fs.String("metric", "", "path of metric.py")
	data := fs.String("data", "", `case file (JSONL), or "-" for standard input`)
	of := addOutputFlags(fs, "score")
	out := of.out
	timeout := fs.Duration("timeout", engine.DefaultTimeout, "time limit per score call (at most 600s)")
	sv := addSupervisorFlags(fs)
	sf := addShardFlags(fs)
	models := addModelFlags(fs)
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if !required(stderr, "score", "metric", *metric, "data", *data) || missingFiles(stderr, "score", "metric", *metric) ||
		caseFile(stderr, "score", *data) || (*data != "-" && missingFiles(stderr, "score", "data", *data)) || venvRefused(stderr, "score") {
		return exitUsage
	}
	renamed(fs, stderr)
	shard, err := sf.spec()
	if err != nil {
		fmt.Fprintf(stderr, "skynet score: %v\n", err)
		return exitUsage
	}
	*out = shard.outPath(*out)
	name := *data
	if name == "-" {
		name = "standard input"
	}
	in, head, err := openCases(*data)
	if err != nil {
		fmt.Fprintf(stderr, "skynet score: %v\n", err)
		return exitUsage
	}
	defer in.Close()
	total := head.lines
	switch {
	case head.empty:
		fmt.Fprintf(stderr, "skynet score: %s has no cases: it is empty or holds only blank lines\n", *data)
		return exitUsage
	case head.notCases(*data):
		// Refused before a result is written: each row would be an input error.
		fmt.Fprintf(stderr, "skynet score: %s\n", notJSONLMessage(name, head.firstLine, *data, true))
		return exitUsage
	}
	made, err := identityOf("score", "metric", *metric)
	if err != nil {
		fmt.Fprintf(stderr, "skynet score: %v\n", err)
		return exitUsage
	}
	dest, err := resultsOutput(of, made, []inputFile{
		{"data", *data, "the case file"}, {"metric", *metric, "the metric"},
		{"prices", *models.prices, "the price file"}, {"llm-cache", *models.cache, "the model-reply cache"},
	}, stdout, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "skynet score: %v\n", err)
		return exitUsage
	}
	defer dest.close()
	summary, done := dest.summary, dest.done
	if len(done) > 0 && *data != "-" {
		ids := fileIDs(*data, sv.maxLine)
		if id, ok := foreignID(done, func(id string) bool { return ids[id] && shard.takes(id) }); ok {
			fmt.Fprintf(stderr, "skynet score: --resume: %s\n", foreignMessage(*out, shard.of(*data), id))
			return exitUsage
		}
	}
	results, err := dest.open()
	if err != nil {
		fmt.Fprintf(stderr, "skynet score: %v\n", err)
		return exitUsage
	}
	var saidHint atomic.Bool
	info := &inputInfo{total: total, notJSONL: func(line int, text []byte) {
		csv := looksCSV(*data, text)
		saidHint.Store(csv)
		fmt.Fprintf(stderr, "skynet score: %s\n", notJSONLMessage(name, line, *data, csv))
	}}
	if dest.order != nil {
		info.keptAt = dest.order.keptAt
	}
	info.repeated = func(d *duplicateIDError) {
		fmt.Fprintf(stderr, "skynet score: %s %v: that line's result is an input error\n", name, d)
	}
	tasks, readErr, foreign := caseTasks(in, *data, done, sv.maxLine, shard, newIDSet(total), info)
	client, err := models.client()
	if err != nil {
		fmt.Fprintf(stderr, "skynet score: %v\n", err)
		return exitUsage
	}
	defer client.Close()
	opts := sv.poolOptions("score", engine.Options{Metric: *metric, Timeout: *timeout, LLM: client}, total, stderr)
	s := sv.supervisor("score", opts, client, results, stderr)
	s.tasks, s.readErr, s.shard, s.kept, s.order = tasks, readErr, shard, dest.kept, dest.order
	s.cluster, s.sumJSON = *of.cluster, *of.summaryJSON
	s.noCases = func() string {
		msg := fmt.Sprintf("no line of %s is a case (see the input errors in the results)", name)
		if info.rowLike.Load() && !saidHint.Load() {
			// The lines are JSON objects, but of columns: a dataset.
			msg += "; " + evalHint(*data)
		}
		return msg
	}
	s.noInput = func() string {
		if info.lines.Load() > 0 {
			return "" // a shard without cases, or a run resumed with every case done, had cases
		}
		return fmt.Sprintf("%s has no cases: it is empty or holds only blank lines", name)
	}
	if shard.Count > 1 {
		total = 0 // how many cases the shard has is known at the end
	}
	code := runSupervised(s, max(0, total-len(done)), done, summary, stderr)
	if id, ok := foreign(); ok && *data == "-" && s.inputDone && s.readErr() == nil {
		fmt.Fprintf(stderr, "skynet score: warning: --resume: %s\n", foreignMessage(*out, "the cases read from standard input", id))
	}
	return code
}

// evalHint points from a dataset given to skynet score to the command that
// reads datasets: rows of columns, CSV or JSONL, that a program is run on.
func evalHint(data string) string {
	if data == "-" {
		data = "FILE"
	}
	return fmt.Sprintf("to evaluate a dataset (CSV, or JSONL rows of columns), use skynet eval --data %s --program program.py --artifact FILE --metric metric.py", data)
}

// notJSONLMessage says a case file is not JSONL, from its first line's
// number, pointing to skynet eval when it looks like a CSV file.
func notJSONLMessage(name string, line int, data string, csv bool) string {
	hint := ""
	if csv {
		hint = "; " + evalHint(data)
	}
	return fmt.Sprintf("%s is not JSONL: line %d does not start with \"{\" (a case file has one JSON object a line: {\"id\", \"input\", \"output\", \"expected\"})%s",
		name, line, hint)
}

// caseFileHead is what openCases learns of a regular file before it is
// scored, in one pass through a small buffer (reading it whole cost a run of
// a 25 MB file a tenth of its parent's CPU in copies and page faults).
type caseFileHead struct {
	lines     int      // for the progress bar (a last one without its newline too)
	empty     bool     // nothing but a byte order mark and blank space
	first     [][]byte // the first two lines that are not blank (their first 4 KiB)
	firstLine int      // the first one's number
}

// notCases says the file is a CSV (or TSV) file, not JSONL: its first line
// looks like a header and the next is not a JSON object either, so every
// line would be an input error.
func (h caseFileHead) notCases(path string) bool {
	if len(h.first) == 0 || h.first[0][0] == '{' || !looksCSV(path, h.first[0]) {
		return false
	}
	return len(h.first) == 1 || h.first[1][0] != '{'
}

// openCases opens the case file; a regular file is read through once first
// (caseFileHead), standard input and pipes are not.
func openCases(path string) (in io.ReadCloser, head caseFileHead, err error) {
	if path == "-" {
		return io.NopCloser(os.Stdin), head, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, head, err
	}
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
		if head, err = scanHead(f); err == nil {
			_, err = f.Seek(0, io.SeekStart)
		}
		if err != nil {
			f.Close()
			return nil, head, fmt.Errorf("%s: %w", path, err)
		}
	}
	return f, head, nil
}

// scanHead reads r through for its caseFileHead.
func scanHead(r io.Reader) (h caseFileHead, err error) {
	buf := make([]byte, 256<<10)
	h.empty = true
	last := byte('\n')
	bom := true
	for {
		n, err := r.Read(buf)
		chunk := buf[:n]
		if bom && n > 0 {
			chunk, bom = bytes.TrimPrefix(chunk, []byte("\ufeff")), false
		}
		if len(h.first) < 2 && len(chunk) > 0 {
			h.firstAt(chunk)
		}
		h.lines += bytes.Count(chunk, []byte{'\n'})
		if n > 0 {
			last = chunk[len(chunk)-1]
		}
		if err == io.EOF {
			if last != '\n' {
				h.lines++
			}
			return h, nil
		}
		if err != nil {
			return h, err
		}
	}
}

// firstAt keeps the first lines that are not blank from chunk, the next
// chunk of a file that has had h.lines lines before it.
func (h *caseFileHead) firstAt(chunk []byte) {
	for i, line := 0, chunk; len(line) > 0 && len(h.first) < 2; i++ {
		text, rest, _ := bytes.Cut(line, []byte{'\n'})
		if t := bytes.Trim(text, " \t\r"); len(t) > 0 {
			if h.empty {
				h.empty, h.firstLine = false, h.lines+i+1
			}
			h.first = append(h.first, append([]byte(nil), t[:min(len(t), 4<<10)]...))
		}
		line = rest
	}
}

// inputInfo is what skynet score learns of its input as it reads it, for
// what to say when no line of it was a case.
type inputInfo struct {
	// total is how many lines the input has, when known (0 when not): it
	// sizes the set of ids read.
	total int
	// notJSONL is called, once, when the first line is not even the start
	// of a JSON object (a CSV file, most likely), with the line.
	notJSONL func(line int, text []byte)
	lines    atomic.Int64 // lines that are not blank, every shard's and resumed ones too
	rowLike  atomic.Bool  // one of the first lines is a JSON object of columns, not a case
	// keptAt, when set (--resume), learns the line of each case whose
	// result was kept.
	keptAt func(id string, line int)
	// repeated, when set, learns of a line whose id an earlier line has
	// (checked only on an input read once: caseTasks).
	repeated func(*duplicateIDError)
}

// rowLikeLines is how many lines from the start are looked at for rowLike.
const rowLikeLines = 16

// looksLikeRow says a line is a dataset row, not a case: a JSON object that
// lacks "input" or "output" and has a field a case does not have.
func looksLikeRow(line []byte) bool {
	var fields map[string]json.RawMessage
	if !utf8.Valid(line) || json.Unmarshal(line, &fields) != nil || fields == nil {
		return false
	}
	_, in := fields["input"]
	_, out := fields["output"]
	if in && out {
		return false
	}
	for k := range fields {
		switch k {
		case "id", "input", "output", "expected", "observation":
		default:
			return true
		}
	}
	return false
}

// looksCSV says a file whose first line is not JSON is a CSV (or TSV) file,
// by its name or its first line, so pointing to skynet eval fits.
func looksCSV(path string, first []byte) bool {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".csv", ".tsv":
		return true
	}
	return utf8.Valid(first) && bytes.ContainsAny(first, ",\t")
}

// caseTasks reads the case file as tasks are drawn (once) for the
// supervisor: a bad line gets its input error here, ids already done
// (--resume) are passed over, and a line that repeats an earlier line's id
// (ids holds those read) gets an input error as its result, so every line
// still has one. It runs on
// the pool's own feeding goroutine, so a case crosses no goroutine of
// cmd/skynet's on its way. Once the tasks are drawn, readErr says why the
// input stopped early and foreign names a done id the input did not have.
// info, when not nil, learns what the input holds (see inputInfo): a CSV
// file, most likely, would otherwise be an input error a line and nothing
// more.
func caseTasks(in io.Reader, path string, done map[string]bool, maxLine int, shard shardSpec, ids *idSet, info *inputInfo) (tasks iter.Seq[*pool.Task], readErr func() error, foreign func() (string, bool)) {
	var err error
	resumed := map[string]bool{}
	tasks = func(yield func(*pool.Task) bool) {
		cr := caseio.NewReader(in)
		cr.MaxLineBytes = maxLine
		for {
			line, rerr := cr.NextLine()
			if rerr == io.EOF {
				return
			}
			n := cr.Line()
			var le *caseio.LineError
			if rerr != nil && !errors.As(rerr, &le) {
				err = fmt.Errorf("%s: %w", path, rerr)
				return
			}
			if info != nil {
				if info.lines.Add(1) == 1 && le == nil && len(line) > 0 && line[0] != '{' && info.notJSONL != nil {
					info.notJSONL(n, line) // only the first line tells
				}
				if le == nil && info.lines.Load() <= rowLikeLines && !info.rowLike.Load() && looksLikeRow(line) {
					info.rowLike.Store(true)
				}
			}
			var lerr error
			if le != nil {
				lerr = le
			}
			t := pool.LineTask(line, n, lerr, false)
			prev, dup := ids.add(t.ID, n)
			if dup {
				// Its own result, an input error: a kept result of the
				// same id (--resume) is the first line's, not this one's.
				d := &duplicateIDError{id: t.ID, line: n, prev: prev, what: "line"}
				if info != nil && info.repeated != nil {
					info.repeated(d)
				}
				t = pool.LineTask(nil, n, &caseio.LineError{Line: n, ID: t.ID, Msg: d.message()}, false)
			}
			if !shard.takes(t.ID) {
				continue // another shard's (ids are checked across the whole file all the same)
			}
			if done[t.ID] && !dup {
				resumed[t.ID] = true
				if info != nil && info.keptAt != nil {
					info.keptAt(t.ID, n)
				}
				continue
			}
			if !yield(t) {
				return
			}
		}
	}
	return tasks, func() error { return err }, func() (string, bool) {
		// The input is read (tasks drawn): a done id it did not have
		// is another dataset's.
		for id := range done {
			if !resumed[id] {
				return id, true
			}
		}
		return "", false
	}
}

// printModelUse adds the model calls to the summary, role by role: the
// metric model's cost is accounted apart from the run's (task model) cost.
func printModelUse(w io.Writer, use modelUse) {
	for _, role := range []llm.Role{llm.RoleTask, llm.RoleMetric} {
		u, ok := use[role]
		if !ok || u.Stats.Calls == 0 {
			continue
		}
		s := u.Stats
		cost := fmt.Sprintf("$%.6f", s.CostUSD)
		if s.Unpriced > 0 {
			cost += fmt.Sprintf(" (%d call(s) without a price: not measured; see --prices)", s.Unpriced)
		}
		fmt.Fprintf(w, "%s model %s: %d call(s), %d failed, %d retries, %d cache hit(s), %d input + %d output tokens, cost %s\n",
			role, u.Model, s.Calls, s.Failures, s.Retries, s.CacheHits, s.InputTokens, s.OutputTokens, cost)
	}
}

// progress draws a one-line bar on a terminal.
type progress struct {
	w     io.Writer
	total int
	start time.Time
	last  time.Time
	steps int // since the clock was last read
}

func (p *progress) step(n int) {
	if p.start.IsZero() {
		p.start = time.Now()
	}
	// The clock once every 64 results: a cheap case's result costs about
	// as much as reading it.
	if p.steps++; p.steps < 64 && n != p.total {
		return
	}
	p.steps = 0
	now := time.Now()
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
	if u, ok := w.(interface{ Unwrap() io.Writer }); ok {
		w = u.Unwrap() // syncWriter's
	}
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
