package main

// Parsing the subcommands' flags: one place that says what is wrong with a
// flag, the same way for every command, on one line that names the flag
// (Go's flag package would print its own message and then every flag).

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/skynetml/skynet/engine"
	"github.com/skynetml/skynet/internal/suggest"
)

// intRange is what an integer flag accepts. Every integer flag of every
// command has one (TestFlagsEveryNumberHasARange holds them to it): a value
// outside it is a usage error naming the flag and the range. A flag left
// out keeps its default, which may be outside the range (--limit's 0: no
// limit); only a value given is checked.
type intRange struct {
	min, max int64 // max 0: no upper bound
	hint     string
}

var intRanges = map[string]intRange{
	"samples":           {min: 1},
	"threads":           {min: 1},
	"workers":           {min: 1},
	"max-crashes":       {min: 1},
	"max-line-bytes":    {min: 1},
	"shards":            {min: 1, hint: "leave it out to take SKYNET_SHARDS"},
	"limit":             {min: 1, hint: "leave it out to evaluate every row"},
	"sample":            {min: 1, hint: "leave it out to evaluate every row"},
	"seed":              {min: 0}, // any seed
	"cases":             {min: 1},
	"per-process-cases": {min: 1},
	"runs":              {min: 1},
	"max-body":          {min: 1},
	"max-inflight":      {min: 1},
	"llm-max-inflight":  {min: 1},
	"show":              {min: 0},
}

// durationMax is the longest value of the duration flags that have one;
// every duration flag must be positive.
var durationMax = map[string]time.Duration{
	"timeout":     engine.MaxTimeout,
	"run-timeout": engine.MaxTimeout,
}

