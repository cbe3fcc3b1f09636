package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"iter"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/skynetml/skynet/engine"
)

func runEval(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("eval", flag.ContinueOnError)
	program := fs.String("program", "", "path of program.py (defines run(artifact, input))")
	artifactPath := fs.String("artifact", "", "file whose text is the artifact passed to run (e.g. a prompt)")
	metric := fs.String("metric", "", "path of metric.py")
	data := fs.String("data", "", "dataset: a .jsonl or .csv file, or a directory with one file per split")
	split := fs.String("split", "", "split to evaluate (train, val, test): a 'split' column's value or a file in --data")
	inputs := fs.String("inputs", "", "input columns, comma-separated (default: every column but outputs, id and split)")
	outputs := fs.String("outputs", "", "output columns, comma-separated: they make each case's expected dict")
	limit := fs.Int("limit", 0, "evaluate at most this many rows (after --sample)")
	sample := fs.Int("sample", 0, "evaluate a random sample of this many rows")
	seed := fs.Uint64("seed", 0, "seed for --sample")
	out := fs.String("out", "", "results file (JSONL); default standard output")
	resume := fs.Bool("resume", false, "continue an interrupted run: keep --out's finished results and evaluate only the rest")
	timeout := fs.Duration("timeout", engine.DefaultTimeout, "time limit per score call (at most 600s)")
	runTimeout := fs.Duration("run-timeout", 0, "time limit per run call (default: --timeout, at most 600s)")
	workers := fs.Int("workers", 1, "Python worker threads (more help when run or score wait on models)")
	interps := addInterpretersFlag(fs)
	models := addModelFlags(fs)
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	if !required(stderr, "eval", "program", *program, "artifact", *artifactPath, "metric", *metric, "data", *data) {
		return exitUsage
	}
	if *workers < 1 || *limit < 0 || *sample < 0 {
		fmt.Fprintln(stderr, "skynet eval: --workers must be at least 1; --limit and --sample must not be negative")
		return exitUsage
	}
	artifact, err := os.ReadFile(*artifactPath)
	if err != nil {
		fmt.Fprintf(stderr, "skynet eval: artifact: %v\n", err)
		return exitUsage
	}
	cases, err := engine.Dataset{Path: *data, Inputs: columns(*inputs), Outputs: columns(*outputs), Split: *split,
		Sample: *sample, Seed: *seed, Limit: *limit}.Cases()
	if err != nil {
		fmt.Fprintf(stderr, "skynet eval: %v\n", err)
		return exitUsage
	}
	results, summary, done, closeOut, err := resultsOutput(*out, *resume, stdout, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "skynet eval: %v\n", err)
		return exitUsage
	}
	defer closeOut()
	e, client, closeAll, code := openEngine("eval", stderr, models, engine.Options{Metric: *metric, Program: *program,
		Timeout: *timeout, RunTimeout: *runTimeout, Workers: *workers, Interpreters: int(*interps)})
	if code != exitOK {
		return code
	}
	defer closeAll()
	artifactText := strings.TrimRight(string(artifact), "\n")
	return runPass("eval", e, client, len(cases), done, summary, stderr, func(ctx context.Context, bar *progress) (*stats, error) {
		return writeResults(e.Evaluate(ctx, artifactText, pending(slices.Values(cases), done)), results, bar, true)
	})
}

func printResumed(w io.Writer, done map[string]bool) {
	if len(done) > 0 {
		fmt.Fprintf(w, "resumed: %d case(s) were already done and kept\n", len(done))
	}
}

func columns(s string) []string {
	var out []string
	for _, c := range strings.Split(s, ",") {
		if c = strings.TrimSpace(c); c != "" {
			out = append(out, c)
		}
	}
	return out
}

// openFailed reports why the engine did not open: a failed check (exit 1)
// or anything else (exit 2).
func openFailed(stderr io.Writer, cmd string, err error) int {
	var ce *engine.CheckError
	if errors.As(err, &ce) {
		f := ce.Failed()
		fmt.Fprintf(stderr, "skynet %s: check %q failed: %s\n", cmd, f.Name, f.Message)
		if f.Detail != "" {
			fmt.Fprintf(stderr, "\n%s", f.Detail)
		}
		return exitCheck
	}
	fmt.Fprintf(stderr, "skynet %s: %v\n", cmd, err)
	return exitUsage
}

// resultsOutput opens where results go: --out, or a protected stdout. The
// summary goes to stdout when results go to a file, else to stderr. With
// resume, the file keeps its finished results (see resumeResults) and done
// holds their ids.
func resultsOutput(out string, resume bool, stdout, stderr io.Writer) (results, summary io.Writer, done map[string]bool, closeFn func(), err error) {
	if out == "" {
		if resume {
			return nil, nil, nil, nil, errors.New("--resume needs --out: the results file to continue")
		}
		return protectStdout(stdout), stderr, nil, func() {}, nil
	}
	flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if resume {
		if done, err = resumeResults(out); err != nil {
			return nil, nil, nil, nil, err
		}
		flags = os.O_WRONLY | os.O_CREATE | os.O_APPEND
	}
	f, err := os.OpenFile(out, flags, 0o644)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	return f, stdout, done, func() { f.Close() }, nil
}

// pending filters out the cases a resumed run has already done.
func pending(cases iter.Seq[engine.Case], done map[string]bool) iter.Seq[engine.Case] {
	if len(done) == 0 {
		return cases
	}
	return func(yield func(engine.Case) bool) {
		for c := range cases {
			if !done[c.ID] && !yield(c) {
				return
			}
		}
	}
}

// warnWedges tells the user, once per wedge, which case holds the Python
// interpreter in C code, so a stalled run does not look like a silent hang.
func warnWedges(ctx context.Context, e *engine.Engine, stderr io.Writer) {
	var last engine.Wedge
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if w, ok := e.Wedged(); ok && w != last {
			last = w
			fmt.Fprintf(stderr, "\nskynet: case %s is stuck in C code holding the Python interpreter (since %s); no case can run until it returns\n",
				w.CaseID, w.Since.Format(time.TimeOnly))
		}
	}
}