// seconds writes a whole number of seconds as "600s", else as Go does.
func seconds(d time.Duration) string {
	if d%time.Second == 0 {
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return d.String()
}

// parseFlags parses a subcommand's flags; it returns false after printing
// the problem (or the help, on stdout) when the command should stop with
// code. A command takes no positional argument.
func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (code int, ok bool) {
	if code, ok = parseFlagsArgs(fs, args, stdout, stderr); ok && fs.NArg() > 0 {
		fmt.Fprintf(stderr, "skynet %s: unexpected argument %q (%s)\n", fs.Name(), fs.Arg(0), positionalHint(fs))
		return exitUsage, false
	}
	return code, ok
}

// parseFlagsArgs is parseFlags for a command that takes positional
// arguments after its flags (merge's parts).
func parseFlagsArgs(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (code int, ok bool) {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	raw, err := parseRaw(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		printHelp(fs, stdout)
		return exitOK, false
	}
	if err == nil {
		err = checkValues(fs, raw)
	}
	if err != nil {
		fmt.Fprintf(stderr, "skynet %s: %s\nrun 'skynet %s -h' for the flags\n", fs.Name(), flagMessage(fs, err), fs.Name())
		return exitUsage, false
	}
	return 0, true
}

// commandHelp is each command's usage line and what it does, for -h.
var commandHelp = map[string]struct{ usage, about string }{
	"check": {"skynet check --metric metric.py --data CASES.jsonl [flags]",
		"Load the metric in a worker process and run the contract check on --samples cases: exit 0 when every check passes, 1 when one fails."},
	"score": {"skynet score --metric metric.py --data CASES.jsonl [--out RESULTS.jsonl [--resume]] [flags]",
		"Score a case file (JSONL, one case a line; --data - reads standard input): one result a case, in input order, on standard output or in --out; a summary after them."},
	"eval": {"skynet eval --program program.py --artifact FILE --metric metric.py --data DATASET --outputs COLUMNS [flags]",
		"Run program.py's run(artifact, input) on a dataset's rows (JSONL or CSV, or a directory of split files) and score each output: results as skynet score's."},
	"bench": {"skynet bench --metric metric.py [--file CASES.jsonl [--file-only]] [flags]",
		"Time the engine, a pure-Python loop and subprocess baselines side by side; with --file, skynet score with N and 1 processes against the plain script and multiprocessing.Pool(N)."},
	"serve": {"skynet serve --metric metric.py [--listen 127.0.0.1:8765] [flags]",
		"Load the metric once and score over HTTP: POST /v1/score (NDJSON or JSON cases), POST /v1/rewards (OpenRLHF), GET /healthz, /livez, /metrics."},
	"compare": {"skynet compare BASE.jsonl NEW.jsonl [flags]   (or --base PART... --new PART...)",
		"Pair two runs' results by case id: each mean, the difference with its 95% interval from the paired differences, McNemar's exact test for 0/1 scores, each named score's difference, and the cases that got worse and better, with both feedbacks."},
	"report": {"skynet report RESULTS.jsonl [--base BASE.jsonl] -o report.html",
		"Write one self-contained HTML file (no network fetch) to look at a run: the summary, histograms, named scores with intervals, errors, call times and a table of cases to sort and filter; with --base, the paired comparison and the cases that changed."},
	"merge": {"skynet merge --data CASES.jsonl [--eval [--split S]] [--out RESULTS.jsonl] PART...",
		"Put the results files of --shard runs together in input order, once every case has exactly one result."},
}

// flagValueNames name what a flag's value is, in -h, where its type would not.
var flagValueNames = map[string]string{
	"processes": "N|auto", "metric": "PATH", "program": "PATH", "python": "PATH", "data": "FILE", "out": "FILE",
	"file": "FILE", "artifact": "FILE", "prices": "FILE", "llm-cache": "FILE", "shard": "I/N", "listen": "HOST:PORT",
	"llm-base-url": "URL", "token": "TOKEN", "split": "NAME", "inputs": "COLUMNS", "outputs": "COLUMNS",
}

// renamedFlags are old flag names, kept working and left out of -h.
var renamedFlags = map[string]string{"interpreters": "processes", "workers": "threads"}

// parseFlagsAnywhere is parseFlagsArgs for a command whose flags may come
// after its file arguments too (skynet compare a.jsonl b.jsonl --json): it
// returns the arguments that are not flags, in order.
func parseFlagsAnywhere(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (pos []string, code int, ok bool) {
	for {
		if code, ok := parseFlagsArgs(fs, args, stdout, stderr); !ok {
			return nil, code, false
		}
		if fs.NArg() == 0 {
			return pos, 0, true
		}
		pos, args = append(pos, fs.Arg(0)), fs.Args()[1:]
	}
}

// printHelp is what skynet CMD -h and skynet help CMD print: the usage
// line, what the command does, then each flag as it is typed (--name), its
// value's form and its default.
func printHelp(fs *flag.FlagSet, w io.Writer) {
	h, ok := commandHelp[fs.Name()]
	if !ok {
		h.usage = "skynet " + fs.Name() + " [flags]"
	}
	fmt.Fprintf(w, "usage: %s\n", h.usage)
	if h.about != "" {
		fmt.Fprintf(w, "\n%s\n", h.about)
	}
	fmt.Fprintf(w, "\nflags:\n")
	var old []string
	fs.VisitAll(func(f *flag.Flag) {
		if now, ok := renamedFlags[f.Name]; ok {
			old = append(old, fmt.Sprintf("--%s (now --%s)", f.Name, now))
			return
		}
		if len(f.Name) == 1 {
			return // a short name, said in its long flag's line
		}
		kind, usage := flag.UnquoteUsage(f)
		switch {
		case kind == "": // a boolean flag takes no value
		case flagValueNames[f.Name] != "":
			kind = flagValueNames[f.Name]
		case strings.HasSuffix(f.Name, "-model"):
			kind = "MODEL"
		case kind == "duration":
			kind = "DURATION"
		case kind == "int" || kind == "uint":
			kind = "N"
		case kind == "string" || kind == "value":
			kind = "VALUE"
		}
		name := "--" + f.Name
		if kind != "" {
			name += " " + kind
		}
		if def := f.DefValue; def != "" && def != "0" && def != "false" {
			if d, err := time.ParseDuration(def); err == nil {
				def = seconds(d)
			}
			usage += " (default " + def + ")"
		}
		fmt.Fprintf(w, "  %-26s %s\n", name, usage)
	})
	if len(old) > 0 {
		fmt.Fprintf(w, "\nold names, still accepted: %s\n", strings.Join(old, ", "))
	}
}

// rawValue keeps the text a flag was given, for messages ("got 0", not
// "got 0s").
type rawValue struct {
	flag.Value
	raw string
}

func (r *rawValue) Set(s string) error { r.raw = s; return r.Value.Set(s) }

// parseRaw parses args into fs and returns the text each flag given had.
func parseRaw(fs *flag.FlagSet, args []string) (map[string]string, error) {
	var wrapped []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) {
		if _, isBool := f.Value.(interface{ IsBoolFlag() bool }); !isBool {
			f.Value = &rawValue{Value: f.Value}
			wrapped = append(wrapped, f)
		}
	})
	err := fs.Parse(args)
	raw := map[string]string{}
	for _, f := range wrapped {
		r := f.Value.(*rawValue)
		f.Value = r.Value
		raw[f.Name] = r.raw
	}
	return raw, err
}

// checkValues holds each flag given to its range; raw is the text given.
func checkValues(fs *flag.FlagSet, raw map[string]string) error {
	var err error
	fs.Visit(func(f *flag.Flag) {
		if err != nil {
			return
		}
		g, ok := f.Value.(flag.Getter)
		if !ok {
			return
		}
		switch v := g.Get().(type) {
		case time.Duration:
			max := durationMax[f.Name]
			switch {
			case v <= 0:
				err = fmt.Errorf("--%s must be a positive duration, got %s", f.Name, raw[f.Name])
			case max > 0 && v > max:
				err = fmt.Errorf("--%s must be at most %s, got %s", f.Name, seconds(max), raw[f.Name])
			}
		case int:
			err = checkInt(f.Name, int64(v))
		case uint64:
			err = checkInt(f.Name, int64(min(v, math.MaxInt64)))
		}
	})
	return err
}

func checkInt(name string, v int64) error {
	r, ok := intRanges[name]
	if !ok {
		return nil
	}
	if v >= r.min && (r.max == 0 || v <= r.max) {
		return nil
	}
	what := fmt.Sprintf("at least %d", r.min)
	if r.max > 0 {
		what = fmt.Sprintf("from %d to %d", r.min, r.max)
	}
	msg := fmt.Sprintf("--%s must be %s, got %d", name, what, v)
	if r.hint != "" {
		msg += " (" + r.hint + ")"
	}
	return errors.New(msg)
}

var (
	errUndefined = regexp.MustCompile(`^flag provided but not defined: -+(.*)$`)
	errValue     = regexp.MustCompile(`^invalid value "(.*)" for flag -([^:]+): (.*)$`)
	errBool      = regexp.MustCompile(`^invalid boolean value "(.*)" for -([^:]+): `)
	errNoValue   = regexp.MustCompile(`^flag needs an argument: -+(.*)$`)
)

// flagMessage says what is wrong in skynet's words: a flag named as --name,
// the closest flag to an unknown one, a duration's missing unit.
func flagMessage(fs *flag.FlagSet, err error) string {
	msg := err.Error()
	if m := errUndefined.FindStringSubmatch(msg); m != nil {
		name, _, _ := strings.Cut(m[1], "=")
		out := "unknown flag --" + name
		if near := closestFlag(fs, name); near != "" {
			out += " (did you mean --" + near + "?)"
		}
		return out
	}
	if m := errBool.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("--%s=%s: --%s takes no value, or =true or =false", m[2], m[1], m[2])
	}
	if m := errNoValue.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("--%s needs a value", m[1])
	}
	if m := errValue.FindStringSubmatch(msg); m != nil {
		value, name, why := m[1], m[2], m[3]
		f := fs.Lookup(name)
		if g, ok := f.Value.(flag.Getter); ok {
			switch g.Get().(type) {
			case time.Duration:
				if _, err := strconv.ParseFloat(value, 64); err == nil {
					return fmt.Sprintf("--%s %s: a duration needs a unit, such as %ss or 500ms", name, value, value)
				}
				return fmt.Sprintf("--%s %s: not a duration: write a number and a unit, such as 5s, 500ms or 2m", name, value)
			case int, uint64:
				if r, ok := intRanges[name]; ok {
					if r.max > 0 {
						return fmt.Sprintf("--%s %s: want a whole number from %d to %d", name, value, r.min, r.max)
					}
					return fmt.Sprintf("--%s %s: want a whole number of at least %d", name, value, r.min)
				}
				return fmt.Sprintf("--%s %s: want a whole number", name, value)
			}
		}
		return fmt.Sprintf("--%s %s: %s", name, value, why)
	}
	return msg
}

// closestFlag is the flag of fs nearest to name by edit distance, when it
// is near enough to be a typo of it.
func closestFlag(fs *flag.FlagSet, name string) string {
	best, bestD := "", math.MaxInt
	fs.VisitAll(func(f *flag.Flag) {
		if d := suggest.Distance(name, f.Name); d < bestD {
			best, bestD = f.Name, d
		}
	})
	if bestD <= max(1, min(3, len(name)/3)) {
		return best
	}
	return ""
}

// positionalHint says how to pass what was given as an argument: files go
// in flags.
func positionalHint(fs *flag.FlagSet) string {
	metric, data := "metric.py", "cases.jsonl"
	for _, a := range fs.Args() {
		switch ext := strings.ToLower(filepath.Ext(a)); {
		case ext == ".py":
			metric = a
		case ext == ".jsonl" || ext == ".csv" || ext == ".json":
			data = a
		}
	}
	if fs.Lookup("metric") == nil || fs.Lookup("data") == nil {
		return "skynet " + fs.Name() + " takes flags only"
	}
	return fmt.Sprintf("pass files as --metric %s --data %s", metric, data)
}

// wantsJSON says whether args ask for --json (before a "--", if any).
func wantsJSON(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if name == "json" {
			v, err := strconv.ParseBool(value)
			return !hasValue || (err == nil && v)
		}
	}
	return false
}

// jsonErrors runs a command that has --json so that, with --json, a
// failure that printed nothing on stdout (a usage or file error, a metric
// that would not load) still prints a JSON object there,
// {"ok": false, "error": "..."}, with the message also on stderr as
// without --json and the exit code kept.
func jsonErrors(cmd string, args []string, stdout, stderr io.Writer, run func(args []string, stdout, stderr io.Writer) int) int {
	if !wantsJSON(args) {
		return run(args, stdout, stderr)
	}
	out := &countingWriter{w: stdout}
	var msg bytes.Buffer // written through one lockedWriter, read once run returns
	code := run(args, out, syncWriter(io.MultiWriter(stderr, &msg)))
	if code != exitOK && out.n.Load() == 0 {
		prefix := "skynet " + cmd + ": "
		var lines []string
		for _, l := range strings.Split(strings.TrimSpace(msg.String()), "\n") {
			if l = strings.TrimPrefix(l, prefix); !strings.HasPrefix(l, "run 'skynet ") {
				lines = append(lines, l)
			}
		}
		text := strings.TrimSpace(strings.Join(lines, "\n"))
		if text == "" {
			text = fmt.Sprintf("skynet %s exited %d", cmd, code)
		}
		b, _ := json.MarshalIndent(struct {
			OK    bool   `json:"ok"`
			Error string `json:"error"`
		}{false, text}, "", "  ")
		fmt.Fprintf(stdout, "%s\n", b)
	}
	return code
}

type countingWriter struct {
	w io.Writer
	n atomic.Int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.n.Add(int64(len(p)))
	return c.w.Write(p)
}
